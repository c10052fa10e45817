//! What the GPU tests share: the host model (a map of tuples, scanned for searches),
//! random batches, and comparisons that name what differs.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::collections::BTreeMap;

use gpuhash_hyperspace::shape::Field;
use gpuhash_hyperspace::{
    HyperspaceIndex, HyperspaceOptions, InsertStatus, Query, Tuple, TupleBatch, Tuples,
    is_reserved_key,
};
use gpuhash_test_support::{SeededRng, device};

/// The index's contents as the host sees them: every tuple by key.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub tuples: BTreeMap<u32, Tuple>,
}

impl Model {
    pub fn insert(&mut self, batch: &Tuples) -> Vec<InsertStatus> {
        batch
            .iter()
            .map(|t| match self.tuples.entry(t.key) {
                std::collections::btree_map::Entry::Occupied(_) => InsertStatus::Present,
                std::collections::btree_map::Entry::Vacant(spot) => {
                    spot.insert(t);
                    InsertStatus::Inserted
                }
            })
            .collect()
    }

    pub fn modify(&mut self, batch: &Tuples) -> Vec<bool> {
        batch
            .iter()
            .map(|t| match self.tuples.get_mut(&t.key) {
                Some(held) => {
                    *held = t;
                    true
                }
                None => false,
            })
            .collect()
    }

    pub fn delete(&mut self, keys: &[u32]) -> Vec<bool> {
        keys.iter()
            .map(|k| self.tuples.remove(k).is_some())
            .collect()
    }

    pub fn get(&self, keys: &[u32]) -> Vec<Option<Tuple>> {
        keys.iter().map(|k| self.tuples.get(k).cloned()).collect()
    }

    /// Every tuple the query matches, sorted.
    pub fn search(&self, query: &Query) -> Vec<Tuple> {
        self.tuples
            .values()
            .filter(|t| query.matches(t))
            .cloned()
            .collect()
    }
}

/// An empty index on the test device.
pub fn index(p: usize, capacity: u64, options: HyperspaceOptions) -> HyperspaceIndex {
    HyperspaceIndex::new(device(), p, capacity, options).expect("an index")
}

/// `n` tuples with distinct keys below `key_range` (never reserved), attributes below
/// `cardinality`, values anything.
pub fn random_tuples(
    rng: &mut SeededRng,
    p: usize,
    n: usize,
    key_range: u64,
    cardinality: u64,
) -> Tuples {
    let mut keys = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::new();
    while keys.len() < n {
        let key = (rng.next_u64() % key_range) as u32;
        if !is_reserved_key(key) && seen.insert(key) {
            keys.push(key);
        }
    }
    with_keys(rng, p, keys, cardinality)
}

/// Tuples of these keys with random attributes below `cardinality` and random values.
pub fn with_keys(rng: &mut SeededRng, p: usize, keys: Vec<u32>, cardinality: u64) -> Tuples {
    let n = keys.len();
    Tuples {
        attribute_count: p,
        attributes: (0..p * n)
            .map(|_| (rng.next_u64() % cardinality) as u32)
            .collect(),
        values: (0..n).map(|_| rng.next_u64() as u32).collect(),
        keys,
    }
}

pub fn batch(tuples: &Tuples) -> TupleBatch<'_> {
    tuples.as_batch()
}

/// Queries on each attribute for values below `cardinality` (and one beyond), pairs of
/// attributes, and keys.
pub fn some_queries(rng: &mut SeededRng, p: usize, cardinality: u64, model: &Model) -> Vec<Query> {
    let mut queries = Vec::new();
    for a in 0..p as u8 {
        for _ in 0..4 {
            queries.push(Query::attribute(a, (rng.next_u64() % cardinality) as u32));
        }
        queries.push(Query::attribute(a, cardinality as u32 + 5));
    }
    for _ in 0..8 {
        let a = (rng.next_u64() % p as u64) as u8;
        let b = (rng.next_u64() % p as u64) as u8;
        if a != b {
            queries.push(
                Query::attribute(a, (rng.next_u64() % cardinality) as u32)
                    .and(Field::Attribute(b), (rng.next_u64() % cardinality) as u32),
            );
        }
    }
    // Conjunctions that a held tuple meets, and a key alone.
    if let Some(t) = model.tuples.values().next() {
        let mut all = Query::new(Field::Key, t.key);
        for (a, &v) in t.attributes.iter().enumerate() {
            all = all.and(Field::Attribute(a as u8), v);
        }
        queries.push(all);
        queries.push(Query::new(Field::Key, t.key));
        queries.push(Query::attribute(0, t.attributes[0]).and(Field::Key, t.key));
    }
    queries
}

/// Checks every query's matches against the model: the same tuples, each once.
pub fn check_searches(index: &HyperspaceIndex, model: &Model, queries: &[Query], what: &str) {
    let matches = index.search(queries).expect("a search");
    assert_eq!(matches.offsets.len(), queries.len() + 1, "{what}: offsets");
    for (q, query) in queries.iter().enumerate() {
        let mut got = matches.of(q);
        got.sort();
        let expected = model.search(query);
        assert_eq!(got, expected, "{what}: query {q} {query:?}");
    }
}

/// Checks gets of every held key and of keys it does not hold, and the length.
pub fn check_contents(index: &HyperspaceIndex, model: &Model, absent: &[u32], what: &str) {
    let mut keys: Vec<u32> = model.tuples.keys().copied().collect();
    keys.extend(absent.iter().filter(|k| !model.tuples.contains_key(k)));
    assert_eq!(
        index.get(&keys).expect("a get"),
        model.get(&keys),
        "{what}: get"
    );
    assert_eq!(index.len().expect("len"), model.tuples.len(), "{what}: len");
}
