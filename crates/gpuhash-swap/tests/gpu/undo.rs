//! Failed inserts and removals taken back: after the error the table holds exactly what a
//! `HashMap` model held before the batch (its count, its export, every lookup), whether
//! the batch failed in its first segment or a later one, at its first child or its last.
//! Failures come from children whose forms fail part way at a chosen call ([`Faulty`]),
//! and from device memory running out while children grow.

use std::collections::{HashMap, HashSet};

use gpuhash_core::table::{ErrorKind, Key, Map, Table, TableError, Value};
use gpuhash_cuckoo::CuckooTable;
use std::ops::Range;

use gpuhash_core::image::ProbeInPlace;
use gpuhash_swap::SwapTable;
use gpuhash_swap::policy::{SegmentRoom, child_of, page_group, scratch_per_element};
use gpuhash_test_support::{
    MemoryGuard, SeededRng, adversarial_keys, all_memory, device, fill_device_except,
    shared_memory, stream, value_in_round,
};

use crate::common::{
    CHILDREN, RESIDENT, always_page, assert_holds, paging_options_with_scratch, paging_with,
    shuffled,
};
use crate::faulty::{Faulty, Form, fail_after, struck};

/// Elements of a batch segment in these tests: batches of several thousand run in several
/// segments, each visiting every child.
pub const SEGMENT: usize = 1000;

/// A table of 8 faulty DyHash children, 2 resident, whose batches run in segments of
/// [`SEGMENT`] elements.
pub fn segmented<K: Key, V: Value>() -> SwapTable<Faulty<K, V>> {
    let scratch = scratch_per_element(size_of::<K>(), size_of::<V>()) * SEGMENT as u64;
    let options = paging_options_with_scratch::<K, V>(device(), 1 << 14, scratch)
        .unwrap()
        .make_child(|device, capacity| Ok(Faulty(CuckooTable::with_capacity(device, capacity)?)));
    let table = SwapTable::new(device(), options).unwrap();
    assert_eq!(table.segment_len(), SEGMENT);
    assert_eq!(table.resident_limit(), RESIDENT as usize);
    table
}

/// A [`segmented`] table holding the keys of a test ([`stored`], drawn from a seed), the
/// generator that drew them, and the hold on the device memory shared with other tests.
pub struct Prepared<K: Key, V: Value> {
    pub memory: MemoryGuard,
    pub table: SwapTable<Faulty<K, V>>,
    pub rng: SeededRng,
    pub keys: Keys<K, V>,
}

/// The [`Prepared`] table of a test drawing its keys from `seed`.
pub fn segmented_and_stored<K: Key, V: Value>(seed: u64) -> Prepared<K, V> {
    let memory = shared_memory();
    let table = segmented::<K, V>();
    let mut rng = SeededRng::new(seed);
    let keys = stored::<K, V>(&table, &mut rng);
    Prepared {
        memory,
        table,
        rng,
        keys,
    }
}

/// Half the stored keys of a test and 4000 it does not hold.
pub fn half_held_and_new<K: Key, V: Value>(keys: &Keys<K, V>) -> Vec<K> {
    let mut batch: Vec<K> = keys.stored.iter().step_by(2).copied().collect();
    batch.extend_from_slice(&keys.absent[..4000]);
    batch
}

/// Keys for a test: 4000 random keys and the adversarial ones stored (values of round 0)
/// in `table`, with their model; 8000 more random keys that the table does not hold; and
/// every key, to look up.
pub struct Keys<K, V> {
    pub stored: Vec<K>,
    pub absent: Vec<K>,
    pub probes: Vec<K>,
    pub model: HashMap<K, V>,
}

/// Stores the keys of a test in `table`.
pub fn stored<K: Key, V: Value>(
    table: &impl Map<Key = K, Value = V>,
    rng: &mut SeededRng,
) -> Keys<K, V> {
    let pool: Vec<K> = rng.distinct_keys(12_000);
    let mut stored = pool[..4000].to_vec();
    stored.extend(adversarial_keys::<K>());
    stored.sort_unstable();
    stored.dedup();
    let stored = shuffled(rng, stored);
    let held: HashSet<K> = stored.iter().copied().collect();
    let absent: Vec<K> = pool[4000..]
        .iter()
        .copied()
        .filter(|k| !held.contains(k))
        .collect();
    let values: Vec<V> = stored
        .iter()
        .map(|&k| value_in_round(k.widen(), 0))
        .collect();
    table.insert(&stored, &values).unwrap();
    let model: HashMap<K, V> = stored.iter().copied().zip(values).collect();
    let mut probes = stored.clone();
    probes.extend_from_slice(&absent);
    Keys {
        stored,
        absent,
        probes,
        model,
    }
}

/// `keys` in a random order, then every seventh of them again: keys repeated across
/// segments (the repeats land in the last ones).
pub fn with_repeats<K: Key>(rng: &mut SeededRng, keys: Vec<K>) -> Vec<K> {
    let mut batch = shuffled(rng, keys);
    let again: Vec<K> = batch.iter().step_by(7).copied().collect();
    batch.extend(again);
    batch
}

/// A value for each element of `batch` from `round` on, a different one for each copy of
/// a repeated key.
pub fn values_from<K: Key, V: Value>(batch: &[K], round: u64) -> Vec<V> {
    batch
        .iter()
        .enumerate()
        .map(|(i, &k)| value_in_round(k.widen(), round + i as u64))
        .collect()
}

/// The calls of the children's forms that an insert or a removal of `batch` makes on
/// `table`, pass by pass, as the crate documents them: the resident children with keys take
/// the first pass, those on the host with keys follow in groups of half the resident limit
/// ([`page_group`]), in child order; each pass reads segments as long as its share of the keys lets the scratch
/// hold, cut shorter where one would move more ([`SegmentRoom`]), and calls each of its
/// children once a segment that has keys of it.
pub fn child_calls_by_pass<T: ProbeInPlace>(table: &SwapTable<T>, batch: &[T::Key]) -> Vec<usize> {
    let children = table.children();
    let child: Vec<usize> = batch
        .iter()
        .map(|key| child_of(key.widen(), children as u32) as usize)
        .collect();
    let mut keys = vec![0u64; children];
    for &c in &child {
        keys[c] += 1;
    }
    let resident = table.resident_children();
    let first: Vec<usize> = resident.iter().copied().filter(|&c| keys[c] > 0).collect();
    let on_host: Vec<usize> = (0..children)
        .filter(|c| !resident.contains(c) && keys[*c] > 0)
        .collect();
    let mut passes = Vec::new();
    if !first.is_empty() || on_host.is_empty() {
        passes.push(first);
    }
    let group = page_group(table.resident_limit());
    passes.extend(on_host.chunks(group).map(<[usize]>::to_vec));
    let room = SegmentRoom {
        segment: table.segment_len(),
        element_bytes: scratch_per_element(size_of::<T::Key>(), size_of::<T::Value>()),
    };
    passes
        .iter()
        .map(|pass| {
            let moved_in = |range: Range<usize>| {
                child[range].iter().filter(|c| pass.contains(c)).count() as u64
            };
            let read = room.stretched(pass.iter().map(|&c| keys[c]).sum(), batch.len() as u64);
            let (mut start, mut calls) = (0, 0);
            while start < batch.len() {
                let next: Result<Range<usize>, ()> =
                    room.next((start, batch.len()), read, |range| {
                        let moved = moved_in(range.clone());
                        Ok((range, moved))
                    });
                let range = next.expect("a host count cannot fail");
                calls += pass
                    .iter()
                    .filter(|c| child[range.clone()].contains(c))
                    .count();
                start = range.end;
            }
            calls
        })
        .collect()
}

/// How many calls of a child's form pass before the one that fails, for a batch whose
/// calls [`child_calls_by_pass`] gives pass by pass: failures at the 3rd call (in the
/// first pass), at the first call of the second pass and of the pass half way, and at the
/// last one (the last pass).
fn failure_points(calls: &[usize]) -> [usize; 4] {
    assert!(calls.len() >= 4, "a batch of passes of {calls:?} calls");
    let before = |pass: usize| calls[..pass].iter().sum::<usize>();
    assert!(calls[0] > 2, "a first pass of {} calls", calls[0]);
    let visits = before(calls.len());
    [2, before(1), before(calls.len() / 2), visits - 1]
}

/// Counts of undone batches and failed undos since `before`.
pub fn undos<T: gpuhash_core::image::ProbeInPlace>(
    table: &SwapTable<T>,
    before: gpuhash_swap::SwapStats,
) -> (u64, u64) {
    let after = table.stats();
    (
        after.undone - before.undone,
        after.undo_failures - before.undo_failures,
    )
}

/// Inserts of half the stored keys (new values), 4000 new keys and repeats of both,
/// failing at each failure point, leave the table as it was; the same batch without
/// repeats then goes in.
fn failed_inserts_leave_the_table_as_it_was<K: Key, V: Value>(seed: u64) {
    let Prepared {
        memory: _memory,
        table,
        mut rng,
        keys,
    } = segmented_and_stored::<K, V>(seed);
    let fresh = half_held_and_new(&keys);
    let Keys {
        probes, mut model, ..
    } = keys;
    let batch = with_repeats(&mut rng, fresh.clone());
    let values: Vec<V> = values_from(&batch, 1);
    for passing in failure_points(&child_calls_by_pass(&table, &batch)) {
        let before = table.stats();
        fail_after(Form::Insert, passing);
        let error = table.insert(&batch, &values).unwrap_err();
        assert!(struck(), "the fault after {passing} inserts never struck");
        assert_eq!(error.kind(), ErrorKind::NotInserted, "{error}");
        let when = format!("after an insert failing after {passing} child inserts");
        assert_holds(&table, &model, &probes, &when);
        assert_eq!(undos(&table, before), (1, 0), "{when}: {:?}", table.stats());
    }
    let values: Vec<V> = values_from(&fresh, 1 << 20);
    table.insert(&fresh, &values).unwrap();
    model.extend(fresh.iter().copied().zip(values));
    assert_holds(&table, &model, &probes, "after the insert that passed");
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_inserts_in_later_segments_leave_the_table_as_it_was_u32_u64() {
    failed_inserts_leave_the_table_as_it_was::<u32, u64>(41);
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_inserts_in_later_segments_leave_the_table_as_it_was_u32_u32_packed() {
    failed_inserts_leave_the_table_as_it_was::<u32, u32>(42);
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_inserts_in_later_segments_leave_the_table_as_it_was_u64_u64() {
    failed_inserts_leave_the_table_as_it_was::<u64, u64>(43);
}

/// Removals of two thirds of the stored keys, 2000 keys the table does not hold and
/// repeats of both, failing at each failure point, leave the table as it was; the same
/// batch without repeats then removes what the model says.
fn failed_removals_leave_the_table_as_it_was<K: Key, V: Value>(seed: u64) {
    let Prepared {
        memory: _memory,
        table,
        mut rng,
        keys,
    } = segmented_and_stored::<K, V>(seed);
    let Keys {
        stored,
        absent,
        probes,
        mut model,
    } = keys;
    let mut gone: Vec<K> = stored
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, &k)| k)
        .collect();
    gone.extend_from_slice(&absent[..2000]);
    let batch = with_repeats(&mut rng, gone.clone());
    for passing in failure_points(&child_calls_by_pass(&table, &batch)) {
        let before = table.stats();
        fail_after(Form::Remove, passing);
        let error = table.remove(&batch).unwrap_err();
        assert!(struck(), "the fault after {passing} removals never struck");
        assert_eq!(error.kind(), ErrorKind::OutOfDeviceMemory, "{error}");
        let when = format!("after a removal failing after {passing} child removals");
        assert_holds(&table, &model, &probes, &when);
        assert_eq!(undos(&table, before), (1, 0), "{when}: {:?}", table.stats());
    }
    let removed = table.remove(&gone).unwrap();
    for (key, removed) in gone.iter().zip(removed) {
        assert_eq!(removed, model.remove(key).is_some(), "remove {key:?}");
    }
    assert_holds(&table, &model, &probes, "after the removal that passed");
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_removals_in_later_segments_leave_the_table_as_it_was_u32_u64() {
    failed_removals_leave_the_table_as_it_was::<u32, u64>(44);
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_removals_in_later_segments_leave_the_table_as_it_was_u64_u64() {
    failed_removals_leave_the_table_as_it_was::<u64, u64>(45);
}

/// Rounds of inserts and removals of random sets of keys (adversarial ones included, some
/// repeated across segments), each armed to fail at a random child call that may lie past
/// the batch's last: a batch that fails leaves the table as the model held it; one that
/// passes changes it as the model says (a repeated key holding one of its copies' values).
fn random_failures_match_a_hash_map<K: Key, V: Value>(seed: u64) {
    let Prepared {
        memory: _memory,
        table,
        mut rng,
        keys,
    } = segmented_and_stored::<K, V>(seed);
    let Keys {
        stored,
        absent,
        probes,
        mut model,
    } = keys;
    let pool: Vec<K> = stored.iter().chain(&absent).copied().collect();
    let (mut failed_late, mut passed) = (0, 0);
    for round in 1..=16u64 {
        let some: Vec<K> = pool
            .iter()
            .copied()
            .filter(|_| rng.next_u64().is_multiple_of(3))
            .collect();
        let batch = with_repeats(&mut rng, some);
        let visits: usize = child_calls_by_pass(&table, &batch).iter().sum();
        // Every fourth round passes: its fault lies past the last child call.
        let passing = match round % 4 {
            0 => visits,
            _ => (rng.next_u64() % visits as u64) as usize,
        };
        let form = match rng.next_u64() % 2 {
            0 => Form::Insert,
            _ => Form::Remove,
        };
        let before = table.stats();
        fail_after(form, passing);
        let values: Vec<V> = values_from(&batch, round << 20);
        let outcome = match form {
            Form::Insert => table.insert(&batch, &values).map(|()| Vec::new()),
            Form::Remove => table.remove(&batch),
        };
        let when = format!("round {round}, {form:?} failing after {passing} of {visits}");
        match outcome {
            Err(error) => {
                assert!(struck(), "{when}: {error} with no fault");
                assert_eq!(undos(&table, before), (1, 0), "{when}: {:?}", table.stats());
                if passing >= CHILDREN {
                    failed_late += 1;
                }
            }
            Ok(removed) => {
                assert!(!struck(), "{when}: the fault struck, the batch passed");
                passed += 1;
                match form {
                    Form::Insert => {
                        let mut copies: HashMap<K, Vec<V>> = HashMap::new();
                        for (&key, &value) in batch.iter().zip(&values) {
                            copies.entry(key).or_default().push(value);
                        }
                        let found = table.get(&batch).unwrap();
                        for (&key, found) in batch.iter().zip(found) {
                            let value = found.expect("an inserted key");
                            assert!(
                                copies[&key].contains(&value),
                                "{when}: {key:?} holds {value:?}"
                            );
                            model.insert(key, value);
                        }
                    }
                    Form::Remove => {
                        // A key held before is reported removed by one of its copies or
                        // more (which, the child chooses); a key not held, by none.
                        let mut reported: HashMap<K, bool> = HashMap::new();
                        for (&key, removed) in batch.iter().zip(removed) {
                            *reported.entry(key).or_default() |= removed;
                        }
                        for (key, reported) in reported {
                            let held = model.remove(&key).is_some();
                            assert_eq!(reported, held, "{when}: removed {key:?}");
                        }
                    }
                }
            }
        }
        assert_holds(&table, &model, &probes, &when);
    }
    assert!(
        failed_late > 2 && passed > 0,
        "{failed_late} late failures, {passed} passes"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn random_failures_match_a_hash_map_u32_u64() {
    random_failures_match_a_hash_map::<u32, u64>(46);
}

#[test]
#[ignore = "needs a CUDA device"]
fn random_failures_match_a_hash_map_u64_u64() {
    random_failures_match_a_hash_map::<u64, u64>(47);
}

/// `len` of `candidates`, half of them of the last child on the host (in child order, the
/// order the passes page them in), the others of any other child.
fn skewed_to_the_last_paged(
    table: &SwapTable<CuckooTable<u64, u64>>,
    candidates: &[u64],
    len: usize,
) -> Vec<u64> {
    let children = table.children() as u32;
    let resident = table.resident_children();
    let last = (0..children as usize)
        .rev()
        .find(|c| !resident.contains(c))
        .expect("a child on the host");
    let (theirs, others): (Vec<u64>, Vec<u64>) = candidates
        .iter()
        .partition(|&&key| child_of(key, children) as usize == last);
    assert!(theirs.len() >= len / 2 && others.len() >= len / 2);
    theirs[..len / 2]
        .iter()
        .chain(&others[..len / 2])
        .copied()
        .collect()
}

/// Inserts of 256K fresh pairs into children made for 1024 pairs, which grow segment by
/// segment, with all but a little device memory taken (rooms of 2 to 32 MiB): a batch
/// fails wherever memory runs out (the upload, a partition, a page-in or page-out, a
/// child's growth), with `OutOfDeviceMemory`, and leaves the table exactly as it was
/// unless its undo failed too (counted by the table: each key then holds its old value or
/// its new one). Some batches are taken back, and at the largest room they pass. Half the
/// fresh keys are of the child on the host that pages in last, so that its pass, after
/// the others have changed their children, grows the most and needs the most room; the
/// rooms step by 128 KiB from 2 to 6 MiB, around where batches begin to pass: there they
/// fail in that last pass.
#[test]
#[ignore = "needs a CUDA device"]
fn children_growing_until_device_memory_runs_out_are_taken_back() {
    let _memory = all_memory();
    let pool: Vec<u64> = SeededRng::new(48).distinct_keys((1 << 12) + (1 << 21));
    let (stored, candidates) = pool.split_at(1 << 12);
    let (mut failed, mut undone, mut passed) = (0, 0, 0);
    let rooms_kib = (16..=48)
        .map(|eighths| eighths * 128usize)
        .chain([8192, 16384, 32768]);
    for room_kib in rooms_kib {
        let table = paging_with::<u64, u64>(1 << 13, always_page());
        table.insert(stored, stored).unwrap();
        let fresh = &skewed_to_the_last_paged(&table, candidates, 1 << 18);
        let keys: Vec<u64> = stored.iter().chain(fresh).copied().collect();
        let model: HashMap<u64, u64> = stored.iter().map(|&k| (k, k)).collect();
        let values: Vec<u64> = fresh.iter().map(|&k| !k).collect();
        let before = table.stats();
        let inserted = {
            let hog = fill_device_except(stream(), room_kib << 10);
            let inserted = table.insert(fresh, &values);
            drop(hog);
            stream().synchronize().unwrap();
            inserted
        };
        let (taken_back, undo_failed) = undos(&table, before);
        let when = format!("room {room_kib} KiB");
        match &inserted {
            Ok(()) => passed += 1,
            Err(error) => {
                failed += 1;
                undone += taken_back;
                assert_eq!(
                    error.kind(),
                    ErrorKind::OutOfDeviceMemory,
                    "{when}: {error}"
                );
            }
        }
        // The stored keys are not in the batch: they hold their values whatever happened.
        let found = table.get(stored).unwrap();
        for (key, found) in stored.iter().zip(found) {
            assert_eq!(found, Some(*key), "{when}: stored {key}");
        }
        let found = table.get(fresh).unwrap();
        for (i, &key) in fresh.iter().enumerate() {
            match (&inserted, undo_failed) {
                (Ok(()), _) => assert_eq!(found[i], Some(values[i]), "{when}: {key}"),
                (Err(_), 0) => assert_eq!(found[i], None, "{when}: {key}"),
                // The undo itself failed: each key its new value or none.
                (Err(_), _) => assert!(found[i].is_none_or(|v| v == values[i]), "{when}"),
            }
        }
        match (&inserted, undo_failed) {
            (Ok(()), _) => assert_eq!(table.len().unwrap(), keys.len(), "{when}"),
            (Err(_), 0) => assert_holds(&table, &model, &keys, &when),
            (Err(_), _) => {}
        }
    }
    assert!(
        failed > 0 && undone > 0 && passed > 0,
        "failed {failed}, undone {undone}, passed {passed}"
    );
}
