//! Random sequences of every operation (quickcheck), each step held against the host
//! model.

use crate::common::{Model, batch, check_contents, check_searches, index};
use gpuhash_hyperspace::shape::{Field, SpaceShape};
use gpuhash_hyperspace::{
    HyperspaceError, HyperspaceOptions, Query, SearchStrategy, Subspaces, Tuples,
};
use gpuhash_test_support::shared_memory;
use quickcheck::{Arbitrary, Gen, QuickCheck};

/// Keys from a small range, so that batches meet keys the index holds; attributes from
/// a smaller one, so that searches match many tuples.
const KEYS: u16 = 300;
const VALUES: u8 = 6;

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<(u16, u8, u8, u32)>),
    Modify(Vec<(u16, u8, u8, u32)>),
    Delete(Vec<u16>),
    Search(Vec<(u8, u8, Option<u8>)>),
    Clear,
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Self {
        let tuples = |g: &mut Gen| -> Vec<(u16, u8, u8, u32)> {
            Vec::<(u16, u8, u8, u32)>::arbitrary(g)
                .into_iter()
                .map(|(k, a, b, v)| (k % KEYS, a % VALUES, b % VALUES, v))
                .collect()
        };
        match u8::arbitrary(g) % 20 {
            0..=6 => Op::Insert(tuples(g)),
            7..=10 => Op::Modify(tuples(g)),
            11..=13 => Op::Delete(
                Vec::<u16>::arbitrary(g)
                    .into_iter()
                    .map(|k| k % KEYS)
                    .collect(),
            ),
            14..=18 => Op::Search(
                Vec::<(u8, u8, Option<u8>)>::arbitrary(g)
                    .into_iter()
                    .map(|(a, v, w)| (a % 2, v % VALUES, w.map(|w| w % VALUES)))
                    .collect(),
            ),
            _ => Op::Clear,
        }
    }
}

fn tuples_of(items: &[(u16, u8, u8, u32)]) -> Tuples {
    let n = items.len();
    let mut attributes = vec![0; 2 * n];
    for (i, &(_, a, b, _)) in items.iter().enumerate() {
        attributes[i] = u32::from(a);
        attributes[n + i] = u32::from(b);
    }
    Tuples {
        attribute_count: 2,
        keys: items.iter().map(|&(k, ..)| u32::from(k)).collect(),
        attributes,
        values: items.iter().map(|&(.., v)| v).collect(),
    }
}

fn has_repeats(keys: &[u32]) -> bool {
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// Subspaces of 6 values an attribute: each attribute alone, or with the key spread,
/// each attribute's 3 bits and the key's 2 bits after them (as a build or regroup would
/// size them for few values).
fn subspaces(key_spread: bool) -> Subspaces {
    if !key_spread {
        return Subspaces::EachAttribute;
    }
    let spread = |a| SpaceShape::new(vec![(Field::Attribute(a), 3), (Field::Key, 2)]).unwrap();
    Subspaces::Shapes(vec![spread(0), spread(1)])
}

fn run(ops: Vec<Op>, strategy: SearchStrategy, key_spread: bool) -> bool {
    let idx = index(
        2,
        64,
        HyperspaceOptions::default()
            .search(strategy)
            .space_bits(3)
            .key_spread(key_spread)
            .subspaces(subspaces(key_spread)),
    );
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let what = format!("step {step}: {op:?}");
        match op {
            Op::Insert(items) | Op::Modify(items) => {
                let tuples = tuples_of(items);
                let answer = if matches!(op, Op::Insert(_)) {
                    idx.insert(batch(&tuples)).map(|s| (Some(s), None))
                } else {
                    idx.modify(batch(&tuples)).map(|m| (None, Some(m)))
                };
                if has_repeats(&tuples.keys) {
                    assert!(
                        matches!(answer, Err(HyperspaceError::DuplicateKey { .. })),
                        "{what}: {answer:?}"
                    );
                } else {
                    match answer.expect(&what) {
                        (Some(status), _) => assert_eq!(status, model.insert(&tuples), "{what}"),
                        (_, Some(modified)) => {
                            assert_eq!(modified, model.modify(&tuples), "{what}")
                        }
                        _ => unreachable!("one of the two answers"),
                    }
                }
            }
            Op::Delete(keys) => {
                let keys: Vec<u32> = keys.iter().map(|&k| u32::from(k)).collect();
                // Every copy of a held key in the batch answers true.
                let held: Vec<bool> = keys.iter().map(|k| model.tuples.contains_key(k)).collect();
                model.delete(&keys);
                assert_eq!(idx.delete(&keys).expect(&what), held, "{what}");
            }
            Op::Search(specs) => {
                let queries: Vec<Query> = specs
                    .iter()
                    .map(|&(a, v, w)| {
                        let q = Query::attribute(a, u32::from(v));
                        match w {
                            Some(w) => q.and(Field::Attribute(1 - a), u32::from(w)),
                            None => q,
                        }
                    })
                    .collect();
                check_searches(&idx, &model, &queries, &what);
            }
            Op::Clear => {
                idx.clear().expect(&what);
                model = Model::default();
            }
        }
        check_contents(&idx, &model, &[KEYS.into()], &what);
    }
    true
}

#[test]
#[ignore = "needs a CUDA device"]
fn operation_sequences_match_the_model() {
    let _memory = shared_memory();
    QuickCheck::new().tests(40).quickcheck(
        (|ops: Vec<Op>| run(ops, SearchStrategy::Grouped, false)) as fn(Vec<Op>) -> bool,
    );
    QuickCheck::new().tests(20).quickcheck(
        (|ops: Vec<Op>| run(ops, SearchStrategy::OneAtATime, false)) as fn(Vec<Op>) -> bool,
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn operation_sequences_with_the_key_spread_match_the_model() {
    let _memory = shared_memory();
    QuickCheck::new().tests(40).quickcheck(
        (|ops: Vec<Op>| run(ops, SearchStrategy::Grouped, true)) as fn(Vec<Op>) -> bool,
    );
    QuickCheck::new().tests(20).quickcheck(
        (|ops: Vec<Op>| run(ops, SearchStrategy::OneAtATime, true)) as fn(Vec<Op>) -> bool,
    );
}
