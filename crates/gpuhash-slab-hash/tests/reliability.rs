//! Promises a user of a long-running, shared table relies on, on a real GPU: readers on
//! other threads never see a key without its own value, at any width, and memory holds
//! steady when keys come and go with no call from the user. Run on a GPU machine with
//! `--include-ignored` (see docs/gpu-testing.md).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gpuhash_core::hash::fmix64;
use gpuhash_core::table::{Key, Map, MultiMap, Set, Table};
use gpuhash_slab_hash::{Op, Outcome, SlabHashMap, SlabHashMultiMap, SlabHashOptions, SlabHashSet};
use gpuhash_test_support::{device, key_from_bits};

/// One test at a time: they time their threads against each other and size the device's
/// memory use.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The one value ever stored under `key`: never all-ones, never zero, so that a value
/// nobody wrote (an unwritten slot's all-ones, a zeroed buffer) cannot pass for it.
fn value_of<V: Key>(key: u64) -> V {
    key_from_bits::<V>((fmix64(key ^ 0x5151) >> 2) | 2)
}

/// Keys of writer `w`: the reserved words and keys equal in the low bits among them.
fn writer_keys<K: Key>(w: u64, n: u64) -> Vec<K> {
    let mut keys: Vec<K> = (0..n)
        .map(|i| key_from_bits::<K>(fmix64(w * 1_000_003 + i)))
        .collect();
    if w == 0 {
        keys.extend([u64::MAX, u64::MAX - 1, u64::MAX - 2, 0].map(key_from_bits::<K>));
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

const WRITERS: u64 = 2;
const READERS: usize = 3;
const KEYS_PER_WRITER: u64 = 150_000;
const ROUNDS: usize = 12;

/// Readers that saw a value that was never stored under its key, and reads in all.
#[derive(Default)]
struct Tally {
    wrong: AtomicU64,
    reads: AtomicU64,
}

impl Tally {
    fn check<K: Key, V: Key>(&self, keys: &[K], found: impl Iterator<Item = (usize, V)>) {
        let mut wrong = 0;
        for (i, v) in found {
            if v != value_of::<V>(keys[i].widen()) {
                wrong += 1;
            }
        }
        self.wrong.fetch_add(wrong, Ordering::Relaxed);
        self.reads.fetch_add(keys.len() as u64, Ordering::Relaxed);
    }

    fn assert_clean(&self, what: &str) {
        let (wrong, reads) = (
            self.wrong.load(Ordering::Relaxed),
            self.reads.load(Ordering::Relaxed),
        );
        eprintln!("{what}: {wrong} values nobody wrote in {reads} reads");
        assert!(reads > 0, "{what}: no reads ran");
        assert_eq!(
            wrong, 0,
            "{what}: {wrong} of {reads} reads saw a value nobody wrote"
        );
    }
}

/// Writers insert their keys (each with its one value) and remove them again, round after
/// round, while readers look all of them up; `read` returns what one lookup batch found.
fn race<K: Key, V: Key>(
    what: &str,
    insert: impl Fn(&[K]) + Sync,
    remove: impl Fn(&[K]) + Sync,
    read: impl Fn(&[K]) -> Vec<(usize, V)> + Sync,
) {
    let all: Vec<Vec<K>> = (0..WRITERS)
        .map(|w| writer_keys(w, KEYS_PER_WRITER))
        .collect();
    let readers_keys: Vec<K> = all.concat();
    let done = AtomicBool::new(false);
    let tally = Tally::default();
    std::thread::scope(|scope| {
        let writers: Vec<_> = all
            .iter()
            .map(|keys| {
                let (insert, remove) = (&insert, &remove);
                scope.spawn(move || {
                    for _ in 0..ROUNDS {
                        insert(keys);
                        remove(&keys[..keys.len() / 2]);
                        insert(&keys[..keys.len() / 2]);
                        remove(keys);
                    }
                })
            })
            .collect();
        for r in 0..READERS {
            let (read, tally, done, keys) = (&read, &tally, &done, &readers_keys);
            scope.spawn(move || {
                let chunk = keys.len() / READERS;
                let mine = &keys[r * chunk..(r + 1) * chunk];
                while !done.load(Ordering::Relaxed) {
                    tally.check(mine, read(mine).into_iter());
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    tally.assert_clean(what);
}

fn options() -> SlabHashOptions {
    SlabHashOptions::with_capacity(WRITERS * KEYS_PER_WRITER)
}

fn values_for<K: Key, V: Key>(keys: &[K]) -> Vec<V> {
    keys.iter().map(|k| value_of::<V>(k.widen())).collect()
}

fn map_readers_see_whole_pairs<K: Key, V: Key>(what: &str) {
    let map = SlabHashMap::<K, V>::new(device(), options()).unwrap();
    race::<K, V>(
        what,
        |keys| map.insert(keys, &values_for::<K, V>(keys)).unwrap(),
        |keys| drop(map.remove(keys).unwrap()),
        |keys| {
            let found = map.get(keys).unwrap();
            found
                .into_iter()
                .enumerate()
                .filter_map(|(i, v)| Some((i, v?)))
                .collect()
        },
    );
    assert_eq!(map.len().unwrap(), 0);
}

/// The same race with readers that look keys up through mixed batches (`apply`), which
/// run the warp-cooperative kernel rather than the tiled one.
fn mixed_batch_readers_see_whole_pairs<K: Key, V: Key>(what: &str) {
    let map = SlabHashMap::<K, V>::new(device(), options()).unwrap();
    race::<K, V>(
        what,
        |keys| map.insert(keys, &values_for::<K, V>(keys)).unwrap(),
        |keys| drop(map.remove(keys).unwrap()),
        |keys| {
            let ops: Vec<Op<K, V>> = keys.iter().map(|&k| Op::Get(k)).collect();
            let outcomes = map.apply(&ops).unwrap();
            (outcomes.into_iter().enumerate())
                .filter_map(|(i, o)| match o {
                    Outcome::Found(v) => Some((i, v)),
                    _ => None,
                })
                .collect()
        },
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn mixed_batch_readers_never_see_a_value_nobody_wrote() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    mixed_batch_readers_see_whole_pairs::<u32, u64>("apply readers, map u32 -> u64");
    mixed_batch_readers_see_whole_pairs::<u64, u32>("apply readers, map u64 -> u32");
    mixed_batch_readers_see_whole_pairs::<u64, u64>("apply readers, map u64 -> u64");
}

#[test]
#[ignore = "needs a CUDA device"]
fn map_readers_on_other_threads_never_see_a_value_nobody_wrote() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    map_readers_see_whole_pairs::<u32, u32>("map u32 -> u32");
    map_readers_see_whole_pairs::<u32, u64>("map u32 -> u64");
    map_readers_see_whole_pairs::<u64, u32>("map u64 -> u32");
    map_readers_see_whole_pairs::<u64, u64>("map u64 -> u64");
}

fn multimap_readers_see_whole_pairs<K: Key, V: Key>(what: &str) {
    let map = SlabHashMultiMap::<K, V>::new(device(), options()).unwrap();
    race::<K, V>(
        what,
        |keys| map.insert(keys, &values_for::<K, V>(keys)).unwrap(),
        |keys| drop(map.remove_all(keys).unwrap()),
        |keys| {
            let found = map.get_all(keys).unwrap();
            found
                .into_iter()
                .enumerate()
                .flat_map(|(i, values)| values.into_iter().map(move |v| (i, v)))
                .collect()
        },
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn multimap_readers_on_other_threads_never_see_a_value_nobody_wrote() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    multimap_readers_see_whole_pairs::<u32, u32>("multimap u32 -> u32");
    multimap_readers_see_whole_pairs::<u32, u64>("multimap u32 -> u64");
    multimap_readers_see_whole_pairs::<u64, u32>("multimap u64 -> u32");
    multimap_readers_see_whole_pairs::<u64, u64>("multimap u64 -> u64");
}

const CHURN_KEYS: u64 = 1 << 21;
const CHURN_ROUNDS: usize = 12;

/// Reserved bytes after the first round and after the last, for a table that takes every
/// key, loses every key, and takes them again, `CHURN_ROUNDS` times, with no call but
/// insert and remove; the table must hold the keys of the last round exactly.
fn churn<K: Key>(
    insert: impl Fn(&[K]),
    remove: impl Fn(&[K]),
    reserved: impl Fn() -> u64,
    holds: impl Fn(&[K]) -> bool,
) -> (u64, u64) {
    let keys = writer_keys::<K>(7, CHURN_KEYS);
    let mut first = 0;
    for round in 0..CHURN_ROUNDS {
        // Half the keys stay from one round to the next, half come and go.
        insert(&keys);
        if round == 0 {
            first = reserved();
        }
        if round + 1 < CHURN_ROUNDS {
            remove(
                &keys[round % 2..]
                    .iter()
                    .copied()
                    .step_by(2)
                    .collect::<Vec<_>>(),
            );
            remove(
                &keys[(round + 1) % 2..]
                    .iter()
                    .copied()
                    .step_by(2)
                    .collect::<Vec<_>>(),
            );
        }
    }
    assert!(holds(&keys));
    (first, reserved())
}

fn assert_steady(what: &str, (first, last): (u64, u64)) {
    eprintln!(
        "{what}: {:.3} GiB reserved after the first round, {:.3} GiB after {CHURN_ROUNDS}",
        first as f64 / f64::from(1 << 30),
        last as f64 / f64::from(1 << 30)
    );
    assert!(
        last <= 2 * first,
        "{what}: memory grew from {first} to {last} bytes under churn"
    );
}

fn map_churn<K: Key, V: Key>(what: &str) {
    let map =
        SlabHashMap::<K, V>::new(device(), SlabHashOptions::with_capacity(CHURN_KEYS)).unwrap();
    let sizes = churn::<K>(
        |keys| map.insert(keys, &values_for::<K, V>(keys)).unwrap(),
        |keys| assert!(map.remove(keys).unwrap().iter().all(|&r| r)),
        || map.memory().unwrap().bytes_reserved,
        |keys| {
            map.len().unwrap() == keys.len()
                && map.get(keys).unwrap()
                    == values_for::<K, V>(keys)
                        .into_iter()
                        .map(Some)
                        .collect::<Vec<_>>()
        },
    );
    assert_steady(what, sizes);
}

#[test]
#[ignore = "needs a CUDA device"]
fn maps_and_sets_hold_steady_memory_when_keys_come_and_go() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    map_churn::<u32, u32>("map u32 -> u32");
    map_churn::<u64, u32>("map u64 -> u32");
    map_churn::<u64, u64>("map u64 -> u64");
    let set =
        SlabHashSet::<u32>::new(device(), SlabHashOptions::with_capacity(CHURN_KEYS)).unwrap();
    let sizes = churn::<u32>(
        |keys| set.insert(keys).unwrap(),
        |keys| assert!(set.remove(keys).unwrap().iter().all(|&r| r)),
        || set.memory().unwrap().bytes_reserved,
        |keys| set.len().unwrap() == keys.len() && set.contains(keys).unwrap().iter().all(|&c| c),
    );
    assert_steady("set u32", sizes);
}
