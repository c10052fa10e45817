//! One table over several processes, one rank each ([`Comm::from_rank`]), as a job over
//! several hosts runs it. The test binary starts itself again once a GPU (rank `r` on
//! device `r`), telling each child its rank, the rank count and the communicator's id in
//! `GPUHASH_SHARD_RANK`; the parent passes once every child has. Each child knows every
//! rank's batches (they come from seeded generators), so it checks every answer against a
//! model of the whole table. Below two GPUs the test prints a note and passes.

use std::collections::HashMap;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpuhash_core::table::{
    Combine, CombiningMap, DevicePairs, ErrorKind, Map, MemoryUsage, Table, TableError,
};
use gpuhash_core::{Device, DeviceBuffer, Error, Stream};
use gpuhash_cuckoo::{CuckooError, CuckooTable};
use gpuhash_shard::{
    COMM_ID_BYTES, Comm, CommId, ShardOptions, ShardedMap, ShardedTable, nccl_available,
    nccl_missing_help,
};
use gpuhash_test_support::{SeededRng, shared_memory};

/// Where a child finds its place: `RANK RANKS ID`, the id in hex.
const RANK_VAR: &str = "GPUHASH_SHARD_RANK";

/// How long the parent waits for its children: a child that fails leaves the others
/// waiting in NCCL, and the parent then stops them.
const WAIT: Duration = Duration::from_secs(300);

/// A child's place in the communicator.
struct Place {
    rank: usize,
    ranks: usize,
    id: CommId,
}

/// In a child, its place. In the parent, `None` once one child a GPU has run `test` (its
/// full name in the test binary) and every one has passed; panics naming the ranks that
/// failed. Below two GPUs, `None` after a note.
fn place_or_spawn(test: &str) -> Option<Place> {
    if let Ok(place) = std::env::var(RANK_VAR) {
        return Some(parse_place(&place));
    }
    let ranks = Device::count().expect("a CUDA driver");
    if ranks < 2 {
        println!("{test}: {ranks} GPU visible, needs two or more; skipped");
        return None;
    }
    assert!(nccl_available(), "{}", nccl_missing_help());
    let _memory = shared_memory();
    let id = CommId::new().expect("a communicator id");
    let binary = std::env::current_exe().expect("the test binary's path");
    let children: Vec<Child> = (0..ranks)
        .map(|rank| {
            Command::new(&binary)
                .args(["--ignored", "--exact", test, "--nocapture"])
                .env(RANK_VAR, format!("{rank} {ranks} {}", hex(&id.to_bytes())))
                .spawn()
                .expect("a child process")
        })
        .collect();
    let failed = wait_all(children);
    assert!(failed.is_empty(), "{test}: ranks {failed:?} failed");
    None
}

/// Waits for every child, at most [`WAIT`] in all, then stops those still running;
/// returns the ranks that did not pass.
fn wait_all(mut children: Vec<Child>) -> Vec<usize> {
    let started = Instant::now();
    let mut outcomes: Vec<Option<bool>> = vec![None; children.len()];
    while outcomes.iter().any(Option::is_none) && started.elapsed() < WAIT {
        for (child, outcome) in children.iter_mut().zip(&mut outcomes) {
            if outcome.is_none() {
                *outcome = child
                    .try_wait()
                    .expect("a child's status")
                    .map(|status| status.success());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for (child, outcome) in children.iter_mut().zip(&outcomes) {
        if outcome.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    (0..children.len())
        .filter(|&rank| outcomes[rank] != Some(true))
        .collect()
}

fn parse_place(place: &str) -> Place {
    let fields: Vec<&str> = place.split(' ').collect();
    let [rank, ranks, id] = fields[..] else {
        panic!("{RANK_VAR}={place:?}: not RANK RANKS ID");
    };
    Place {
        rank: rank.parse().expect("a rank"),
        ranks: ranks.parse().expect("a rank count"),
        id: CommId::from_bytes(unhex(id)),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> [u8; COMM_ID_BYTES] {
    assert_eq!(
        text.len(),
        2 * COMM_ID_BYTES,
        "an id of {COMM_ID_BYTES} bytes"
    );
    std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
}

/// The keys rank `rank` inserts first: more for higher ranks, none for the last (which
/// takes part in every batch with nothing of its own).
fn keys_of(rank: usize, ranks: usize) -> Vec<u64> {
    match rank + 1 == ranks {
        true => Vec::new(),
        false => SeededRng::new(1000 + rank as u64).distinct_keys((1 << 14) + 1000 * rank),
    }
}

fn value_of(key: u64) -> u64 {
    key.rotate_left(17) ^ 0x5eed
}

fn values_of(keys: &[u64]) -> Vec<u64> {
    keys.iter().map(|&k| value_of(k)).collect()
}

/// The map's pairs against the model, sorted.
fn check_contents<M: Map<Key = u64, Value = u64>>(map: &M, model: &HashMap<u64, u64>, after: &str) {
    let mut pairs = map.export().expect("export");
    pairs.sort_unstable();
    let mut expected: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    expected.sort_unstable();
    assert_eq!(pairs.len(), expected.len(), "after {after}");
    assert!(
        pairs == expected,
        "after {after}: the pairs differ from the model"
    );
    assert_eq!(map.len().expect("len"), model.len(), "after {after}");
}

/// Every rank inserts, looks up (its own keys, the next rank's, misses), removes,
/// upserts into keys common to all, gives ids to fresh common keys, and exports, each
/// with a batch of its own; one rank passes arguments of the wrong length and the others'
/// batch still goes in.
#[test]
#[ignore = "needs a CUDA device"]
fn ranks_share_one_table() {
    let Some(place) = place_or_spawn("processes::ranks_share_one_table") else {
        return;
    };
    let (rank, ranks) = (place.rank, place.ranks);
    let device = Device::new(rank).expect("the rank's GPU");
    let comm = Comm::from_rank(&device, &place.id, rank, ranks).expect("joining the ranks");
    assert_eq!((comm.ranks(), comm.local_ranks()), (ranks, rank..rank + 1));
    let map =
        ShardedMap::<u64, u64>::new(comm, ShardOptions::with_capacity(1 << 18)).expect("a table");

    let mine = keys_of(rank, ranks);
    map.insert(&mine, &values_of(&mine)).expect("insert");
    let mut model: HashMap<u64, u64> = (0..ranks)
        .flat_map(|r| keys_of(r, ranks))
        .map(|k| (k, value_of(k)))
        .collect();
    let owned = model
        .keys()
        .filter(|&&k| ShardedMap::<u64, u64>::owner_of(k, ranks) == rank)
        .count();
    assert_eq!(map.shard(rank).len().expect("shard len"), owned);
    check_contents(&map, &model, "insert");

    let mut probes = mine.clone();
    probes.extend(keys_of((rank + 1) % ranks, ranks));
    probes.extend(SeededRng::new(77 + rank as u64).distinct_keys::<u64>(1000));
    probes.reverse();
    let answers = map.get(&probes).expect("get");
    for (key, answer) in probes.iter().zip(&answers) {
        assert_eq!(
            *answer,
            model.get(key).copied(),
            "rank {rank}, key {key:#x}"
        );
    }
    let stream = device.new_stream().expect("a stream");
    let on_device = DeviceBuffer::from_host(&stream, &probes).expect("probes");
    let mut found = DeviceBuffer::zeroed(&stream, probes.len()).expect("flags");
    map.contains_async(&stream, &on_device, &mut found)
        .expect("contains");
    let found = found.to_host(&stream).expect("flags");
    for (key, found) in probes.iter().zip(found) {
        assert_eq!(
            found != 0,
            model.contains_key(key),
            "rank {rank}, key {key:#x}"
        );
    }

    let removed = map.remove(&mine[..mine.len() / 2]).expect("remove");
    assert!(
        removed.iter().all(|&r| r),
        "rank {rank}: a held key not removed"
    );
    for r in 0..ranks {
        let keys = keys_of(r, ranks);
        for key in &keys[..keys.len() / 2] {
            model.remove(key);
        }
    }
    check_contents(&map, &model, "remove");

    // Every rank adds rank + 1 to the same keys, new ones and held ones.
    let mut common = SeededRng::new(5).distinct_keys::<u64>(4096);
    let held = keys_of(0, ranks);
    common.extend(&held[held.len() / 2..held.len() / 2 + 100]);
    map.upsert(&common, &vec![rank as u64 + 1; common.len()], Combine::Add)
        .expect("upsert");
    for key in &common {
        let sum: u64 = (1..=ranks as u64).sum();
        *model.entry(*key).or_insert(0) += sum;
    }
    check_contents(&map, &model, "upsert");

    // Fresh keys, each given one rank's candidate, the same on every rank.
    let fresh = SeededRng::new(6).distinct_keys::<u64>(4096);
    let candidates: Vec<u64> = (0..fresh.len() as u64)
        .map(|i| (rank as u64) << 32 | i)
        .collect();
    let ids = map
        .insert_or_find(&fresh, &candidates)
        .expect("insert_or_find");
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            id & 0xffff_ffff,
            i as u64,
            "rank {rank}: id {id:#x} of key {i}"
        );
        assert!(
            id >> 32 < ranks as u64,
            "rank {rank}: id {id:#x} of no rank"
        );
    }
    let got = map.get(&fresh).expect("get of the fresh keys");
    assert!(got.iter().zip(&ids).all(|(got, id)| *got == Some(*id)));
    model.extend(fresh.iter().copied().zip(ids.iter().copied()));

    // Rank 0's arguments are wrong: it fails, the others' batch goes in.
    let extra = SeededRng::new(2000 + rank as u64).distinct_keys::<u64>(512);
    if rank == 0 {
        let keys = DeviceBuffer::from_host(&stream, &extra).expect("keys");
        let values = DeviceBuffer::from_host(&stream, &values_of(&extra[1..])).expect("values");
        let error = map
            .insert_async(&stream, &keys, &values)
            .expect_err("one value short");
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    } else {
        map.insert(&extra, &values_of(&extra))
            .expect("insert beside a refusal");
    }
    for r in 1..ranks {
        let extra = SeededRng::new(2000 + r as u64).distinct_keys::<u64>(512);
        model.extend(extra.iter().map(|&k| (k, value_of(k))));
    }
    check_contents(&map, &model, "a refused batch");

    let memory = map.memory().expect("memory");
    let own = map.shard(rank).memory().expect("the shard's memory");
    assert!(memory.bytes_reserved >= own.bytes_reserved && own.bytes_reserved > 0);
    map.clear().expect("clear");
    assert_eq!(map.len().expect("len"), 0);
}

/// A DyHash shard whose next insert fails, out of device memory and changing nothing,
/// once armed.
struct Failing {
    table: CuckooTable<u64, u64>,
    armed: AtomicBool,
}

impl Table for Failing {
    type Key = u64;
    type Error = CuckooError;

    fn device(&self) -> &Device {
        self.table.device()
    }

    fn len_on(&self, stream: &Stream) -> Result<usize, CuckooError> {
        self.table.len_on(stream)
    }

    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, CuckooError> {
        self.table.memory_on(stream)
    }

    fn clear_on(&self, stream: &Stream) -> Result<(), CuckooError> {
        self.table.clear_on(stream)
    }
}

impl Map for Failing {
    type Value = u64;

    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u64>,
        values: &DeviceBuffer<u64>,
    ) -> Result<(), CuckooError> {
        if self.armed.swap(false, Ordering::Relaxed) {
            return Err(Error::OutOfDeviceMemory.into());
        }
        self.table.insert_async(stream, keys, values)
    }

    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u64>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<u64>,
    ) -> Result<(), CuckooError> {
        self.table.get_async(stream, keys, found, values)
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u64>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), CuckooError> {
        self.table.contains_async(stream, keys, found)
    }

    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u64>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), CuckooError> {
        self.table.remove_async(stream, keys, removed)
    }

    fn export_on(&self, stream: &Stream) -> Result<DevicePairs<u64, u64>, CuckooError> {
        self.table.export_on(stream)
    }
}

/// The last rank's shard fails its part of an insert (parts from every other rank reach
/// it): every rank returns `OutOfDeviceMemory` and every shard holds what it held
/// before, new keys and replaced values alike; the next insert goes in.
#[test]
#[ignore = "needs a CUDA device"]
fn a_failure_on_one_rank_takes_every_shard_back() {
    let Some(place) = place_or_spawn("processes::a_failure_on_one_rank_takes_every_shard_back")
    else {
        return;
    };
    let (rank, ranks) = (place.rank, place.ranks);
    let device = Device::new(rank).expect("the rank's GPU");
    let comm = Comm::from_rank(&device, &place.id, rank, ranks).expect("joining the ranks");
    let options = ShardOptions::<CuckooTable<u64, u64>>::with_capacity(1 << 18).make_shard(
        |device, capacity| {
            Ok::<_, CuckooError>(Failing {
                table: CuckooTable::with_capacity(device, capacity)?,
                armed: AtomicBool::new(false),
            })
        },
    );
    let map = ShardedTable::new(comm, options).expect("a table");
    let mine = keys_of(rank, ranks);
    map.insert(&mine, &values_of(&mine)).expect("first insert");
    let model: HashMap<u64, u64> = (0..ranks)
        .flat_map(|r| keys_of(r, ranks))
        .map(|k| (k, value_of(k)))
        .collect();
    check_contents(&map, &model, "the first insert");

    if rank + 1 == ranks {
        map.shard(rank).armed.store(true, Ordering::Relaxed);
    }
    // New keys, and held keys given new values.
    let mut batch = SeededRng::new(3000 + rank as u64).distinct_keys::<u64>(4096);
    batch.extend(&mine[..mine.len() / 3]);
    let values: Vec<u64> = batch.iter().map(|k| !k).collect();
    let error = map
        .insert(&batch, &values)
        .expect_err("the last rank's shard fails");
    assert_eq!(
        error.kind(),
        ErrorKind::OutOfDeviceMemory,
        "rank {rank}: {error}"
    );
    check_contents(&map, &model, "the failed insert");

    map.insert(&batch, &values)
        .expect("the insert once the shard works");
    let mut model = model;
    for r in 0..ranks {
        let mut batch = SeededRng::new(3000 + r as u64).distinct_keys::<u64>(4096);
        let held = keys_of(r, ranks);
        batch.extend(&held[..held.len() / 3]);
        model.extend(batch.iter().map(|&k| (k, !k)));
    }
    check_contents(&map, &model, "the insert after");
}
