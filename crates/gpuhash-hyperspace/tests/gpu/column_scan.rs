//! The column scan against a host model (a Vec of tuples scanned) and against the index's
//! searches: random and skewed columns, repeated queries, conjunctions, keys, batches of
//! several chunks, empty batches and bad input.

use crate::common::{Model, batch, random_tuples, some_queries};
use gpuhash_core::DeviceBuffer;
use gpuhash_hyperspace::scan::{CHUNK, ColumnScan};
use gpuhash_hyperspace::shape::Field;
use gpuhash_hyperspace::{
    DeviceTuples, HyperspaceError, HyperspaceIndex, HyperspaceOptions, Matches, Query, Tuple,
    Tuples,
};
use gpuhash_test_support::{SeededRng, device, shared_memory, stream};

/// Every tuple of `tuples` that `query` matches, sorted: the host model.
fn vec_scan(tuples: &[Tuple], query: &Query) -> Vec<Tuple> {
    let mut found: Vec<Tuple> = tuples
        .iter()
        .filter(|t| query.matches(t))
        .cloned()
        .collect();
    found.sort();
    found
}

/// Query q's matches, sorted.
fn sorted_rows(matches: &Matches, q: usize) -> Vec<Tuple> {
    let mut rows = matches.of(q);
    rows.sort();
    rows
}

/// The scan's answer to `queries` over `tuples`, checked against the host model: rising
/// offsets, and each query's matches the model's, each once.
fn check_scan(scan: &ColumnScan, tuples: &Tuples, queries: &[Query], what: &str) -> Matches {
    let matches = scan.search(queries).expect("a column scan");
    assert_eq!(matches.offsets.len(), queries.len() + 1, "{what}: offsets");
    assert_eq!(matches.offsets[0], 0, "{what}: first offset");
    assert!(
        matches.offsets.windows(2).all(|w| w[0] <= w[1]),
        "{what}: offsets rise"
    );
    assert_eq!(
        *matches.offsets.last().expect("offsets") as usize,
        matches.tuples.len(),
        "{what}: total"
    );
    let all: Vec<Tuple> = tuples.iter().collect();
    for (q, query) in queries.iter().enumerate() {
        assert_eq!(
            sorted_rows(&matches, q),
            vec_scan(&all, query),
            "{what}: query {q} {query:?}"
        );
    }
    matches
}

/// The index's answers equal the scan's, as sets per query.
fn check_index(index: &HyperspaceIndex, scanned: &Matches, queries: &[Query], what: &str) {
    let searched = index.search(queries).expect("a search");
    for (q, query) in queries.iter().enumerate() {
        assert_eq!(
            sorted_rows(&searched, q),
            sorted_rows(scanned, q),
            "{what}: the index and the scan differ on query {q} {query:?}"
        );
    }
}

/// Every query of `queries` again, in reverse order, after them.
fn repeated(mut queries: Vec<Query>) -> Vec<Query> {
    let again: Vec<Query> = queries.iter().rev().cloned().collect();
    queries.extend(again);
    queries
}

/// Conjunctions of every field of some held tuples, forwards and backwards; the first
/// two attributes' values swapped; and their keys alone.
fn whole_tuple_queries(tuples: &Tuples, count: usize) -> Vec<Query> {
    let mut queries = Vec::new();
    for t in tuples.iter().take(count) {
        let fields = std::iter::once((Field::Key, t.key)).chain(
            t.attributes
                .iter()
                .enumerate()
                .map(|(a, &v)| (Field::Attribute(a as u8), v)),
        );
        let all: Vec<(Field, u32)> = fields.collect();
        for order in [all.clone(), all.iter().rev().copied().collect()] {
            let (first, rest) = order.split_first().expect("a key");
            queries.push(
                rest.iter()
                    .fold(Query::new(first.0, first.1), |q, &(f, v)| q.and(f, v)),
            );
        }
        if t.attributes.len() >= 2 {
            queries.push(
                Query::attribute(1, t.attributes[0]).and(Field::Attribute(0), t.attributes[1]),
            );
        }
        queries.push(Query::new(Field::Key, t.key));
    }
    queries
}

#[test]
#[ignore = "needs a CUDA device"]
fn column_scans_answer_like_a_vec_scan_and_the_index() {
    let _memory = shared_memory();
    for (seed, p, n, cardinality) in [
        (21, 1, 20_011, 50),
        (22, 3, 20_000, 40),
        (23, 8, 9_973, 20),
        (24, 2, 777, 1 << 32),
    ] {
        let mut rng = SeededRng::new(seed);
        let mut tuples = random_tuples(&mut rng, p, n, 1 << 32, cardinality);
        // Extreme words as attribute values, in the first rows of every column.
        for a in 0..p {
            for (i, v) in [0, 1, u32::MAX, u32::MAX - 1, 1 << 31]
                .into_iter()
                .enumerate()
            {
                tuples.attributes[a * n + i] = v;
            }
        }
        let mut model = Model::default();
        model.insert(&tuples);
        let mut queries = some_queries(&mut rng, p, cardinality.min(1 << 20), &model);
        queries.extend(whole_tuple_queries(&tuples, 5));
        queries.push(Query::attribute(0, u32::MAX));
        queries.push(Query::attribute(0, 0).and(Field::Key, tuples.keys[0]));
        queries.push(Query::new(Field::Key, u32::MAX - 3));
        let queries = repeated(queries);
        let scan = ColumnScan::new(device(), p, batch(&tuples)).expect("columns");
        let what = format!("seed {seed}, p {p}, n {n}");
        let scanned = check_scan(&scan, &tuples, &queries, &what);
        let index =
            HyperspaceIndex::build(device(), p, batch(&tuples), HyperspaceOptions::default())
                .expect("an index");
        check_index(&index, &scanned, &queries, &what);
    }
}

/// One value in half the tuples (and, in the second column, in every tuple), searched
/// alone, several times in one batch, and in conjunctions.
#[test]
#[ignore = "needs a CUDA device"]
fn skewed_columns_and_repeated_queries() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(25);
    let (p, n) = (3, 60_000);
    let mut tuples = random_tuples(&mut rng, p, n, 1 << 32, 1000);
    for i in 0..n {
        if rng.next_u64().is_multiple_of(2) {
            tuples.attributes[i] = 7;
        }
        tuples.attributes[n + i] = 9;
    }
    let mut queries = vec![
        Query::attribute(0, 7),
        Query::attribute(1, 9),
        Query::attribute(0, 7),
        Query::attribute(0, 7).and(Field::Attribute(1), 9),
        Query::attribute(1, 9).and(Field::Attribute(0), 7),
        Query::attribute(0, 7).and(Field::Attribute(2), 3),
        Query::attribute(0, 8),
        Query::attribute(1, 9),
    ];
    for v in 0..50 {
        queries.push(Query::attribute(0, v));
        queries.push(Query::attribute(2, v).and(Field::Attribute(0), 7));
    }
    queries.push(Query::attribute(0, 7));
    let scan = ColumnScan::new(device(), p, batch(&tuples)).expect("columns");
    let scanned = check_scan(&scan, &tuples, &queries, "skewed");
    assert_eq!(scanned.range(1).len(), n, "every tuple holds 9 in A1");
    let index = HyperspaceIndex::build(device(), p, batch(&tuples), HyperspaceOptions::default())
        .expect("an index");
    check_index(&index, &scanned, &queries, "skewed");
}

/// Groups of more distinct queries than a block's table holds run in several chunks;
/// repeated queries spread over the chunks' boundaries.
#[test]
#[ignore = "needs a CUDA device"]
fn batches_larger_than_a_chunk() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(26);
    let (p, n, cardinality) = (2, 4000, 3000);
    let tuples = random_tuples(&mut rng, p, n, 1 << 32, cardinality);
    let mut queries: Vec<Query> = (0..2 * CHUNK as u32 + 500)
        .map(|v| Query::attribute(0, v % (cardinality as u32 + 10)))
        .collect();
    for i in 0..CHUNK + 100 {
        let t = tuples.tuple(i % n);
        queries
            .push(Query::attribute(0, t.attributes[0]).and(Field::Attribute(1), t.attributes[1]));
        queries.push(Query::attribute(1, (rng.next_u64() % cardinality) as u32));
    }
    let scan = ColumnScan::new(device(), p, batch(&tuples)).expect("columns");
    let scanned = check_scan(&scan, &tuples, &queries, "chunks");
    let index = HyperspaceIndex::build(device(), p, batch(&tuples), HyperspaceOptions::default())
        .expect("an index");
    check_index(&index, &scanned, &queries, "chunks");
}

/// Rows with the same key (which no index holds) are all found, and reserved key words
/// are plain words to a scan.
#[test]
#[ignore = "needs a CUDA device"]
fn a_scan_finds_every_row_of_a_repeated_key() {
    let _memory = shared_memory();
    let tuples = Tuples {
        attribute_count: 2,
        keys: vec![5, 5, u32::MAX, 6, 5],
        attributes: vec![1, 2, 1, 1, 1, /* A1: */ 3, 3, 4, 3, 4],
        values: vec![10, 11, 12, 13, 14],
    };
    let scan = ColumnScan::new(device(), 2, batch(&tuples)).expect("columns");
    let queries = [
        Query::new(Field::Key, 5),
        Query::new(Field::Key, u32::MAX),
        Query::new(Field::Key, 5).and(Field::Attribute(0), 1),
        Query::attribute(1, 3)
            .and(Field::Key, 5)
            .and(Field::Attribute(0), 1),
        Query::attribute(0, 1),
    ];
    let matches = check_scan(&scan, &tuples, &queries, "repeated keys");
    let sizes: Vec<usize> = (0..queries.len()).map(|q| matches.range(q).len()).collect();
    assert_eq!(sizes, vec![3, 1, 2, 1, 4]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn empty_batches_and_empty_columns() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(27);
    let tuples = random_tuples(&mut rng, 2, 100, 1 << 32, 5);
    let scan = ColumnScan::new(device(), 2, batch(&tuples)).expect("columns");
    let none = scan.search(&[]).expect("an empty batch");
    assert_eq!(none.offsets, vec![0]);
    assert!(none.tuples.is_empty());
    let on_device = scan.search_on(stream(), &[]).expect("an empty batch");
    assert_eq!(
        on_device.offsets.to_host(stream()).expect("offsets"),
        vec![0]
    );
    let empty = Tuples {
        attribute_count: 2,
        ..Tuples::default()
    };
    let nothing = ColumnScan::new(device(), 2, batch(&empty)).expect("no columns");
    assert!(nothing.is_empty());
    let queries = [Query::attribute(0, 1), Query::new(Field::Key, 3)];
    assert_eq!(
        nothing.search(&queries).expect("a scan").offsets,
        vec![0, 0, 0]
    );
}

/// The device form holds what the host form copies back.
#[test]
#[ignore = "needs a CUDA device"]
fn the_device_form_is_the_host_form() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(28);
    let tuples = random_tuples(&mut rng, 4, 5000, 1 << 32, 30);
    let columns = DeviceTuples::from_batch(stream(), batch(&tuples)).expect("columns");
    let scan = ColumnScan::from_columns(device(), 4, columns).expect("a scan");
    let queries: Vec<Query> = (0..30).map(|v| Query::attribute(3, v)).collect();
    let host = check_scan(&scan, &tuples, &queries, "device form");
    let on_device = scan.search_on(stream(), &queries).expect("a scan");
    assert_eq!(
        on_device.offsets.to_host(stream()).expect("offsets"),
        host.offsets
    );
    let rows = on_device.tuples.to_host(stream(), 4).expect("rows");
    for q in 0..queries.len() {
        let range = host.range(q);
        let mut got: Vec<Tuple> = range.clone().map(|i| rows.tuple(i)).collect();
        got.sort();
        assert_eq!(got, sorted_rows(&host, q), "query {q}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn bad_queries_and_columns_are_refused() {
    let _memory = shared_memory();
    let tuples = Tuples {
        attribute_count: 2,
        keys: vec![1, 2],
        attributes: vec![1, 2, 3, 4],
        values: vec![5, 6],
    };
    let scan = ColumnScan::new(device(), 2, batch(&tuples)).expect("columns");
    for bad in [
        vec![Query::attribute(0, 1), Query::attribute(2, 1)],
        vec![Query::default()],
        vec![Query::attribute(1, 1).and(Field::Attribute(1), 2)],
    ] {
        assert!(
            matches!(scan.search(&bad), Err(HyperspaceError::BadQuery { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(
        ColumnScan::new(device(), 3, batch(&tuples)),
        Err(HyperspaceError::AttributeCount { expected: 3, .. })
    ));
    for p in [0, 9] {
        let columns = DeviceTuples {
            keys: DeviceBuffer::from_host(stream(), &[1u32]).expect("keys"),
            attributes: DeviceBuffer::from_host(stream(), &vec![0u32; p]).expect("attributes"),
            values: DeviceBuffer::from_host(stream(), &[1u32]).expect("values"),
        };
        assert!(matches!(
            ColumnScan::from_columns(device(), p, columns),
            Err(HyperspaceError::Options(_))
        ));
    }
}
