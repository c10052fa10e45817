//! The bulk build against incremental inserts of the same tuples and the host model: low
//! and high cardinality, 1 to 8 attributes, one huge bucket, and allocators the build
//! must grow.

use crate::common::{
    Model, batch, check_contents, check_searches, index, random_tuples, some_queries,
};
use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Query, Tuple, Tuples};
use gpuhash_test_support::{SeededRng, device, shared_memory};

/// Every tuple of an index, sorted.
fn contents(index: &HyperspaceIndex) -> Vec<Tuple> {
    let mut tuples: Vec<Tuple> = index.export().expect("an export").iter().collect();
    tuples.sort();
    tuples
}

/// Builds `tuples` in bulk and inserts them into an empty index of the same options: both
/// must hold the model's tuples, answer its searches and keep taking writes (a write walks
/// the chains the build linked to their tails).
fn check_build(
    rng: &mut SeededRng,
    tuples: &Tuples,
    options: HyperspaceOptions,
    cardinality: u64,
    what: &str,
) {
    let p = tuples.attribute_count;
    let mut model = Model::default();
    model.insert(tuples);
    let built =
        HyperspaceIndex::build(device(), p, batch(tuples), options.clone()).expect("a bulk build");
    let inserted = index(p, tuples.keys.len() as u64, options);
    inserted.insert(batch(tuples)).expect("an insert");
    let mut queries = some_queries(rng, p, cardinality, &model);
    // Every tuple of the first one's buckets, whose chains the search walks to their ends.
    for a in 0..p {
        if let Some(&value) = tuples.attributes.get(a * tuples.keys.len()) {
            queries.push(Query::attribute(a as u8, value));
        }
    }
    check_contents(&built, &model, &[], &format!("{what}: built"));
    check_searches(&built, &model, &queries, &format!("{what}: built"));
    check_searches(&inserted, &model, &queries, &format!("{what}: inserted"));
    assert_eq!(
        contents(&built),
        contents(&inserted),
        "{what}: built and inserted differ"
    );
    let expected: Vec<Tuple> = model.tuples.values().cloned().collect();
    assert_eq!(contents(&built), expected, "{what}: exported");
    // Writes after the build: inserts land at the chains' tails, deletes find every copy.
    let more = random_tuples(rng, p, 700, 1 << 32, cardinality);
    assert_eq!(
        built.insert(batch(&more)).expect("insert"),
        model.insert(&more),
        "{what}: insert"
    );
    let gone: Vec<u32> = tuples.keys.iter().step_by(3).copied().collect();
    assert_eq!(
        built.delete(&gone).expect("delete"),
        model.delete(&gone),
        "{what}: delete"
    );
    check_contents(&built, &model, &gone, &format!("{what}: after writes"));
    check_searches(&built, &model, &queries, &format!("{what}: after writes"));
}

#[test]
#[ignore = "needs a CUDA device"]
fn bulk_builds_equal_inserts_at_low_and_high_cardinality() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(31);
    for p in [1, 4, 8] {
        // 3 and 100 values: a few buckets of hundreds of super nodes each, which the
        // allocator (sized for buckets of about one super node) must grow for; 2^30: one
        // or two super nodes a bucket.
        for cardinality in [3, 100, 1 << 30] {
            let tuples = random_tuples(&mut rng, p, 40_000, 1 << 32, cardinality);
            let what = format!("p {p} cardinality {cardinality}");
            check_build(
                &mut rng,
                &tuples,
                HyperspaceOptions::default(),
                cardinality,
                &what,
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn one_huge_bucket_is_built_whole() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(32);
    for p in [1, 4, 8] {
        // Every tuple the same attribute values: each subspace one bucket of 2000 super
        // nodes; with no coordinate bits the key index too.
        let mut tuples = random_tuples(&mut rng, p, 62_001, 1 << 32, 1);
        tuples.attributes.iter_mut().for_each(|a| *a = 0xdead_beef);
        for bits in [0, 12] {
            let options = HyperspaceOptions::default().space_bits(bits);
            check_build(&mut rng, &tuples, options, 1, &format!("p {p} bits {bits}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn builds_of_few_and_exact_multiples_of_a_node() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(33);
    // Tuple counts at a super node's edges: none, one, 31, 32, 62, in one bucket and spread.
    for n in [0, 1, 31, 32, 62, 93] {
        for bits in [0, 3] {
            let tuples = random_tuples(&mut rng, 2, n, 1 << 32, 4);
            let options = HyperspaceOptions::default().space_bits(bits);
            check_build(&mut rng, &tuples, options, 4, &format!("n {n} bits {bits}"));
        }
    }
}
