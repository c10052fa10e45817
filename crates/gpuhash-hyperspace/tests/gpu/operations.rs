//! Every operation on random and adversarial batches, one at a time and from several
//! threads, against the host model.

use crate::common::{
    Model, batch, check_contents, check_searches, index, random_tuples, some_queries, with_keys,
};
use gpuhash_core::table::{ErrorKind, TableError};
use gpuhash_hyperspace::shape::{Field, SpaceShape, coordinate};
use gpuhash_hyperspace::{
    HyperspaceError, HyperspaceIndex, HyperspaceOptions, InsertStatus, Query, SearchStrategy,
    Subspaces, TupleBatch, Tuples,
};
use gpuhash_test_support::{SeededRng, all_memory, device, fill_device_except, shared_memory};

/// Attribute values the hash must place like the host: extremes, neighbours, high bits.
const ODD_VALUES: [u32; 8] = [
    0,
    1,
    2,
    u32::MAX,
    u32::MAX - 1,
    u32::MAX - 2,
    1 << 31,
    0x8000_0001,
];

#[test]
#[ignore = "needs a CUDA device"]
fn device_buckets_equal_host_buckets() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(1);
    let shape = |dimensions| SpaceShape::new(dimensions).expect("a shape");
    // Subspaces with the key as their last dimension, as the key spread makes them.
    let spread = Subspaces::Shapes(vec![
        shape(vec![(Field::Attribute(1), 5), (Field::Key, 8)]),
        shape(vec![
            (Field::Attribute(0), 3),
            (Field::Attribute(2), 4),
            (Field::Key, 6),
        ]),
    ]);
    for subspaces in [Subspaces::EachAttribute, Subspaces::Pairs, spread] {
        let options = HyperspaceOptions::default()
            .subspaces(subspaces)
            .space_bits(13)
            .seed(77);
        let idx = index(3, 1000, options.clone());
        let mut tuples = random_tuples(&mut rng, 3, 500, 1 << 32, 1 << 32);
        for (i, &v) in ODD_VALUES.iter().enumerate() {
            tuples.attributes[i] = v;
            tuples.attributes[500 + i] = v;
        }
        for (s, shape) in idx.space_shapes().iter().enumerate() {
            let device_buckets = idx.buckets(s, batch(&tuples)).expect("buckets");
            for (i, t) in tuples.iter().enumerate() {
                let value_of = |f: Field| match f {
                    Field::Key => t.key,
                    Field::Attribute(a) => t.attributes[usize::from(a)],
                };
                assert_eq!(
                    device_buckets[i],
                    shape.bucket(options.seed, value_of),
                    "space {s}, tuple {i}"
                );
            }
        }
    }
    // The coordinate hash itself, at the values shape.rs pins down.
    assert_eq!(coordinate(1, 0, 10), 325);
}

/// Inserts in batches (some keys repeated from earlier batches), then gets and searches,
/// for several p, subspace layouts and both search strategies.
#[test]
#[ignore = "needs a CUDA device"]
fn random_batches_match_the_model() {
    let _memory = shared_memory();
    for (seed, p, subspaces, strategy) in [
        (2, 1, Subspaces::EachAttribute, SearchStrategy::Grouped),
        (3, 3, Subspaces::EachAttribute, SearchStrategy::OneAtATime),
        (4, 3, Subspaces::Pairs, SearchStrategy::Grouped),
        (5, 8, Subspaces::EachAttribute, SearchStrategy::Grouped),
        (
            6,
            4,
            Subspaces::Groups(vec![vec![0, 1, 2], vec![3]]),
            SearchStrategy::Grouped,
        ),
    ] {
        let mut rng = SeededRng::new(seed);
        let cardinality = 50;
        let options = HyperspaceOptions::default()
            .subspaces(subspaces)
            .search(strategy);
        let idx = index(p, 4000, options);
        let mut model = Model::default();
        for round in 0..4 {
            let tuples = random_tuples(&mut rng, p, 3000, 12_000, cardinality);
            let status = idx.insert(batch(&tuples)).expect("insert");
            assert_eq!(status, model.insert(&tuples), "seed {seed} round {round}");
            let queries = some_queries(&mut rng, p, cardinality, &model);
            check_searches(
                &idx,
                &model,
                &queries,
                &format!("seed {seed} round {round}"),
            );
        }
        check_contents(&idx, &model, &[12_000, 12_001, 0], &format!("seed {seed}"));
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn bulk_builds_hold_what_inserts_hold() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(7);
    for p in [1, 2, 5] {
        // Long chains (few bits) and sparse buckets (many bits).
        for bits in [2, 16] {
            let tuples = random_tuples(&mut rng, p, 20_000, 1 << 32, 300);
            let options = HyperspaceOptions::default().space_bits(bits);
            let built =
                HyperspaceIndex::build(device(), p, batch(&tuples), options).expect("a bulk build");
            let mut model = Model::default();
            model.insert(&tuples);
            let queries = some_queries(&mut rng, p, 300, &model);
            let what = format!("build p {p} bits {bits}");
            check_contents(&built, &model, &[], &what);
            check_searches(&built, &model, &queries, &what);
            // A built index takes inserts, modifies and deletes like any other.
            let more = random_tuples(&mut rng, p, 1000, 1 << 32, 300);
            assert_eq!(
                built.insert(batch(&more)).expect("insert"),
                model.insert(&more)
            );
            let gone: Vec<u32> = tuples.keys[..500].to_vec();
            assert_eq!(built.delete(&gone).expect("delete"), model.delete(&gone));
            check_searches(&built, &model, &queries, &format!("{what}, after more"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn grouped_and_one_at_a_time_searches_agree_under_many_queries_per_bucket() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(8);
    let tuples = random_tuples(&mut rng, 2, 50_000, 1 << 32, 40);
    let mut model = Model::default();
    model.insert(&tuples);
    for strategy in [SearchStrategy::Grouped, SearchStrategy::OneAtATime] {
        let options = HyperspaceOptions::default().space_bits(4).search(strategy);
        let idx = HyperspaceIndex::build(device(), 2, batch(&tuples), options).expect("build");
        // Many queries per bucket: every value of the small domain, several times over.
        let queries: Vec<Query> = (0..200)
            .map(|i| Query::attribute((i % 2) as u8, (i / 2 % 45) as u32))
            .collect();
        check_searches(&idx, &model, &queries, &format!("{strategy:?}"));
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn heavy_skew_keeps_every_match() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(9);
    let n = 40_000;
    let mut tuples = random_tuples(&mut rng, 3, n, 1 << 32, 1000);
    // One value in half the tuples, and the reserved words as attribute values.
    for i in 0..n / 2 {
        tuples.attributes[i] = 7;
    }
    tuples.attributes[n + 1] = u32::MAX;
    tuples.attributes[n + 2] = u32::MAX - 2;
    let idx = index(3, n as u64, HyperspaceOptions::default());
    let mut model = Model::default();
    assert_eq!(
        idx.insert(batch(&tuples)).expect("insert"),
        model.insert(&tuples)
    );
    let queries = vec![
        Query::attribute(0, 7),
        Query::attribute(0, 7).and(Field::Attribute(1), tuples.attributes[n]),
        Query::attribute(1, u32::MAX),
        Query::attribute(1, u32::MAX - 2),
        Query::attribute(2, u32::MAX - 1),
    ];
    check_searches(&idx, &model, &queries, "skew");
    // Half the tuples hold 7 by construction; the random other half holds it too, about
    // once in 1000 (the cardinality), so the count is the model's, not n / 2.
    let heavy = model.search(&queries[0]).len();
    assert!(heavy >= n / 2, "the model holds {heavy} sevens");
    let matches = idx.search(&queries[..1]).expect("search");
    assert_eq!(matches.range(0).len(), heavy, "the heavy value alone");
    check_searches(&idx, &model, &queries, "skew, searched again");
    check_contents(&idx, &model, &[], "skew");
    let mut exported: Vec<u32> = idx.export().expect("export").keys;
    exported.sort_unstable();
    let held: Vec<u32> = model.tuples.keys().copied().collect();
    assert_eq!(exported, held, "an export holds every key once");
}

/// Batches past the host check's size, whose keys the device checks: every fault is named
/// exactly as the host names it (the first in batch order), by the bulk build and by every
/// write, and the index is left as it was; a clean batch of the same size goes in.
#[test]
#[ignore = "needs a CUDA device"]
fn large_batches_with_bad_keys_are_named_exactly_and_rejected_whole() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(11);
    let p = 3;
    let n = 5000;
    let clean = random_tuples(&mut rng, p, n, 1 << 30, 40);
    let mut cases: Vec<(&str, Vec<u32>, HyperspaceError)> = Vec::new();
    let mut far = clean.keys.clone();
    far[4000] = far[10];
    cases.push((
        "a repeat far from its first copy",
        far.clone(),
        duplicate(10, 4000, far[10]),
    ));
    let mut two = far.clone();
    two[3000] = two[5];
    cases.push((
        "the first of two repeats",
        two.clone(),
        duplicate(5, 3000, two[5]),
    ));
    let same = vec![77; n];
    cases.push(("one key throughout", same, duplicate(0, 1, 77)));
    for (at, reserved) in [(0, u32::MAX), (2500, u32::MAX - 1), (n - 1, u32::MAX - 2)] {
        let mut keys = clean.keys.clone();
        keys[at] = reserved;
        cases.push((
            "a reserved key",
            keys,
            HyperspaceError::ReservedKey {
                index: at,
                key: reserved,
            },
        ));
    }
    let mut late_reserved = far.clone();
    late_reserved[4500] = u32::MAX;
    cases.push((
        "a repeat before a reserved key",
        late_reserved,
        duplicate(10, 4000, far[10]),
    ));
    let idx = index(p, 1 << 14, HyperspaceOptions::default());
    let mut model = Model::default();
    let held = random_tuples(&mut rng, p, 300, 1 << 30, 40);
    idx.insert(batch(&held)).expect("insert");
    model.insert(&held);
    for (what, keys, expected) in cases {
        let bad = Tuples {
            keys: keys.clone(),
            ..clean.clone()
        };
        let same_error = |answer: HyperspaceError, verb: &str| {
            assert_eq!(
                format!("{answer:?}"),
                format!("{expected:?}"),
                "{what}: {verb}"
            );
        };
        let built = HyperspaceIndex::build(device(), p, batch(&bad), HyperspaceOptions::default());
        let Err(rejected) = built else {
            panic!("{what}: build took the batch")
        };
        same_error(rejected, "build");
        same_error(
            idx.insert(batch(&bad)).expect_err("insert rejects"),
            "insert",
        );
        same_error(
            idx.modify(batch(&bad)).expect_err("modify rejects"),
            "modify",
        );
        let values = idx.modify_values(&keys, &bad.values);
        same_error(values.expect_err("modify_values rejects"), "modify_values");
        check_contents(&idx, &model, &[], what);
    }
    let built = HyperspaceIndex::build(device(), p, batch(&clean), HyperspaceOptions::default())
        .expect("a clean batch builds");
    let mut fresh = Model::default();
    fresh.insert(&clean);
    check_contents(&built, &fresh, &[], "built from the clean batch");
    let statuses = idx.insert(batch(&clean)).expect("a clean batch goes in");
    assert_eq!(statuses, model.insert(&clean), "insert statuses");
    check_contents(&idx, &model, &[], "after the clean insert");
}

fn duplicate(first: usize, second: usize, key: u32) -> HyperspaceError {
    HyperspaceError::DuplicateKey { first, second, key }
}

#[test]
#[ignore = "needs a CUDA device"]
fn bad_batches_are_rejected_whole() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(10);
    let idx = index(2, 1000, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, 2, 100, 1 << 20, 10);
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    for reserved in [u32::MAX, u32::MAX - 1, u32::MAX - 2] {
        let bad = with_keys(&mut rng, 2, vec![5_000_000, reserved], 10);
        let error = idx.insert(batch(&bad)).expect_err("a reserved key");
        assert!(matches!(
            error,
            HyperspaceError::ReservedKey { index: 1, .. }
        ));
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(idx.modify(batch(&bad)).is_err());
    }
    let twice = with_keys(&mut rng, 2, vec![6_000_000, 6_000_001, 6_000_000], 10);
    let error = idx.insert(batch(&twice)).expect_err("a key twice");
    assert!(matches!(
        error,
        HyperspaceError::DuplicateKey {
            first: 0,
            second: 2,
            ..
        }
    ));
    let short = TupleBatch {
        attributes: &tuples.attributes[..150],
        ..batch(&tuples)
    };
    assert!(matches!(
        idx.insert(short),
        Err(HyperspaceError::AttributeCount { expected: 2, .. })
    ));
    let no_values = TupleBatch {
        values: &[],
        ..batch(&tuples)
    };
    assert_eq!(
        idx.insert(no_values).expect_err("lengths").kind(),
        ErrorKind::InvalidInput
    );
    for p in [0, 9] {
        let error = HyperspaceIndex::new(device(), p, 10, HyperspaceOptions::default())
            .expect_err("p out of range");
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
    }
    for bad_query in [
        Query::attribute(2, 1),
        Query::attribute(0, 1).and(Field::Attribute(0), 2),
        Query::default(),
    ] {
        let error = idx
            .search(&[Query::attribute(0, 1), bad_query])
            .expect_err("bad query");
        assert!(matches!(error, HyperspaceError::BadQuery { index: 1, .. }));
    }
    check_contents(
        &idx,
        &model,
        &[5_000_000, 6_000_000],
        "after rejected batches",
    );
    check_searches(
        &idx,
        &model,
        &some_queries(&mut rng, 2, 10, &model),
        "after rejected",
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn modify_and_delete_answer_for_missing_keys_and_move_tuples() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(11);
    for subspaces in [Subspaces::EachAttribute, Subspaces::Pairs] {
        let idx = index(3, 10_000, HyperspaceOptions::default().subspaces(subspaces));
        let mut model = Model::default();
        let tuples = random_tuples(&mut rng, 3, 8000, 1 << 20, 30);
        idx.insert(batch(&tuples)).expect("insert");
        model.insert(&tuples);
        // Half the keys held, half not; new attributes everywhere (most tuples change
        // buckets), and some tuples modified to what they hold already.
        let mut keys: Vec<u32> = tuples.keys[..3000].to_vec();
        keys.extend((0..3000).map(|i| (1 << 21) + i));
        let mut changed = with_keys(&mut rng, 3, keys, 30);
        let n = changed.len();
        for i in 0..100 {
            let held = model.tuples[&changed.keys[i]].clone();
            for a in 0..3 {
                changed.attributes[a * n + i] = held.attributes[a];
            }
            changed.values[i] = held.value;
        }
        assert_eq!(
            idx.modify(batch(&changed)).expect("modify"),
            model.modify(&changed)
        );
        let queries = some_queries(&mut rng, 3, 30, &model);
        check_searches(&idx, &model, &queries, "after modify");
        // Values alone, attributes kept: for held keys and missing ones.
        let keys: Vec<u32> = changed.keys[2500..3500].to_vec();
        let values: Vec<u32> = keys.iter().map(|k| k ^ 0x5555).collect();
        let expected: Vec<bool> = keys
            .iter()
            .zip(&values)
            .map(|(k, &v)| match model.tuples.get_mut(k) {
                Some(held) => {
                    held.value = v;
                    true
                }
                None => false,
            })
            .collect();
        assert_eq!(
            idx.modify_values(&keys, &values).expect("modify values"),
            expected
        );
        check_searches(&idx, &model, &queries, "after modifying values");
        check_contents(&idx, &model, &[], "after modifying values");
        let mut gone: Vec<u32> = tuples.keys[2000..5000].to_vec();
        gone.extend([1 << 22, 1 << 22, tuples.keys[0]]);
        gone.push(tuples.keys[0]);
        let answered = idx.delete(&gone).expect("delete");
        let mut expected = model.delete(&gone);
        // A key named twice in one delete answers true for both copies when held.
        expected[gone.len() - 1] = expected[gone.len() - 2];
        assert_eq!(answered, expected);
        check_contents(&idx, &model, &gone, "after delete");
        check_searches(&idx, &model, &queries, "after delete");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn tiny_starts_grow_and_clear_keeps_working() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(12);
    // One bucket a space: every tuple in one chain of thousands of super nodes.
    let idx = index(2, 1, HyperspaceOptions::default().space_bits(0));
    let mut model = Model::default();
    for _ in 0..3 {
        let tuples = random_tuples(&mut rng, 2, 5000, 1 << 32, 20);
        assert_eq!(
            idx.insert(batch(&tuples)).expect("insert"),
            model.insert(&tuples)
        );
    }
    let queries = some_queries(&mut rng, 2, 20, &model);
    check_searches(&idx, &model, &queries, "one bucket");
    check_contents(&idx, &model, &[], "one bucket");
    let memory = idx.memory().expect("memory");
    assert!(memory.bytes_in_use <= memory.bytes_reserved);
    assert_eq!(memory.entry_bytes, model.tuples.len() as u64 * 16);
    idx.clear().expect("clear");
    assert!(idx.is_empty().expect("len"));
    model = Model::default();
    check_searches(&idx, &model, &queries, "cleared");
    let tuples = random_tuples(&mut rng, 2, 3000, 1 << 32, 20);
    assert_eq!(
        idx.insert(batch(&tuples)).expect("insert"),
        model.insert(&tuples)
    );
    check_searches(&idx, &model, &queries, "refilled");
    assert_eq!(
        idx.insert(batch(&tuples)).expect("insert again"),
        vec![InsertStatus::Present; tuples.len()]
    );
}

/// Out of device memory in the middle of a batch: an error value, and the index holds
/// what it held before.
#[test]
#[ignore = "needs a CUDA device"]
fn out_of_device_memory_leaves_the_index_unchanged() {
    let _memory = all_memory();
    let mut rng = SeededRng::new(13);
    let idx = index(2, 1000, HyperspaceOptions::default().space_bits(10));
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, 2, 1000, 1 << 32, 50);
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    let stream = device().new_stream().expect("a stream");
    let big = random_tuples(&mut rng, 2, 2_000_000, 1 << 32, 50);
    let outcome = {
        let _filler = fill_device_except(&stream, 64 << 20);
        idx.insert(batch(&big))
    };
    match outcome {
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::OutOfDeviceMemory, "{error}");
            check_contents(&idx, &model, &big.keys[..100], "after a refused batch");
            let queries = some_queries(&mut rng, 2, 50, &model);
            check_searches(&idx, &model, &queries, "after a refused batch");
        }
        Ok(status) => {
            // The device had room after all: then the batch went in whole.
            assert_eq!(status, model.insert(&big));
            check_contents(&idx, &model, &[], "after a batch that fit");
        }
    }
}

/// Empty batches and searches of nothing.
#[test]
#[ignore = "needs a CUDA device"]
fn empty_batches_do_nothing() {
    let _memory = shared_memory();
    let idx = index(1, 10, HyperspaceOptions::default());
    let empty = Tuples {
        attribute_count: 1,
        ..Tuples::default()
    };
    assert!(idx.insert(batch(&empty)).expect("insert").is_empty());
    assert!(idx.modify(batch(&empty)).expect("modify").is_empty());
    assert!(idx.delete(&[]).expect("delete").is_empty());
    assert!(idx.get(&[]).expect("get").is_empty());
    let matches = idx.search(&[]).expect("search");
    assert_eq!(matches.offsets, vec![0]);
    let none = idx.search(&[Query::attribute(0, 3)]).expect("search");
    assert_eq!(none.offsets, vec![0, 0]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_lookups_answer_like_host_lookups() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(14);
    let idx = index(3, 5000, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, 3, 5000, 1 << 16, 100);
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    let keys: Vec<u32> = (0..3000).map(|k| k * 23).collect();
    let stream = device().new_stream().expect("a stream");
    let keys_on = gpuhash_core::DeviceBuffer::from_host(&stream, &keys).expect("keys");
    let mut found = gpuhash_core::DeviceBuffer::zeroed(&stream, keys.len()).expect("found");
    let mut out = gpuhash_hyperspace::DeviceTuples::unfilled(&stream, 3, keys.len()).expect("out");
    idx.get_async(&stream, &keys_on, &mut found, &mut out)
        .expect("get_async");
    let found = found.to_host(&stream).expect("found");
    let out = out.to_host(&stream, 3).expect("out");
    for (i, expected) in model.get(&keys).into_iter().enumerate() {
        assert_eq!(
            (found[i] != 0).then(|| out.tuple(i)),
            expected,
            "key {}",
            keys[i]
        );
    }
    let mut short = gpuhash_core::DeviceBuffer::zeroed(&stream, 2).expect("short");
    let mut out = gpuhash_hyperspace::DeviceTuples::unfilled(&stream, 3, keys.len()).expect("out");
    let error = idx
        .get_async(&stream, &keys_on, &mut short, &mut out)
        .expect_err("lengths differ");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
}

/// Four host threads insert overlapping batches (each key with the same tuple in every
/// batch): every key goes in once, answered inserted by exactly one thread.
#[test]
#[ignore = "needs a CUDA device"]
fn inserts_from_four_threads_store_each_key_once() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(15);
    let all = random_tuples(&mut rng, 2, 40_000, 1 << 32, 64);
    let idx = index(2, 10_000, HyperspaceOptions::default());
    let slices: Vec<Tuples> = (0..4)
        .map(|t| {
            // Thread t takes tuples t * 7500 .. t * 7500 + 17_500: neighbours overlap.
            let range = t * 7_500..(t * 7_500 + 17_500).min(all.len());
            let keys = all.keys[range.clone()].to_vec();
            let n = keys.len();
            let mut attributes = Vec::with_capacity(2 * n);
            for a in 0..2 {
                attributes.extend(range.clone().map(|i| all.attributes[a * all.len() + i]));
            }
            Tuples {
                attribute_count: 2,
                keys,
                attributes,
                values: all.values[range].to_vec(),
            }
        })
        .collect();
    let answers: Vec<Vec<InsertStatus>> = std::thread::scope(|scope| {
        let handles: Vec<_> = slices
            .iter()
            .map(|slice| scope.spawn(|| idx.insert(batch(slice)).expect("insert")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread"))
            .collect()
    });
    let mut inserted = std::collections::HashMap::<u32, u32>::new();
    for (slice, answer) in slices.iter().zip(&answers) {
        for (&key, status) in slice.keys.iter().zip(answer) {
            *inserted.entry(key).or_default() += u32::from(*status == InsertStatus::Inserted);
        }
    }
    assert!(inserted.values().all(|&times| times == 1));
    let mut model = Model::default();
    for slice in &slices {
        model.insert(slice);
    }
    check_contents(&idx, &model, &[], "four threads");
    check_searches(
        &idx,
        &model,
        &some_queries(&mut rng, 2, 64, &model),
        "four threads",
    );
}

/// A light allocator moves every slab when it grows: a modify whose new copies make it
/// grow must still find the old copies it looked up before.
#[test]
#[ignore = "needs a CUDA device"]
fn modifies_that_grow_a_light_allocator_take_out_the_right_copies() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(16);
    let options = HyperspaceOptions::default()
        .variant(gpuhash_hyperspace::Variant::Light)
        .space_bits(2);
    let idx = index(2, 16, options);
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, 2, 3000, 1 << 32, 20);
    assert_eq!(
        idx.insert(batch(&tuples)).expect("insert"),
        model.insert(&tuples)
    );
    for round in 0..3 {
        let changed = with_keys(&mut rng, 2, tuples.keys.clone(), 20);
        assert_eq!(
            idx.modify(batch(&changed)).expect("modify"),
            model.modify(&changed)
        );
        let what = format!("light, round {round}");
        check_contents(&idx, &model, &[], &what);
        check_searches(&idx, &model, &some_queries(&mut rng, 2, 20, &model), &what);
    }
}

/// The spaces' dimensions, whether the attribute subspaces have a key dimension.
fn keyed_subspaces(idx: &HyperspaceIndex) -> Vec<bool> {
    idx.space_shapes()[1..]
        .iter()
        .map(|s| s.fields().contains(Field::Key))
        .collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn low_cardinality_modifies_deletes_and_searches_match_the_model_with_and_without_key_spread() {
    let _memory = shared_memory();
    for (spread, strategy) in [
        (true, SearchStrategy::Grouped),
        (true, SearchStrategy::OneAtATime),
        (false, SearchStrategy::Grouped),
    ] {
        let what = format!("key spread {spread}, {strategy:?}");
        let mut rng = SeededRng::new(0x5bed + u64::from(spread));
        let (p, n, cardinality) = (3, 40_000, 100);
        let options = HyperspaceOptions::default()
            .key_spread(spread)
            .search(strategy)
            .subspaces(Subspaces::Groups(vec![vec![0], vec![1, 2]]));
        let tuples = random_tuples(&mut rng, p, n, 1 << 24, cardinality);
        let idx = HyperspaceIndex::build(device(), p, batch(&tuples), options).expect(&what);
        // 40000 tuples, 32 a bucket: 11 bits. 100 values use 7: 4 left to the key beside
        // A0 alone; A1 and A2 use all 11 together (7 + 4 at most, 6 + 5 dealt).
        assert_eq!(keyed_subspaces(&idx), vec![spread, false], "{what}");
        let mut model = Model::default();
        model.insert(&tuples);
        check_contents(&idx, &model, &[7], &what);
        let mut queries = some_queries(&mut rng, p, cardinality, &model);
        // Every value of A0 once: each search touches all of its key coordinates.
        queries.extend((0..cardinality as u32 + 1).map(|v| Query::attribute(0, v)));
        check_searches(&idx, &model, &queries, &what);
        for round in 0..3 {
            let what = format!("{what}, round {round}");
            // Modify held keys (new attributes: most copies change bucket) and some absent.
            let mut keys: Vec<u32> = model.tuples.keys().copied().step_by(7).take(3000).collect();
            keys.extend([1 << 25, (1 << 25) + 1]);
            let changed = with_keys(&mut rng, p, keys, cardinality);
            assert_eq!(
                idx.modify(batch(&changed)).expect(&what),
                model.modify(&changed),
                "{what}: modify"
            );
            // Delete held keys and absent ones.
            let mut gone: Vec<u32> = model
                .tuples
                .keys()
                .copied()
                .skip(round)
                .step_by(11)
                .take(2000)
                .collect();
            gone.push(1 << 26);
            let expected = model.delete(&gone);
            assert_eq!(idx.delete(&gone).expect(&what), expected, "{what}: delete");
            check_contents(&idx, &model, &gone[..20], &what);
            check_searches(&idx, &model, &queries, &what);
        }
        // A regroup sizes the subspaces from the index's estimates: the key spread again.
        idx.regroup(Subspaces::EachAttribute).expect(&what);
        assert_eq!(keyed_subspaces(&idx), vec![spread; 3], "{what}: regrouped");
        check_contents(&idx, &model, &[7], &what);
        check_searches(&idx, &model, &queries, &what);
        // Keys past every one held.
        let fresh = with_keys(
            &mut rng,
            p,
            ((1 << 27)..(1 << 27) + 2000).collect(),
            cardinality,
        );
        assert_eq!(
            idx.insert(batch(&fresh)).expect(&what),
            model.insert(&fresh),
            "{what}"
        );
        check_searches(&idx, &model, &queries, &what);
    }
}
