//! Reuse of removed slots: reclaims free exactly the removed copies, inserts fill the
//! holes before chains grow, a key is never stored twice when a hole lies before its live
//! copy, memory stays bounded under long churn (against the host model all along), and
//! searches during a modify storm with reclaims in it see each tuple once or twice.

use gpuhash_hyperspace::{HyperspaceOptions, InsertStatus, Subspaces, Tuples};
use gpuhash_test_support::{SeededRng, shared_memory};

use crate::common::{
    Model, batch, check_contents, check_searches, index, random_tuples, some_queries, with_keys,
};

const P: usize = 3;
const CARDINALITY: u64 = 50;

/// Tuples `range` of `tuples`.
fn part(tuples: &Tuples, range: std::ops::Range<usize>) -> Tuples {
    let n = tuples.len();
    Tuples {
        attribute_count: tuples.attribute_count,
        keys: tuples.keys[range.clone()].to_vec(),
        attributes: (0..tuples.attribute_count)
            .flat_map(|a| tuples.attributes[a * n + range.start..a * n + range.end].to_vec())
            .collect(),
        values: tuples.values[range].to_vec(),
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_reclaim_frees_every_removed_copy_and_inserts_take_the_holes() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(0x7ec1);
    for subspaces in [Subspaces::EachAttribute, Subspaces::Pairs] {
        // Short of buckets, so that chains are long and holes lie before live tuples.
        let options = HyperspaceOptions::default()
            .subspaces(subspaces)
            .space_bits(3)
            .reclaim_after(0);
        let index = index(P, 4096, options);
        let spaces = index.space_shapes().len() as u64;
        let tuples = random_tuples(&mut rng, P, 4000, 1 << 30, CARDINALITY);
        let mut model = Model::default();
        assert_eq!(
            index.insert(batch(&tuples)).expect("insert"),
            model.insert(&tuples)
        );
        // Nothing removed yet: nothing to free.
        assert_eq!(index.reclaim().expect("reclaim"), 0);
        let gone = part(&tuples, 0..1500);
        assert_eq!(
            index.delete(&gone.keys).expect("delete"),
            model.delete(&gone.keys)
        );
        let moved = with_keys(&mut rng, P, tuples.keys[1500..2500].to_vec(), CARDINALITY);
        assert_eq!(
            index.modify(batch(&moved)).expect("modify"),
            model.modify(&moved)
        );
        // Every super node the chains will need: the modifies' new copies are in.
        let full = index.memory().expect("memory");
        // Each deleted tuple and each modified tuple's old copy frees one slot a space.
        assert_eq!(index.reclaim().expect("reclaim"), (1500 + 1000) * spaces);
        assert_eq!(index.reclaim().expect("reclaim"), 0);
        check_contents(&index, &model, &gone.keys, "after the reclaim");
        let queries = some_queries(&mut rng, P, CARDINALITY, &model);
        check_searches(&index, &model, &queries, "after the reclaim");
        // Every tuple again: the deleted ones go back into their own holes, the others
        // (a hole may lie before their live copy) are found present, never stored twice.
        let statuses = index.insert(batch(&tuples)).expect("insert again");
        assert_eq!(statuses, model.insert(&tuples));
        assert_eq!(
            statuses
                .iter()
                .filter(|&&s| s == InsertStatus::Inserted)
                .count(),
            1500
        );
        check_contents(&index, &model, &[], "after inserting again");
        let exported = index.export().expect("export");
        let mut keys = exported.keys.clone();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), model.tuples.len(), "a key stored twice");
        // The deleted tuples went into holes of their own buckets: no chain grew.
        let after = index.memory().expect("memory");
        assert_eq!(
            after.bytes_in_use, full.bytes_in_use,
            "memory went from {full:?} to {after:?}"
        );
        check_searches(&index, &model, &queries, "after inserting again");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn long_churn_keeps_memory_bounded_and_answers_as_the_model() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(0xc4u64 << 8);
    // Reclaims by the index itself, every 2000 deletes and modifies.
    let options = HyperspaceOptions::default()
        .space_bits(6)
        .reclaim_after(2000);
    let index = index(P, 8192, options);
    let mut model = Model::default();
    let first = random_tuples(&mut rng, P, 6000, 1 << 30, CARDINALITY);
    index.insert(batch(&first)).expect("insert");
    model.insert(&first);
    let mut peak_early = 0;
    for round in 0..80 {
        // About 500 deletes, 500 fresh inserts and 500 modifies a round: the population
        // stays near 6000 while 120000 copies are removed in all.
        let held: Vec<u32> = model.tuples.keys().copied().collect();
        let pick = |rng: &mut SeededRng, count: usize| -> Vec<u32> {
            let mut keys: Vec<u32> = (0..count)
                .map(|_| held[(rng.next_u64() % held.len() as u64) as usize])
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys
        };
        let gone = pick(&mut rng, 500);
        assert_eq!(index.delete(&gone).expect("delete"), model.delete(&gone));
        let fresh = random_tuples(&mut rng, P, 500, 1 << 30, CARDINALITY);
        assert_eq!(
            index.insert(batch(&fresh)).expect("insert"),
            model.insert(&fresh)
        );
        let moved_keys: Vec<u32> = pick(&mut rng, 500)
            .into_iter()
            .filter(|k| model.tuples.contains_key(k))
            .collect();
        let moved = with_keys(&mut rng, P, moved_keys, CARDINALITY);
        assert_eq!(
            index.modify(batch(&moved)).expect("modify"),
            model.modify(&moved)
        );
        let in_use = index.memory().expect("memory").bytes_in_use;
        if round < 10 {
            peak_early = peak_early.max(in_use);
        } else {
            assert!(
                in_use <= peak_early * 3 / 2,
                "round {round}: {in_use} bytes in use, at most {peak_early} in the first rounds"
            );
        }
        if round % 10 == 9 {
            let what = format!("round {round}");
            check_contents(&index, &model, &gone, &what);
            let queries = some_queries(&mut rng, P, CARDINALITY, &model);
            check_searches(&index, &model, &queries, &what);
        }
    }
}

/// The modify storm of `concurrency.rs` with the index reclaiming by itself every half
/// round: searches on another thread still find each tuple once or twice, never not at
/// all, and never a reused slot's new tuple for a query it does not meet.
#[test]
#[ignore = "needs a CUDA device"]
fn searches_during_a_modify_storm_with_reclaims_never_miss_a_tuple() {
    crate::concurrency::storm_with(
        |options| options.reclaim_after(u64::from(crate::concurrency::KEYS) / 2),
        |index, queries| Some(index.search(queries).expect("a search")),
    );
}
