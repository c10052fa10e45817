//! A modify storm on one host thread while searches (host or async) run on another: every
//! search for a predicate that each tuple meets before and after its modify finds the
//! tuple, once or twice, never not at all (the GHSH paper's temporary repeated read).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{batch, with_keys};
use gpuhash_core::DeviceBuffer;
use gpuhash_hyperspace::{
    DeviceTuples, HyperspaceIndex, HyperspaceOptions, Matches, Query, Subspaces, Tuples,
};
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
    storm(|index, queries| Some(index.search(queries).expect("a search")));
}

/// The same storm with async searches into buffers of room for every tuple twice: a
/// modify waits for their kernels, not for their return. A search whose rows broke their
/// counts (flagged incomplete) is not judged.
#[test]
#[ignore = "needs a CUDA device"]
fn async_searches_during_a_modify_storm_never_miss_a_tuple() {
    storm(|index, queries| {
        let stream = device().lend_stream().expect("a stream");
        let capacity = 2 * KEYS as usize;
        let mut offsets = DeviceBuffer::<u64>::zeroed(&stream, queries.len() + 1).expect("offsets");
        let mut out = DeviceTuples::unfilled(&stream, 2, capacity).expect("out");
        let mut incomplete = DeviceBuffer::<u64>::zeroed(&stream, 1).expect("flag");
        index
            .search_async(&stream, queries, &mut offsets, &mut out, &mut incomplete)
            .expect("an async search");
        if incomplete.to_host(&stream).expect("flag")[0] != 0 {
            return None;
        }
        Some(Matches {
            offsets: offsets.to_host(&stream).expect("offsets"),
            tuples: out.to_host(&stream, 2).expect("tuples"),
        })
    });
}

/// Tuples in the storm.
pub(crate) const KEYS: u32 = 20_000;

/// Modifies every tuple 30 times on this thread while `search` runs on another (None: a
/// search not to judge); every judged search finds each tuple once or twice.
fn storm(search: impl Fn(&HyperspaceIndex, &[Query]) -> Option<Matches> + Sync) {
    storm_with(|options| options, search);
}

/// [`storm`] with the index's options passed through `options_of`.
pub(crate) fn storm_with(
    options_of: impl Fn(HyperspaceOptions) -> HyperspaceOptions,
    search: impl Fn(&HyperspaceIndex, &[Query]) -> Option<Matches> + Sync,
) {
    let _memory = shared_memory();
    for subspaces in [Subspaces::Pairs, Subspaces::EachAttribute] {
        let mut rng = SeededRng::new(21);
        let keys: Vec<u32> = (0..KEYS).map(|k| k * 7 + 1).collect();
        let options = options_of(
            HyperspaceOptions::default()
                .subspaces(subspaces)
                .space_bits(8),
        );
        let index =
            HyperspaceIndex::build(device(), 2, batch(&tuples(&mut rng, &keys, 0)), options)
                .expect("a build");
        let storming = AtomicBool::new(true);
        std::thread::scope(|scope| {
            let index = &index;
            let storming = &storming;
            let keys = &keys;
            let search = &search;
            let searcher = scope.spawn(move || {
                let queries: Vec<Query> = (0..GROUPS).map(|g| Query::attribute(0, g)).collect();
                let mut searches = 0;
                while storming.load(Ordering::SeqCst) || searches < 3 {
                    let Some(matches) = search(index, &queries) else {
                        continue;
                    };
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
