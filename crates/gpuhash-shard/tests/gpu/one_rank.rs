//! The contract's conformance suites on tables of one shard: every path of a batch runs
//! (split, the exchange's two steps as copies, the shard's form, the answers gathered back
//! in input order, the undo of a failed batch), with no NCCL ([`Comm::single`]) and
//! through NCCL ([`Comm::from_rank`], rank 0 of 1: the path of several processes, with
//! no peer; these print a note and pass where NCCL cannot be loaded).
//!
//! The suites take the device-memory guards themselves (the map suite's last check fills
//! the device).

use gpuhash_core::Device;
use gpuhash_core::table::{Key, Value};
use gpuhash_cuckoo::CuckooError;
use gpuhash_shard::{Comm, CommId, ShardOptions, ShardedMap, nccl_available, nccl_missing_help};
use gpuhash_slab_hash::SlabHashMap;
use gpuhash_test_support::{combining_conformance, map_conformance};

fn one_rank<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<ShardedMap<K, V>, CuckooError> {
    ShardedMap::new(Comm::single(device)?, ShardOptions::with_capacity(capacity))
}

/// Rank 0 of a communicator of one, made through `ncclCommInitRank` with a fresh id.
fn nccl_rank<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<ShardedMap<K, V>, CuckooError> {
    let comm = Comm::from_rank(device, &CommId::new()?, 0, 1)?;
    ShardedMap::new(comm, ShardOptions::with_capacity(capacity))
}

/// Whether NCCL loads; a note saying the test is skipped where it does not.
fn nccl_here(test: &str) -> bool {
    let here = nccl_available();
    if !here {
        println!("{test}: skipped, {}", nccl_missing_help());
    }
    here
}

#[test]
#[ignore = "needs a CUDA device"]
fn conformance_u32_u64() {
    map_conformance(one_rank::<u32, u64>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn conformance_u32_u32() {
    map_conformance(one_rank::<u32, u32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn conformance_u64_u64() {
    map_conformance(one_rank::<u64, u64>);
}

/// Slab hash shards: any map of the contract shards.
#[test]
#[ignore = "needs a CUDA device"]
fn conformance_slab_hash_shards() {
    map_conformance(|device, capacity| {
        let options =
            ShardOptions::<gpuhash_cuckoo::CuckooTable<u64, u32>>::with_capacity(capacity)
                .make_shard(SlabHashMap::<u64, u32>::with_capacity);
        gpuhash_shard::ShardedTable::new(Comm::single(device)?, options)
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn combining_u32_u32() {
    combining_conformance(one_rank::<u32, u32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn combining_u64_u64() {
    combining_conformance(one_rank::<u64, u64>);
}

/// Slab hash shards combine too.
#[test]
#[ignore = "needs a CUDA device"]
fn combining_slab_hash_shards() {
    combining_conformance(|device, capacity| {
        let options =
            ShardOptions::<gpuhash_cuckoo::CuckooTable<u64, u32>>::with_capacity(capacity)
                .make_shard(SlabHashMap::<u64, u32>::with_capacity);
        gpuhash_shard::ShardedTable::new(Comm::single(device)?, options)
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn conformance_through_nccl_u32_u64() {
    if nccl_here("conformance_through_nccl_u32_u64") {
        map_conformance(nccl_rank::<u32, u64>);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn conformance_through_nccl_u64_u64() {
    if nccl_here("conformance_through_nccl_u64_u64") {
        map_conformance(nccl_rank::<u64, u64>);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn combining_through_nccl_u64_u64() {
    if nccl_here("combining_through_nccl_u64_u64") {
        combining_conformance(nccl_rank::<u64, u64>);
    }
}

/// The id's bytes round-trip, and a communicator of one through NCCL reports its ranks.
#[test]
#[ignore = "needs a CUDA device"]
fn comm_ids_round_trip_and_name_one_rank() {
    if !nccl_here("comm_ids_round_trip_and_name_one_rank") {
        return;
    }
    let id = CommId::new().expect("an id");
    assert_eq!(CommId::from_bytes(id.to_bytes()), id);
    assert_ne!(CommId::new().expect("another id"), id);
    let device = gpuhash_test_support::device();
    let comm = Comm::from_rank(device, &id, 0, 1).expect("rank 0 of 1");
    assert_eq!(
        (comm.ranks(), comm.local_ranks(), comm.is_whole()),
        (1, 0..1, true)
    );
    assert!(Comm::from_rank(device, &id, 1, 1).is_err());
    assert!(Comm::from_rank(device, &id, 0, 0).is_err());
}
