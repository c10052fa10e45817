//! Paging passes of two children a group (8 children, 4 resident): while a pass runs, the
//! next group's children page in one after the other on a thread of their own, each
//! victim out before its child comes in. Answers against `HashMap` models through rounds
//! of every verb; and a page-in that fails anywhere in a batch (a visit's, or either move
//! of a prefetch, the second then never run) leaves the table as it was.

use std::collections::HashMap;

use gpuhash_core::table::{Key, Map, Table, Value};
use gpuhash_cuckoo::CuckooTable;
use gpuhash_swap::{SwapMap, SwapTable};
use gpuhash_test_support::{SeededRng, all_memory, device, shared_memory, value_in_round};

use crate::common::{
    SCRATCH, always_page, assert_holds, check_lookups, paging_options_holding, shuffled,
};
use crate::faulty::{Faulty, fail_page_in_after, page_in_struck};
use crate::undo::{half_held_and_new, stored, values_from, with_repeats};

/// Children the budget holds: paging passes take groups of two.
const HOLDING: u64 = 4;

/// Rounds of upserts, lookups and removals of whole key sets (every child in each batch)
/// on a table whose lookups page: each batch takes a pass of its resident children and
/// two paging passes, the second group brought in by the first's prefetch.
fn groups_of_two_match_a_hash_map<K: Key, V: Value>(seed: u64) {
    let _memory = shared_memory();
    let options = paging_options_holding::<K, V>(device(), 1 << 14, SCRATCH, HOLDING).unwrap();
    let table = SwapMap::new(device(), options.cost_model(always_page())).unwrap();
    assert_eq!(table.resident_limit(), HOLDING as usize);
    let mut rng = SeededRng::new(seed);
    let keys: Vec<K> = rng.distinct_keys(1 << 13);
    let (held, absent) = keys.split_at(6 << 10);
    let mut probes = keys.clone();
    probes.extend_from_slice(absent);
    let mut model: HashMap<K, V> = HashMap::new();
    for round in 0..6u64 {
        let batch = shuffled(&mut rng, held.to_vec());
        let values: Vec<V> = batch
            .iter()
            .map(|&k| value_in_round(k.widen(), round))
            .collect();
        table.insert(&batch, &values).unwrap();
        model.extend(batch.iter().copied().zip(values));
        check_lookups(
            &table,
            &model,
            &shuffled(&mut rng, probes.clone()),
            probes.len(),
        );
        let gone: Vec<K> = batch.iter().step_by(3 + round as usize).copied().collect();
        let removed = table.remove(&gone).unwrap();
        assert!(
            removed.iter().all(|&r| r),
            "round {round}: every key was held"
        );
        for key in &gone {
            model.remove(key);
        }
        check_lookups(&table, &model, &probes, probes.len());
    }
    let stats = table.stats();
    assert!(stats.page_ins > 6 * 4, "batches paged: {stats:?}");
    assert_eq!(table.len().unwrap(), model.len());
}

#[test]
#[ignore = "needs a CUDA device"]
fn groups_of_two_page_ahead_and_match_a_hash_map_u32_u32() {
    groups_of_two_match_a_hash_map::<u32, u32>(81);
}

#[test]
#[ignore = "needs a CUDA device"]
fn groups_of_two_page_ahead_and_match_a_hash_map_u64_u64() {
    groups_of_two_match_a_hash_map::<u64, u64>(82);
}

/// Inserts, removals and lookups of every child, with a page-in failing at each of the
/// first page-ins of the batch: the visits' of the first paging group (the resident pass
/// prefetches nothing), then the two moves that bring in the second group (a failed first
/// move leaves the second unrun). Each batch is an error and the table holds what it held.
fn failed_page_ins_leave_the_table_as_it_was<K: Key, V: Value>(seed: u64) {
    let _memory = all_memory();
    let options = paging_options_holding::<K, V>(device(), 1 << 14, SCRATCH, HOLDING)
        .unwrap()
        .cost_model(always_page())
        .make_child(|device, capacity| Ok(Faulty(CuckooTable::with_capacity(device, capacity)?)));
    let table = SwapTable::new(device(), options).unwrap();
    let mut rng = SeededRng::new(seed);
    let keys = stored::<K, V>(&table, &mut rng);
    let batch = with_repeats(&mut rng, half_held_and_new(&keys));
    let values: Vec<V> = values_from(&batch, 1);
    for passing in 0..4 {
        for verb in ["insert", "remove", "get"] {
            fail_page_in_after(passing);
            let outcome = match verb {
                "insert" => table.insert(&batch, &values),
                "remove" => table.remove(&batch).map(drop),
                _ => table.get(&batch).map(drop),
            };
            let when = format!("{verb} with page-in {passing} failing");
            assert!(page_in_struck(), "{when}: the fault never struck");
            assert!(outcome.is_err(), "{when}: the batch passed");
            assert_holds(&table, &keys.model, &keys.probes, &when);
        }
    }
    let mut model = keys.model.clone();
    table.insert(&batch, &values).unwrap();
    for (&key, found) in batch.iter().zip(table.get(&batch).unwrap()) {
        model.insert(key, found.expect("an inserted key"));
    }
    assert_holds(&table, &model, &keys.probes, "after the insert that passed");
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_page_ins_leave_the_table_as_it_was_u32_u64() {
    failed_page_ins_leave_the_table_as_it_was::<u32, u64>(83);
}

#[test]
#[ignore = "needs a CUDA device"]
fn failed_page_ins_leave_the_table_as_it_was_u64_u32() {
    failed_page_ins_leave_the_table_as_it_was::<u64, u32>(84);
}
