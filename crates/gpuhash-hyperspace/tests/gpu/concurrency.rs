//! A modify storm on one host thread while searches run on another: every search for a
//! predicate that each tuple meets before and after its modify finds the tuple, once or
//! twice, never not at all (the GHSH paper's temporary repeated read).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{batch, with_keys};
use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Query, Subspaces, Tuples};
use gpuhash_test_support::{SeededRng, device, shared_memory};

const GROUPS: u32 = 16;

/// Attribute 0 is `key % GROUPS` and never changes; attribute 1 changes at every modify,
/// so in the (A0, A1) subspace each modify moves the tuple to another bucket.
fn tuples(rng: &mut SeededRng, keys: &[u32], round: u32) -> Tuples {
    let mut tuples = with_keys(rng, 2, keys.to_vec(), 1 << 20);
    for (i, &k) in keys.iter().enumerate() {
        tuples.attributes[i] = k % GROUPS;
        tuples.values[i] = round;
    }
    tuples
}

#[test]
#[ignore = "needs a CUDA device"]
fn searches_during_a_modify_storm_never_miss_a_tuple() {
    let _memory = shared_memory();
    for subspaces in [Subspaces::Pairs, Subspaces::EachAttribute] {
        let mut rng = SeededRng::new(21);
        let keys: Vec<u32> = (0..20_000u32).map(|k| k * 7 + 1).collect();
        let options = HyperspaceOptions::default()
            .subspaces(subspaces)
            .space_bits(8);
        let index =
            HyperspaceIndex::build(device(), 2, batch(&tuples(&mut rng, &keys, 0)), options)
                .expect("a build");
        let storming = AtomicBool::new(true);
        std::thread::scope(|scope| {
            let index = &index;
            let storming = &storming;
            let keys = &keys;
            let searcher = scope.spawn(move || {
                let queries: Vec<Query> = (0..GROUPS).map(|g| Query::attribute(0, g)).collect();
                let mut searches = 0;
                while storming.load(Ordering::SeqCst) || searches < 3 {
                    let matches = index.search(&queries).expect("a search");
                    for (g, query) in queries.iter().enumerate() {
                        let mut seen: HashMap<u32, u32> = HashMap::new();
                        for tuple in matches.of(g) {
                            assert!(query.matches(&tuple), "a match that does not match");
                            *seen.entry(tuple.key).or_default() += 1;
                        }
                        for &k in keys.iter().filter(|&&k| k % GROUPS == g as u32) {
                            let copies = seen.get(&k).copied().unwrap_or(0);
                            assert!((1..=2).contains(&copies), "key {k}: {copies} copies");
                        }
                    }
                    searches += 1;
                }
                searches
            });
            let mut rng = SeededRng::new(22);
            for round in 1..=30 {
                let modified = index
                    .modify(batch(&tuples(&mut rng, keys, round)))
                    .expect("a modify");
                assert!(modified.iter().all(|&m| m));
            }
            storming.store(false, Ordering::SeqCst);
            let searches = searcher.join().expect("the searcher's checks");
            assert!(searches >= 3);
        });
        // After the storm, one copy of each tuple, holding the last round's value.
        let got = index.get(&keys).expect("a get");
        assert!(
            got.iter()
                .all(|t| t.as_ref().is_some_and(|t| t.value == 30))
        );
        assert_eq!(index.len().expect("len"), keys.len());
    }
}
