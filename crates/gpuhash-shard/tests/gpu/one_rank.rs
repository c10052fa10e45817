//! The contract's conformance suite on tables of one shard: every path of a batch runs
//! (split, the exchange's two steps as copies, the shard's form, the answers gathered back
//! in input order, the undo of a failed batch), with no NCCL.
//!
//! The suite takes the device-memory guards itself (its last check fills the device).

use gpuhash_core::Device;
use gpuhash_core::table::{Key, Value};
use gpuhash_cuckoo::CuckooError;
use gpuhash_shard::{Comm, ShardOptions, ShardedMap};
use gpuhash_test_support::map_conformance;

fn one_rank<K: Key, V: Value>(
    device: &Device,
    capacity: usize,
) -> Result<ShardedMap<K, V>, CuckooError> {
    ShardedMap::new(Comm::single(device)?, ShardOptions::with_capacity(capacity))
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
    use gpuhash_slab_hash::SlabHashMap;
    map_conformance(|device, capacity| {
        let options =
            ShardOptions::<gpuhash_cuckoo::CuckooTable<u64, u32>>::with_capacity(capacity)
                .make_shard(SlabHashMap::<u64, u32>::with_capacity);
        gpuhash_shard::ShardedTable::new(Comm::single(device)?, options)
    });
}
