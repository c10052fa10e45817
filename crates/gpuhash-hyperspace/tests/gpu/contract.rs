//! The key index through the table contract: the contract's conformance suite on
//! [`KeyIndexMap`], and the same tuples seen by key through the map and by attribute
//! through its index.

use gpuhash_core::table::{Map, Table};
use gpuhash_hyperspace::shape::Field;
use gpuhash_hyperspace::{KeyIndexMap, Query};
use gpuhash_test_support::{device, map_conformance, shared_memory};

#[test]
#[ignore = "needs a CUDA device"]
fn the_key_index_map_conforms() {
    map_conformance(KeyIndexMap::<2>::with_capacity);
    map_conformance(KeyIndexMap::<5>::with_capacity);
}

/// Reserved keys live beside the index, repeated keys keep their last copy, and the
/// tuples the map puts in are found by attribute.
#[test]
#[ignore = "needs a CUDA device"]
fn the_map_keeps_reserved_and_repeated_keys_and_its_index_searches_them() {
    let _memory = shared_memory();
    let map = KeyIndexMap::<3>::with_capacity(device(), 1 << 10).expect("a map");
    let keys = [1, u32::MAX, 2, 1, u32::MAX - 1, u32::MAX - 2];
    let values = [
        [10, 20, 100],
        [11, 21, 101],
        [10, 22, 102],
        [10, 23, 103],
        [12, 24, 104],
        [13, 25, 105],
    ];
    map.insert(&keys, &values).expect("an insert");
    assert_eq!(map.len().expect("len"), 5);
    assert_eq!(
        map.get(&[1, 2, u32::MAX, u32::MAX - 1, u32::MAX - 2, 3])
            .expect("a get"),
        vec![
            Some([10, 23, 103]),
            Some([10, 22, 102]),
            Some([11, 21, 101]),
            Some([12, 24, 104]),
            Some([13, 25, 105]),
            None
        ]
    );
    // Upsert: a held key takes its new tuple, moved to another attribute value.
    map.insert(&[2], &[[30, 22, 202]]).expect("an upsert");
    let matches = map
        .index()
        .search(&[
            Query::attribute(0, 10),
            Query::attribute(0, 30).and(Field::Attribute(1), 22),
        ])
        .expect("a search");
    let keys_of = |q| {
        let mut keys: Vec<u32> = matches.of(q).iter().map(|t| t.key).collect();
        keys.sort_unstable();
        keys
    };
    assert_eq!(keys_of(0), vec![1]);
    assert_eq!(keys_of(1), vec![2]);
    assert_eq!(
        map.remove(&[u32::MAX, 1, u32::MAX, 1, 9])
            .expect("a removal"),
        vec![true, true, false, false, false]
    );
    assert_eq!(map.len().expect("len"), 3);
    let mut pairs = map.export().expect("an export");
    pairs.sort();
    assert_eq!(
        pairs,
        vec![
            (2, [30, 22, 202]),
            (u32::MAX - 2, [13, 25, 105]),
            (u32::MAX - 1, [12, 24, 104]),
        ]
    );
    map.clear().expect("a clear");
    assert!(map.is_empty().expect("is_empty"));
}
