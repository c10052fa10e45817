//! Inserts and removals of batches of many segments take passes over them: each child on
//! the host is paged in at most once a batch, not once a segment, while the answers and
//! the contents match a `HashMap` (keys repeated across segments included), and a failure
//! in a later pass takes back every pass before it.

use std::collections::{HashMap, HashSet};

use gpuhash_core::table::{Key, Map, Value};
use gpuhash_swap::policy::{child_of, scratch_per_element};
use gpuhash_swap::{SwapMap, SwapStats};
use gpuhash_test_support::{SeededRng, adversarial_keys, device, shared_memory};

use crate::common::{CHILDREN, RESIDENT, assert_holds, paging_options_with_scratch, shuffled};
use crate::faulty::{Form, calls_since, fail_after, struck};
use crate::undo::{
    Keys, Prepared, SEGMENT, child_calls_by_pass, half_held_and_new, segmented_and_stored, undos,
    values_from, with_repeats,
};

/// A table of 8 DyHash children, 2 resident, whose batches run in segments of
/// [`SEGMENT`] elements.
fn segmented_map<K: Key, V: Value>() -> SwapMap<K, V> {
    let scratch = scratch_per_element(size_of::<K>(), size_of::<V>()) * SEGMENT as u64;
    let options = paging_options_with_scratch::<K, V>(device(), 1 << 14, scratch).unwrap();
    let table = SwapMap::new(device(), options).unwrap();
    assert_eq!(table.segment_len(), SEGMENT);
    assert_eq!(table.resident_limit(), RESIDENT as usize);
    table
}

/// Asserts that a batch of many segments paged each child in at most once and wrote each
/// back at most once: a segment at a time, it would page most children in again each
/// segment.
fn paged_once(batch: usize, stats: SwapStats, when: &str) {
    assert!(
        batch > 4 * SEGMENT,
        "{when}: a batch of {batch} is too short"
    );
    assert!(stats.page_ins <= CHILDREN as u64, "{when}: {stats:?}");
    assert!(stats.page_outs <= CHILDREN as u64, "{when}: {stats:?}");
}

/// Inserts `batch` with `values` and checks that each key holds one of its copies' values
/// (a key in one copy, that copy's), then records what it holds in `model`.
fn insert_checked<K: Key, V: Value>(
    table: &SwapMap<K, V>,
    model: &mut HashMap<K, V>,
    batch: &[K],
    values: &[V],
    when: &str,
) {
    let before = table.stats();
    table.insert(batch, values).unwrap();
    paged_once(batch.len(), table.stats().since(before), when);
    let mut copies: HashMap<K, Vec<V>> = HashMap::new();
    for (&key, &value) in batch.iter().zip(values) {
        copies.entry(key).or_default().push(value);
    }
    let found = table.get(batch).unwrap();
    for (&key, found) in batch.iter().zip(found) {
        let value = found.unwrap_or_else(|| panic!("{when}: {key:?} was not inserted"));
        assert!(
            copies[&key].contains(&value),
            "{when}: {key:?} holds {value:?}"
        );
        model.insert(key, value);
    }
}

/// Removes `batch` and checks its answers: a key held before is reported removed by one of
/// its copies or more, a key not held by none; then removes the keys from `model`.
fn remove_checked<K: Key, V: Value>(
    table: &SwapMap<K, V>,
    model: &mut HashMap<K, V>,
    batch: &[K],
    when: &str,
) {
    let before = table.stats();
    let removed = table.remove(batch).unwrap();
    paged_once(batch.len(), table.stats().since(before), when);
    assert_eq!(removed.len(), batch.len(), "{when}");
    let mut reported: HashMap<K, bool> = HashMap::new();
    for (&key, removed) in batch.iter().zip(removed) {
        *reported.entry(key).or_default() |= removed;
    }
    for (key, reported) in reported {
        let held = model.remove(&key).is_some();
        assert_eq!(reported, held, "{when}: removed {key:?}");
    }
}

/// Inserts into an empty table, removals of held and absent keys, and inserts of new
/// values over held keys and of new keys, each a batch of many segments with repeats across
/// them, on a table that holds 2 of its 8 children: each pages a child in at most once and
/// leaves the table as a `HashMap` says.
fn changes_of_many_segments_page_each_child_once<K: Key, V: Value>(seed: u64) {
    let _memory = shared_memory();
    let table = segmented_map::<K, V>();
    let mut rng = SeededRng::new(seed);
    let mut keys: Vec<K> = rng.distinct_keys(7000);
    keys.extend(adversarial_keys::<K>());
    keys.sort_unstable();
    keys.dedup();
    let keys = shuffled(&mut rng, keys);
    let (first, later) = keys.split_at(5000);
    // Hits and misses, each key once.
    let held: HashSet<K> = keys.iter().copied().collect();
    let mut probes = keys.clone();
    probes.extend(
        rng.distinct_keys::<K>(2000)
            .into_iter()
            .filter(|key| !held.contains(key)),
    );
    let mut model: HashMap<K, V> = HashMap::new();

    let batch = with_repeats(&mut rng, first.to_vec());
    let values: Vec<V> = values_from(&batch, 1);
    insert_checked(&table, &mut model, &batch, &values, "the first insert");
    assert_holds(&table, &model, &probes, "after the first insert");

    let mut gone: Vec<K> = first.iter().step_by(2).copied().collect();
    gone.extend_from_slice(later);
    let batch = with_repeats(&mut rng, gone);
    remove_checked(&table, &mut model, &batch, "the removal");
    assert_holds(&table, &model, &probes, "after the removal");

    let batch = with_repeats(&mut rng, keys.clone());
    let values: Vec<V> = values_from(&batch, 1 << 20);
    insert_checked(&table, &mut model, &batch, &values, "the second insert");
    assert_holds(&table, &model, &probes, "after the second insert");

    // Once more without repeats: every key's one value, every removal answered exactly.
    let values: Vec<V> = values_from(&keys, 1 << 21);
    insert_checked(&table, &mut model, &keys, &values, "the third insert");
    let gone: Vec<K> = shuffled(&mut rng, probes.clone());
    let before = table.stats();
    let removed = table.remove(&gone).unwrap();
    paged_once(gone.len(), table.stats().since(before), "the last removal");
    for (key, removed) in gone.iter().zip(removed) {
        assert_eq!(removed, model.remove(key).is_some(), "remove {key:?}");
    }
    assert_holds(&table, &model, &probes, "after the last removal");
}

#[test]
#[ignore = "needs a CUDA device"]
fn changes_of_many_segments_page_each_child_once_u32_u32_packed() {
    changes_of_many_segments_page_each_child_once::<u32, u32>(61);
}

#[test]
#[ignore = "needs a CUDA device"]
fn changes_of_many_segments_page_each_child_once_u32_u64() {
    changes_of_many_segments_page_each_child_once::<u32, u64>(62);
}

#[test]
#[ignore = "needs a CUDA device"]
fn changes_of_many_segments_page_each_child_once_u64_u64() {
    changes_of_many_segments_page_each_child_once::<u64, u64>(63);
}

/// Inserts and removals of many segments that fail in their last pass (its last call, one
/// inside it, and the last call of the pass before) leave the table as it was, paging each
/// child in at most once for the batch and once more for the undo; the same batches then
/// pass.
fn failures_in_later_passes_take_back_every_pass<K: Key, V: Value>(seed: u64) {
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
    let mut keys = stored.clone();
    keys.extend_from_slice(&absent[..4000]);
    let batch = with_repeats(&mut rng, keys);
    let by_pass = child_calls_by_pass(&table, &batch);
    let calls: usize = by_pass.iter().sum();
    let last = by_pass[by_pass.len() - 1];
    assert!(by_pass.len() > 2 && last > 2, "passes of {by_pass:?} calls");
    // The last pass's last call, one inside it, and the last call of the pass before.
    let points = [calls - 1, calls - last / 2, calls - last - 1];
    let values: Vec<V> = values_from(&batch, 1);
    for form in [Form::Insert, Form::Remove] {
        for passing in points {
            let before = table.stats();
            fail_after(form, passing);
            let outcome = match form {
                Form::Insert => table.insert(&batch, &values),
                Form::Remove => table.remove(&batch).map(drop),
            };
            let when = format!("{form:?} failing after {passing} of {calls} child calls");
            assert!(outcome.is_err(), "{when}: the batch passed");
            assert!(struck(), "{when}: the fault never struck");
            let stats = table.stats().since(before);
            assert!(stats.page_ins <= 2 * CHILDREN as u64, "{when}: {stats:?}");
            assert_eq!(undos(&table, before), (1, 0), "{when}: {stats:?}");
            assert_holds(&table, &model, &probes, &when);
        }
    }
    let mut copies: HashMap<K, Vec<V>> = HashMap::new();
    for (&key, &value) in batch.iter().zip(&values) {
        copies.entry(key).or_default().push(value);
    }
    table.insert(&batch, &values).unwrap();
    for (&key, found) in batch.iter().zip(table.get(&batch).unwrap()) {
        let value = found.expect("an inserted key");
        assert!(copies[&key].contains(&value), "{key:?} holds {value:?}");
        model.insert(key, value);
    }
    assert_holds(&table, &model, &probes, "after the insert that passed");
    let removed = table.remove(&batch).unwrap();
    let mut reported: HashMap<K, bool> = HashMap::new();
    for (&key, removed) in batch.iter().zip(removed) {
        *reported.entry(key).or_default() |= removed;
    }
    assert!(
        reported.values().all(|&removed| removed),
        "every key was held"
    );
    model.clear();
    assert_holds(&table, &model, &probes, "after the removal that passed");
}

#[test]
#[ignore = "needs a CUDA device"]
fn failures_in_later_passes_take_back_every_pass_u32_u64() {
    failures_in_later_passes_take_back_every_pass::<u32, u64>(64);
}

#[test]
#[ignore = "needs a CUDA device"]
fn failures_in_later_passes_take_back_every_pass_u64_u64() {
    failures_in_later_passes_take_back_every_pass::<u64, u64>(65);
}

/// Batches whose keys come grouped by child (each pass's keys in long runs, so that a
/// segment as long as the pass's share of the keys allows would move far more than that
/// share) are cut shorter where they would overflow the scratch: the children's forms are
/// called as the documented segmentation says ([`child_calls_by_pass`]) for grouped and
/// shuffled batches, inserts and removals alike, and the table ends as a `HashMap` says.
fn grouped_batches_are_cut_to_fit<K: Key, V: Value>(seed: u64) {
    let Prepared {
        memory: _memory,
        table,
        mut rng,
        keys,
    } = segmented_and_stored::<K, V>(seed);
    let batch = half_held_and_new(&keys);
    let Keys {
        probes, mut model, ..
    } = keys;
    let mixed = shuffled(&mut rng, batch.clone());
    let mut grouped = batch;
    grouped.sort_by_key(|key| child_of(key.widen(), CHILDREN as u32));
    for (round, (name, batch)) in [("grouped", grouped), ("shuffled", mixed)]
        .into_iter()
        .enumerate()
    {
        let values: Vec<V> = values_from(&batch, (round as u64 + 1) << 20);
        let expected: usize = child_calls_by_pass(&table, &batch).iter().sum();
        calls_since(Form::Insert);
        table.insert(&batch, &values).unwrap();
        assert_eq!(calls_since(Form::Insert), expected, "{name} insert");
        model.extend(batch.iter().copied().zip(values));
        assert_holds(&table, &model, &probes, &format!("after the {name} insert"));

        let gone: Vec<K> = batch.iter().step_by(3).copied().collect();
        let expected: usize = child_calls_by_pass(&table, &gone).iter().sum();
        let removed = table.remove(&gone).unwrap();
        assert_eq!(calls_since(Form::Remove), expected, "{name} removal");
        for (key, removed) in gone.iter().zip(removed) {
            assert_eq!(
                removed,
                model.remove(key).is_some(),
                "{name}: remove {key:?}"
            );
        }
        assert_holds(
            &table,
            &model,
            &probes,
            &format!("after the {name} removal"),
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn grouped_batches_are_cut_to_fit_u32_u64() {
    grouped_batches_are_cut_to_fit::<u32, u64>(66);
}

#[test]
#[ignore = "needs a CUDA device"]
fn grouped_batches_are_cut_to_fit_u32_u32_packed() {
    grouped_batches_are_cut_to_fit::<u32, u32>(67);
}
