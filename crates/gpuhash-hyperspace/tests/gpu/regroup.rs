//! Export and regroup: the key index's tuples read back whole, and subspaces rebuilt from
//! it while searches go on, losing and duplicating nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{
    Model, batch, check_contents, check_searches, index, random_tuples, some_queries,
};
use gpuhash_hyperspace::shape::{Field, FieldSet};
use gpuhash_hyperspace::{HyperspaceOptions, Subspaces};
use gpuhash_test_support::{SeededRng, shared_memory};

#[test]
#[ignore = "needs a CUDA device"]
fn export_holds_every_tuple_once() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(31);
    let idx = index(3, 2000, HyperspaceOptions::default());
    let mut model = Model::default();
    assert!(idx.export().expect("export").is_empty());
    let tuples = random_tuples(&mut rng, 3, 6000, 1 << 20, 40);
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    let gone = &tuples.keys[..1000];
    idx.delete(gone).expect("delete");
    model.delete(gone);
    let changed = crate::common::with_keys(&mut rng, 3, tuples.keys[1000..2000].to_vec(), 40);
    idx.modify(batch(&changed)).expect("modify");
    model.modify(&changed);
    let mut exported: Vec<_> = idx.export().expect("export").iter().collect();
    exported.sort();
    let expected: Vec<_> = model.tuples.values().cloned().collect();
    assert_eq!(exported, expected);
}

#[test]
#[ignore = "needs a CUDA device"]
fn regroups_in_the_middle_of_a_query_stream_lose_and_duplicate_nothing() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(32);
    let idx = index(3, 30_000, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, 3, 30_000, 1 << 32, 25);
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    let queries = some_queries(&mut rng, 3, 25, &model);
    let regrouping = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let searcher = scope.spawn(|| {
            let mut rounds = 0;
            while regrouping.load(Ordering::SeqCst) || rounds < 2 {
                check_searches(&idx, &model, &queries, &format!("search round {rounds}"));
                rounds += 1;
            }
        });
        for subspaces in [
            Subspaces::Pairs,
            Subspaces::Groups(vec![vec![0, 1, 2]]),
            Subspaces::Groups(vec![vec![2], vec![0, 1]]),
            Subspaces::EachAttribute,
        ] {
            idx.regroup(subspaces.clone()).expect("regroup");
            assert_eq!(idx.options().subspaces, subspaces);
            let shapes = idx.space_shapes();
            assert_eq!(shapes[0].fields(), FieldSet::of([Field::Key]));
        }
        regrouping.store(false, Ordering::SeqCst);
        searcher.join().expect("the searcher's checks");
    });
    // Writes after a regroup reach the new subspaces.
    idx.regroup(Subspaces::Pairs).expect("regroup");
    let more = random_tuples(&mut rng, 3, 5000, 1 << 32, 25);
    assert_eq!(
        idx.insert(batch(&more)).expect("insert"),
        model.insert(&more)
    );
    let gone = &tuples.keys[..4000];
    assert_eq!(idx.delete(gone).expect("delete"), model.delete(gone));
    check_contents(&idx, &model, &[], "after regroups");
    check_searches(&idx, &model, &queries, "after regroups");
    // Options the index cannot take leave the subspaces as they were.
    assert!(idx.regroup(Subspaces::Groups(vec![vec![0, 7]])).is_err());
    assert_eq!(idx.options().subspaces, Subspaces::Pairs);
    check_searches(&idx, &model, &queries, "after a refused regroup");
}
