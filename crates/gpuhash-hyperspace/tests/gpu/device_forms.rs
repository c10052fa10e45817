//! The device forms (insert_on, modify_on, modify_values_on, delete_on, search_async)
//! against the host model: random and skewed batches, missing and repeated keys, empty
//! batches, bad lengths and bad keys (rejected whole, the index unchanged).

use crate::common::{
    Model, batch, check_contents, check_searches, index, random_tuples, some_queries, with_keys,
};
use gpuhash_core::DeviceBuffer;
use gpuhash_hyperspace::shape::Field;
use gpuhash_hyperspace::{
    DeviceTuples, HyperspaceError, HyperspaceIndex, HyperspaceOptions, InsertStatus, Matches,
    Query, SearchStrategy, Subspaces, Tuple, Tuples,
};
use gpuhash_test_support::{SeededRng, shared_memory, stream};

fn on_device(tuples: &Tuples) -> DeviceTuples {
    DeviceTuples::from_batch(stream(), batch(tuples)).expect("an upload")
}

fn keys_on(keys: &[u32]) -> DeviceBuffer<u32> {
    DeviceBuffer::from_host(stream(), keys).expect("an upload")
}

fn flags(n: usize) -> DeviceBuffer<u8> {
    // Filled with 7, so that an answer left unwritten shows.
    DeviceBuffer::from_host(stream(), &vec![7u8; n]).expect("flags")
}

fn host(flags: &DeviceBuffer<u8>) -> Vec<bool> {
    let bytes = flags.to_host(stream()).expect("a download");
    assert!(bytes.iter().all(|&b| b <= 1), "flags are 0 or 1: {bytes:?}");
    bytes.into_iter().map(|b| b == 1).collect()
}

fn insert_on(idx: &HyperspaceIndex, tuples: &Tuples) -> Vec<InsertStatus> {
    let mut inserted = flags(tuples.len());
    idx.insert_on(stream(), &on_device(tuples), &mut inserted)
        .expect("insert_on");
    host(&inserted)
        .into_iter()
        .map(|i| {
            if i {
                InsertStatus::Inserted
            } else {
                InsertStatus::Present
            }
        })
        .collect()
}

fn modify_on(idx: &HyperspaceIndex, tuples: &Tuples) -> Vec<bool> {
    let mut modified = flags(tuples.len());
    idx.modify_on(stream(), &on_device(tuples), &mut modified)
        .expect("modify_on");
    host(&modified)
}

fn modify_values_on(idx: &HyperspaceIndex, keys: &[u32], values: &[u32]) -> Vec<bool> {
    let mut modified = flags(keys.len());
    let values = DeviceBuffer::from_host(stream(), values).expect("values");
    idx.modify_values_on(stream(), &keys_on(keys), &values, &mut modified)
        .expect("modify_values_on");
    host(&modified)
}

fn delete_on(idx: &HyperspaceIndex, keys: &[u32]) -> Vec<bool> {
    let mut deleted = flags(keys.len());
    idx.delete_on(stream(), &keys_on(keys), &mut deleted)
        .expect("delete_on");
    host(&deleted)
}

/// Distinct keys from `range`, some of them held by the model, some not.
fn mixed_keys(rng: &mut SeededRng, model: &Model, n: usize, range: u64) -> Vec<u32> {
    let held: Vec<u32> = model.tuples.keys().copied().collect();
    let mut keys = std::collections::BTreeSet::new();
    while keys.len() < n {
        let key = if !held.is_empty() && rng.next_u64().is_multiple_of(2) {
            held[(rng.next_u64() % held.len() as u64) as usize]
        } else {
            (rng.next_u64() % range) as u32
        };
        keys.insert(key);
    }
    let mut keys: Vec<u32> = keys.into_iter().collect();
    // Batch order unlike key order.
    keys.sort_by_key(|&k| gpuhash_core::hash::fmix32(k));
    keys
}

/// Rounds of every device write on random batches (keys colliding with held ones,
/// attributes of few values: heavy skew), each answer and then the contents and searches
/// against the model.
#[test]
#[ignore = "needs a CUDA device"]
fn device_writes_match_the_model() {
    let _memory = shared_memory();
    for (seed, p, cardinality, subspaces) in [
        (40, 2, 3, Subspaces::EachAttribute),
        (41, 4, 1000, Subspaces::Pairs),
        (42, 1, 1, Subspaces::EachAttribute),
    ] {
        let mut rng = SeededRng::new(seed);
        let idx = index(
            p,
            1 << 12,
            HyperspaceOptions::default().subspaces(subspaces),
        );
        let mut model = Model::default();
        let range = 1 << 13;
        for round in 0..6 {
            let what = format!("seed {seed}, round {round}");
            let keys = mixed_keys(&mut rng, &model, 700, range);
            let tuples = with_keys(&mut rng, p, keys, cardinality);
            assert_eq!(
                insert_on(&idx, &tuples),
                model.insert(&tuples),
                "{what}: insert_on"
            );
            let keys = mixed_keys(&mut rng, &model, 300, range);
            let moved = with_keys(&mut rng, p, keys, cardinality);
            assert_eq!(
                modify_on(&idx, &moved),
                model.modify(&moved),
                "{what}: modify_on"
            );
            let keys = mixed_keys(&mut rng, &model, 200, range);
            let values: Vec<u32> = keys.iter().map(|_| rng.next_u64() as u32).collect();
            let expected: Vec<bool> = keys
                .iter()
                .zip(&values)
                .map(|(k, &v)| {
                    if let Some(held) = model.tuples.get_mut(k) {
                        held.value = v;
                        true
                    } else {
                        false
                    }
                })
                .collect();
            assert_eq!(
                modify_values_on(&idx, &keys, &values),
                expected,
                "{what}: modify_values_on"
            );
            let keys = mixed_keys(&mut rng, &model, 150, range);
            assert_eq!(
                delete_on(&idx, &keys),
                model.delete(&keys),
                "{what}: delete_on"
            );
            check_contents(&idx, &model, &[0, 1, u32::MAX - 3], &what);
            let queries = some_queries(&mut rng, p, cardinality, &model);
            check_searches(&idx, &model, &queries, &what);
        }
    }
}

/// A key repeated in a delete answers for every copy (the host form's rule); repeated or
/// reserved keys reject a device insert, modify or value modify whole.
#[test]
#[ignore = "needs a CUDA device"]
fn device_writes_check_keys_like_host_writes() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(43);
    let p = 2;
    let idx = index(p, 1 << 10, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, p, 400, 1 << 20, 50);
    model.insert(&tuples);
    insert_on(&idx, &tuples);
    for bad_keys in [
        vec![5, 6, 5],
        vec![7, u32::MAX],
        vec![u32::MAX - 1],
        vec![u32::MAX - 2, 8],
    ] {
        let bad = with_keys(&mut rng, p, bad_keys.clone(), 50);
        let mut answers = flags(bad.len());
        let inserted = idx.insert_on(stream(), &on_device(&bad), &mut answers);
        assert!(
            matches!(
                inserted,
                Err(HyperspaceError::DuplicateKey { .. } | HyperspaceError::ReservedKey { .. })
            ),
            "insert_on {bad_keys:?}: {inserted:?}"
        );
        let modified = idx.modify_on(stream(), &on_device(&bad), &mut answers);
        assert!(modified.is_err(), "modify_on {bad_keys:?}");
        let values = DeviceBuffer::from_host(stream(), &bad.values).expect("values");
        let modified = idx.modify_values_on(stream(), &keys_on(&bad_keys), &values, &mut answers);
        assert!(modified.is_err(), "modify_values_on {bad_keys:?}");
        assert!(
            answers
                .to_host(stream())
                .expect("flags")
                .iter()
                .all(|&b| b == 7),
            "a rejected batch writes no answer"
        );
        check_contents(&idx, &model, &bad_keys, &format!("after {bad_keys:?}"));
    }
    // Repeated and reserved keys in a delete: every copy of a held key answers yes.
    let held = tuples.keys[0];
    let keys = [held, 3, held, u32::MAX, held];
    assert_eq!(
        delete_on(&idx, &keys),
        vec![true, model.tuples.contains_key(&3), true, false, true]
    );
    model.delete(&[held, 3]);
    check_contents(&idx, &model, &keys, "after the repeated delete");
}

/// Buffers of the wrong length reject the batch before anything is written.
#[test]
#[ignore = "needs a CUDA device"]
fn device_writes_reject_bad_lengths() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(44);
    let p = 3;
    let idx = index(p, 1 << 10, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, p, 100, 1 << 20, 10);
    model.insert(&tuples);
    insert_on(&idx, &tuples);
    let fresh = random_tuples(&mut rng, p, 50, 1 << 20, 10);
    let fresh = Tuples {
        keys: fresh.keys.iter().map(|k| k | 1 << 21).collect(),
        ..fresh
    };
    let short_answers = || flags(fresh.len() - 1);
    let bad_tuples = [
        // One value short.
        DeviceTuples {
            values: DeviceBuffer::from_host(stream(), &fresh.values[1..]).expect("values"),
            ..on_device(&fresh)
        },
        // One attribute column short.
        DeviceTuples {
            attributes: DeviceBuffer::from_host(stream(), &fresh.attributes[fresh.len()..])
                .expect("attributes"),
            ..on_device(&fresh)
        },
    ];
    for (i, bad) in bad_tuples.iter().enumerate() {
        let mut answers = flags(fresh.len());
        assert!(idx.insert_on(stream(), bad, &mut answers).is_err(), "{i}");
        assert!(idx.modify_on(stream(), bad, &mut answers).is_err(), "{i}");
    }
    let good = on_device(&fresh);
    assert!(
        idx.insert_on(stream(), &good, &mut short_answers())
            .is_err()
    );
    assert!(
        idx.modify_on(stream(), &good, &mut short_answers())
            .is_err()
    );
    assert!(
        idx.delete_on(stream(), &good.keys, &mut short_answers())
            .is_err()
    );
    let short_values = DeviceBuffer::from_host(stream(), &fresh.values[1..]).expect("values");
    assert!(
        idx.modify_values_on(stream(), &good.keys, &short_values, &mut flags(fresh.len()))
            .is_err()
    );
    check_contents(&idx, &model, &fresh.keys, "after bad lengths");
}

/// Empty device batches change nothing and answer nothing.
#[test]
#[ignore = "needs a CUDA device"]
fn empty_device_batches_do_nothing() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(45);
    let p = 2;
    let idx = index(p, 1 << 10, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, p, 64, 1 << 20, 10);
    model.insert(&tuples);
    insert_on(&idx, &tuples);
    let empty = Tuples {
        attribute_count: p,
        ..Tuples::default()
    };
    assert!(insert_on(&idx, &empty).is_empty());
    assert!(modify_on(&idx, &empty).is_empty());
    assert!(modify_values_on(&idx, &[], &[]).is_empty());
    assert!(delete_on(&idx, &[]).is_empty());
    let mut offsets = DeviceBuffer::<u64>::zeroed(stream(), 1).expect("offsets");
    let mut out = DeviceTuples::unfilled(stream(), p, 0).expect("out");
    let mut incomplete = DeviceBuffer::<u64>::zeroed(stream(), 1).expect("flag");
    idx.search_async(stream(), &[], &mut offsets, &mut out, &mut incomplete)
        .expect("an empty search");
    assert_eq!(offsets.to_host(stream()).expect("offsets"), vec![0]);
    assert_eq!(incomplete.to_host(stream()).expect("flag"), vec![0]);
    check_contents(&idx, &model, &[], "after empty batches");
}

/// What an async search answered: the rows (each sorted) and the incomplete flag.
fn search_async(
    idx: &HyperspaceIndex,
    queries: &[Query],
    capacity: usize,
) -> (Vec<u64>, Vec<Vec<Tuple>>, bool) {
    let p = idx.attribute_count();
    let mut offsets = DeviceBuffer::<u64>::zeroed(stream(), queries.len() + 1).expect("offsets");
    let mut out = DeviceTuples::unfilled(stream(), p, capacity).expect("out");
    let mut incomplete = DeviceBuffer::<u64>::from_host(stream(), &[99]).expect("flag");
    idx.search_async(stream(), queries, &mut offsets, &mut out, &mut incomplete)
        .expect("search_async");
    let offsets = offsets.to_host(stream()).expect("offsets");
    let incomplete = incomplete.to_host(stream()).expect("flag")[0] != 0;
    let tuples = out.to_host(stream(), p).expect("tuples");
    let rows = (0..queries.len())
        .map(|q| {
            let (from, to) = (offsets[q] as usize, offsets[q + 1] as usize);
            let mut row: Vec<Tuple> = (from.min(capacity)..to.min(capacity))
                .map(|i| tuples.tuple(i))
                .collect();
            row.sort();
            row
        })
        .collect();
    (offsets, rows, incomplete)
}

/// Async searches into buffers of the exact size, of room to spare and of one tuple too
/// few, on skewed attributes and both strategies, against the model and the host search.
#[test]
#[ignore = "needs a CUDA device"]
fn async_searches_match_the_model() {
    let _memory = shared_memory();
    for (seed, p, cardinality, strategy) in [
        (46, 2, 4, SearchStrategy::Grouped),
        (47, 3, 200, SearchStrategy::OneAtATime),
        (48, 1, 1, SearchStrategy::Grouped),
    ] {
        let mut rng = SeededRng::new(seed);
        let idx = index(p, 1 << 12, HyperspaceOptions::default().search(strategy));
        let mut model = Model::default();
        let tuples = random_tuples(&mut rng, p, 3000, 1 << 30, cardinality);
        assert!(
            idx.insert(batch(&tuples))
                .expect("insert")
                .iter()
                .all(|&s| s == InsertStatus::Inserted)
        );
        model.insert(&tuples);
        let mut queries = some_queries(&mut rng, p, cardinality, &model);
        // A query matching nothing, one matching everything of value 0, repeats, and a
        // missing key.
        queries.push(Query::attribute(0, u32::MAX));
        queries.push(Query::attribute(0, 0));
        queries.push(Query::attribute(0, 0));
        queries.push(Query::new(Field::Key, u32::MAX - 3));
        let expected: Vec<Vec<Tuple>> = queries.iter().map(|q| model.search(q)).collect();
        let total: usize = expected.iter().map(Vec::len).sum();
        let what = format!("seed {seed}");
        for capacity in [total, total + 100] {
            let (offsets, rows, incomplete) = search_async(&idx, &queries, capacity);
            assert!(!incomplete, "{what}: capacity {capacity} is enough");
            assert_eq!(offsets[queries.len()] as usize, total, "{what}: total");
            assert_eq!(rows, expected, "{what}: rows, capacity {capacity}");
        }
        if total > 0 {
            let (offsets, rows, incomplete) = search_async(&idx, &queries, total - 1);
            assert!(incomplete, "{what}: one tuple too few must be flagged");
            assert_eq!(offsets[queries.len()] as usize, total, "{what}: total");
            // Every row that fits is whole.
            for (q, row) in rows.iter().enumerate() {
                if (offsets[q + 1] as usize) < total {
                    assert_eq!(row, &expected[q], "{what}: row {q} inside the buffer");
                }
            }
        }
        check_searches(&idx, &model, &queries, &what);
    }
}

/// Searches into one `Matches` reused batch after batch (answers longer, shorter, none,
/// and past the vectors' capacity, starting from stale longer vectors) give the model's
/// rows, of the host search's lengths.
#[test]
#[ignore = "needs a CUDA device"]
fn searches_into_reused_answers_match_the_model() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(53);
    let p = 3;
    let cardinality = 6;
    let idx = index(p, 1 << 12, HyperspaceOptions::default());
    let tuples = random_tuples(&mut rng, p, 4000, 1 << 30, cardinality);
    assert!(
        idx.insert(batch(&tuples))
            .expect("insert")
            .iter()
            .all(|&s| s == InsertStatus::Inserted)
    );
    let mut model = Model::default();
    model.insert(&tuples);
    let many = some_queries(&mut rng, p, cardinality, &model);
    let few = vec![Query::attribute(1, 0), Query::attribute(0, u32::MAX)];
    let none = vec![Query::attribute(2, u32::MAX)];
    let mut out = Matches {
        offsets: vec![9; 50_000],
        tuples: Tuples {
            attribute_count: 7,
            keys: vec![9; 50_000],
            attributes: vec![9; 50_000],
            values: vec![9; 50_000],
        },
    };
    for (round, queries) in [&many, &few, &none, &many, &few].into_iter().enumerate() {
        idx.search_into(queries, &mut out)
            .expect("a search into reused answers");
        let what = format!("round {round}");
        assert_eq!(out.offsets.len(), queries.len() + 1, "{what}: offsets");
        assert_eq!(out.tuples.attribute_count, p, "{what}: attributes a tuple");
        let total = out.offsets[queries.len()] as usize;
        assert_eq!(out.tuples.len(), total, "{what}: keys");
        assert_eq!(
            out.tuples.attributes.len(),
            p * total,
            "{what}: attribute columns"
        );
        assert_eq!(out.tuples.values.len(), total, "{what}: values");
        for (q, query) in queries.iter().enumerate() {
            let mut got = out.of(q);
            got.sort();
            assert_eq!(got, model.search(query), "{what}: query {q} {query:?}");
        }
        let fresh = idx.search(queries).expect("a host search");
        assert_eq!(
            out.offsets, fresh.offsets,
            "{what}: rows as a host search's"
        );
    }
}

/// search_async rejects buffers of the wrong shape before queuing anything.
#[test]
#[ignore = "needs a CUDA device"]
fn async_searches_reject_bad_buffers() {
    let _memory = shared_memory();
    let p = 2;
    let idx = index(p, 1 << 10, HyperspaceOptions::default());
    let queries = [Query::attribute(0, 1), Query::attribute(1, 2)];
    let buffers = |offsets: usize, p: usize, capacity: usize, flag: usize| {
        (
            DeviceBuffer::<u64>::zeroed(stream(), offsets).expect("offsets"),
            DeviceTuples::unfilled(stream(), p, capacity).expect("out"),
            DeviceBuffer::<u64>::zeroed(stream(), flag).expect("flag"),
        )
    };
    for (offsets, out_p, flag) in [(2, 2, 1), (4, 2, 1), (3, 3, 1), (3, 2, 0), (3, 2, 2)] {
        let (mut offsets, mut out, mut incomplete) = buffers(offsets, out_p, 10, flag);
        assert!(
            idx.search_async(stream(), &queries, &mut offsets, &mut out, &mut incomplete)
                .is_err()
        );
    }
    let (mut offsets, mut out, mut incomplete) = buffers(3, 2, 10, 1);
    let bad_query = [Query::attribute(5, 1)];
    assert!(
        idx.search_async(
            stream(),
            &bad_query,
            &mut offsets,
            &mut out,
            &mut incomplete
        )
        .is_err()
    );
}
