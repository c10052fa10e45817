//! `ProbeInPlace::get_each` on DyHash tables, and `ProbeInPlace::get_in_place_each` on their
//! images in mapped pinned memory: the keys of a batch split among many tables, looked up
//! in one launch, held against a `HashMap` model of each table: hits, removed keys, misses
//! and adversarial keys, tables of several sizes, ranges in any order (one of them empty),
//! places outside every range left as they were; tables of two layouts (which go map by
//! map, or image by image); and the errors that write nothing. Run on a GPU machine with
//! `--include-ignored` (see docs/gpu-testing.md).

use std::collections::HashMap;
use std::ops::Range;

use gpuhash_core::hash::fmix64;
use gpuhash_core::image::{Image, NO_ROUTE, PinnedImage, ProbeInPlace, Route, Routed};
use gpuhash_core::table::{ErrorKind, Key, Map, TableError, Value};
use gpuhash_core::{DeviceBuffer, PinnedPool};
use gpuhash_cuckoo::{BucketLayout, CuckooOptions, CuckooTable};
use gpuhash_test_support::{SeededRng, adversarial_keys, device, shared_memory, stream, value_of};

/// What a flag or a value outside the answers holds before the call.
const UNTOUCHED_FLAG: u8 = 7;

/// A table of `capacity` pairs of `layout` holding half as many random keys, every fifth
/// removed again, and its model.
fn filled<K: Key, V: Value>(
    seed: u64,
    capacity: usize,
    layout: BucketLayout,
) -> (CuckooTable<K, V>, HashMap<K, V>) {
    let options = CuckooOptions::with_capacity(capacity)
        .layout(layout)
        .seed(seed);
    let table = CuckooTable::new(device(), options).unwrap();
    let keys: Vec<K> = SeededRng::new(seed).distinct_keys(capacity / 2);
    let values: Vec<V> = keys.iter().map(|k| value_of(k.widen() ^ seed)).collect();
    table.insert(&keys, &values).unwrap();
    let gone: Vec<K> = keys.iter().step_by(5).copied().collect();
    table.remove(&gone).unwrap();
    let mut model: HashMap<K, V> = keys.iter().copied().zip(values).collect();
    for key in &gone {
        model.remove(key);
    }
    (table, model)
}

/// A table's probes: every key it was given (held or removed), as many misses, and, for
/// the first table, the adversarial keys.
fn probes<K: Key>(seed: u64, capacity: usize, first: bool) -> Vec<K> {
    let mut keys: Vec<K> = SeededRng::new(seed).distinct_keys(capacity / 2);
    keys.extend(SeededRng::new(seed + 1000).distinct_keys::<K>(capacity / 2));
    if first {
        keys.extend(adversarial_keys::<K>());
    }
    keys
}

/// Where a batch's tables are looked up: on the device (`get_each`), or their images in
/// mapped pinned memory, read in place (`get_in_place_each`).
#[derive(Clone, Copy, Debug)]
enum Where {
    Device,
    InPlace,
}

/// Looks up, in one `get_each` (or `get_in_place_each` of the tables' images), each table's
/// probes in its own range of one batch (the ranges in the reverse of the tables' order, a
/// gap of untouched places between each, one range empty), with values or without, and
/// checks every place against the models.
fn each_matches_the_models<K: Key, V: Value>(layouts: &[BucketLayout], at: Where) {
    let _memory = shared_memory();
    let capacities = [1usize << 10, 1 << 14, 1 << 12, 1 << 16, 1 << 11, 1 << 13];
    let tables: Vec<(CuckooTable<K, V>, HashMap<K, V>)> = capacities
        .iter()
        .enumerate()
        .map(|(i, &capacity)| filled(i as u64 + 1, capacity, layouts[i % layouts.len()]))
        .collect();
    let mut batch: Vec<K> = Vec::new();
    let mut ranges: Vec<Range<usize>> = vec![0..0; tables.len()];
    for (i, &capacity) in capacities.iter().enumerate().rev() {
        batch.extend(SeededRng::new(77 + i as u64).distinct_keys::<K>(3));
        let keys: Vec<K> = match i {
            2 => Vec::new(),
            _ => probes(i as u64 + 1, capacity, i == 0),
        };
        ranges[i] = batch.len()..batch.len() + keys.len();
        batch.extend(keys);
    }
    let untouched: V = value_of(0xdead_beef);
    let s = stream();
    let pool = PinnedPool::new_mapped(device(), None);
    let images: Vec<PinnedImage> = match at {
        Where::Device => Vec::new(),
        Where::InPlace => tables
            .iter()
            .map(|(table, _)| table.to_pinned_image(&pool).unwrap())
            .collect(),
    };
    let keys = DeviceBuffer::from_host(s, &batch).unwrap();
    for with_values in [true, false] {
        let mut found = DeviceBuffer::from_host(s, &vec![UNTOUCHED_FLAG; batch.len()]).unwrap();
        let mut values = DeviceBuffer::from_host(s, &vec![untouched; batch.len()]).unwrap();
        let answers = with_values.then_some(&mut values);
        match at {
            Where::Device => {
                let maps: Vec<(&CuckooTable<K, V>, Range<usize>)> = tables
                    .iter()
                    .zip(&ranges)
                    .map(|((table, _), range)| (table, range.clone()))
                    .collect();
                CuckooTable::<K, V>::get_each(s, &maps, &keys, &mut found, answers).unwrap();
            }
            Where::InPlace => {
                let parts: Vec<(&PinnedImage, Range<usize>)> =
                    images.iter().zip(ranges.iter().cloned()).collect();
                CuckooTable::<K, V>::get_in_place_each(s, &parts, &keys, &mut found, answers)
                    .unwrap();
            }
        }
        let found = found.to_host(s).unwrap();
        let values = values.to_host(s).unwrap();
        let mut expected_found = vec![UNTOUCHED_FLAG; batch.len()];
        let mut expected_values = vec![untouched; batch.len()];
        for ((_, model), range) in tables.iter().zip(&ranges) {
            for at in range.clone() {
                let held = model.get(&batch[at]);
                expected_found[at] = u8::from(held.is_some());
                if let (Some(&value), true) = (held, with_values) {
                    expected_values[at] = value;
                }
            }
        }
        for at in 0..batch.len() {
            let key = batch[at];
            assert_eq!(found[at], expected_found[at], "found, key {key:?} at {at}");
            assert_eq!(
                values[at], expected_values[at],
                "value, key {key:?} at {at}"
            );
        }
    }
}

/// Every width and layout, on the device and read in place.
#[test]
#[ignore = "needs a CUDA device"]
fn each_matches_the_models_u32_u32_packed() {
    for at in [Where::Device, Where::InPlace] {
        each_matches_the_models::<u32, u32>(&[BucketLayout::Auto], at);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn each_matches_the_models_u32_u32_split() {
    for at in [Where::Device, Where::InPlace] {
        each_matches_the_models::<u32, u32>(&[BucketLayout::Split], at);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn each_matches_the_models_u64_u64() {
    for at in [Where::Device, Where::InPlace] {
        each_matches_the_models::<u64, u64>(&[BucketLayout::Auto], at);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn each_matches_the_models_u32_u64() {
    for at in [Where::Device, Where::InPlace] {
        each_matches_the_models::<u32, u64>(&[BucketLayout::Auto], at);
    }
}

/// Tables of two layouts look their keys up map by map (image by image), with the same
/// answers.
#[test]
#[ignore = "needs a CUDA device"]
fn tables_of_two_layouts_match_the_models() {
    for at in [Where::Device, Where::InPlace] {
        each_matches_the_models::<u32, u32>(&[BucketLayout::Auto, BucketLayout::Split], at);
    }
}

/// A map (or image) listed twice, a range past the buffers, and an image that is not
/// mapped are errors that write nothing.
#[test]
#[ignore = "needs a CUDA device"]
fn bad_calls_are_errors_that_write_nothing() {
    let _memory = shared_memory();
    let (table, _) = filled::<u32, u32>(9, 1 << 10, BucketLayout::Auto);
    let (other, _) = filled::<u32, u32>(10, 1 << 10, BucketLayout::Auto);
    let s = stream();
    let keys = DeviceBuffer::from_host(s, &[1u32, 2, 3, 4]).unwrap();
    let mut found = DeviceBuffer::from_host(s, &[UNTOUCHED_FLAG; 4]).unwrap();
    #[allow(
        clippy::reversed_empty_ranges,
        reason = "a reversed range is the bad input"
    )]
    let calls = [
        vec![(&table, 0..2), (&table, 2..4)],
        vec![(&table, 0..2), (&other, 2..5)],
        vec![(&other, 3..2)],
    ];
    for maps in calls {
        let refused = CuckooTable::get_each(s, &maps, &keys, &mut found, None).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
        assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);
    }
    // Values shorter than the ranges.
    let mut short = DeviceBuffer::<u32>::zeroed(s, 3).unwrap();
    let maps = [(&table, 0..4)];
    let refused = CuckooTable::get_each(s, &maps, &keys, &mut found, Some(&mut short));
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);

    // The same calls on the tables' images, and an image of a pool that is not mapped.
    let mapped = PinnedPool::new_mapped(device(), None);
    let image = table.to_pinned_image(&mapped).unwrap();
    let other_image = other.to_pinned_image(&mapped).unwrap();
    let unmapped = table
        .to_pinned_image(&PinnedPool::new(device(), None))
        .unwrap();
    #[allow(
        clippy::reversed_empty_ranges,
        reason = "a reversed range is the bad input"
    )]
    let calls = [
        vec![(&image, 0..2), (&image, 2..4)],
        vec![(&image, 0..2), (&other_image, 2..5)],
        vec![(&other_image, 3..2)],
        vec![(&image, 0..2), (&unmapped, 2..4)],
    ];
    for images in calls {
        let refused =
            CuckooTable::<u32, u32>::get_in_place_each(s, &images, &keys, &mut found, None)
                .unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
        assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);
    }
    let images = [(&image, 0..4)];
    let refused =
        CuckooTable::<u32, u32>::get_in_place_each(s, &images, &keys, &mut found, Some(&mut short));
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);
}

/// Looks up, in one `get_routed`, a batch of every table's probes mixed together (each key
/// routed to its table; a tenth routed nowhere, whose places must stay untouched), the
/// even tables on the device and the odd ones read in place from their images, over a
/// range that leaves places at both ends untouched; with values and without. Every place
/// is checked against the models.
fn routed_matches_the_models<K: Key, V: Value>(layout: BucketLayout) {
    let _memory = shared_memory();
    let capacities = [1usize << 10, 1 << 14, 1 << 12, 1 << 16, 1 << 11];
    let tables: Vec<(CuckooTable<K, V>, HashMap<K, V>)> = capacities
        .iter()
        .enumerate()
        .map(|(i, &capacity)| filled(i as u64 + 1, capacity, layout))
        .collect();
    let pool = PinnedPool::new_mapped(device(), None);
    let images: Vec<PinnedImage> = tables
        .iter()
        .map(|(table, _)| table.to_pinned_image(&pool).unwrap())
        .collect();
    let routes: Vec<Route<'_, CuckooTable<K, V>>> = tables
        .iter()
        .zip(&images)
        .enumerate()
        .map(|(i, ((table, _), image))| match i % 2 {
            0 => Route::Device(table),
            _ => Route::InPlace(image),
        })
        .collect();
    let mut routed: Vec<(K, u32)> = Vec::new();
    for (i, &capacity) in capacities.iter().enumerate() {
        let mut keys = probes::<K>(i as u64 + 1, capacity, i == 0);
        keys.extend(adversarial_keys::<K>());
        routed.extend(keys.into_iter().map(|key| (key, i as u32)));
    }
    routed.sort_by_key(|&(key, route)| fmix64(key.widen() ^ u64::from(route)));
    for (at, entry) in routed.iter_mut().enumerate() {
        if at % 10 == 3 {
            entry.1 = NO_ROUTE;
        }
    }
    // Places before and after the range that the call must not write.
    let margin = 5;
    let filler: Vec<K> = SeededRng::new(99).distinct_keys(margin);
    let batch: Vec<K> = filler
        .iter()
        .copied()
        .chain(routed.iter().map(|&(key, _)| key))
        .chain(filler.iter().copied())
        .collect();
    let range = margin..margin + routed.len();
    let route_list: Vec<u32> = routed.iter().map(|&(_, route)| route).collect();
    let untouched: V = value_of(0xdead_beef);
    let s = stream();
    let keys = DeviceBuffer::from_host(s, &batch).unwrap();
    let route_of = DeviceBuffer::from_host(s, &route_list).unwrap();
    for with_values in [true, false] {
        let mut found = DeviceBuffer::from_host(s, &vec![UNTOUCHED_FLAG; batch.len()]).unwrap();
        let mut values = DeviceBuffer::from_host(s, &vec![untouched; batch.len()]).unwrap();
        let call = Routed {
            keys: &keys,
            range: range.clone(),
            route_of: &route_of,
        };
        let answers = with_values.then_some(&mut values);
        CuckooTable::<K, V>::get_routed(s, &routes, call, &mut found, answers).unwrap();
        let found = found.to_host(s).unwrap();
        let values = values.to_host(s).unwrap();
        for at in 0..batch.len() {
            let key = batch[at];
            let held = match range.contains(&at) {
                false => {
                    assert_eq!(found[at], UNTOUCHED_FLAG, "outside the range, at {at}");
                    assert_eq!(values[at], untouched, "outside the range, at {at}");
                    continue;
                }
                true => match route_list[at - margin] {
                    NO_ROUTE => {
                        assert_eq!(found[at], UNTOUCHED_FLAG, "left out, at {at}");
                        assert_eq!(values[at], untouched, "left out, at {at}");
                        continue;
                    }
                    route => tables[route as usize].1.get(&key).copied(),
                },
            };
            assert_eq!(
                found[at],
                u8::from(held.is_some()),
                "found, key {key:?} at {at}"
            );
            let expected = held.filter(|_| with_values).unwrap_or(untouched);
            assert_eq!(values[at], expected, "value, key {key:?} at {at}");
        }
    }
}

/// Every width and layout.
#[test]
#[ignore = "needs a CUDA device"]
fn routed_matches_the_models_every_width() {
    routed_matches_the_models::<u32, u32>(BucketLayout::Auto);
    routed_matches_the_models::<u32, u32>(BucketLayout::Split);
    routed_matches_the_models::<u64, u64>(BucketLayout::Auto);
    routed_matches_the_models::<u32, u64>(BucketLayout::Auto);
}

/// A table listed twice, buffers that do not hold the range, too few routes, tables of two
/// layouts and an image that is not mapped are errors that write nothing; an image may
/// serve two routes; with no routes at all, nothing is written.
#[test]
#[ignore = "needs a CUDA device"]
fn bad_routed_calls_are_errors_that_write_nothing() {
    let _memory = shared_memory();
    let (table, _) = filled::<u32, u32>(9, 1 << 10, BucketLayout::Auto);
    let (split, _) = filled::<u32, u32>(10, 1 << 10, BucketLayout::Split);
    let s = stream();
    let mapped = PinnedPool::new_mapped(device(), None);
    let image = table.to_pinned_image(&mapped).unwrap();
    let unmapped = table
        .to_pinned_image(&PinnedPool::new(device(), None))
        .unwrap();
    let keys = DeviceBuffer::from_host(s, &[1u32, 2, 3, 4]).unwrap();
    let route_of = DeviceBuffer::from_host(s, &[0u32, 1, 0, 1]).unwrap();
    let mut found = DeviceBuffer::from_host(s, &[UNTOUCHED_FLAG; 4]).unwrap();
    let call = |range: std::ops::Range<usize>| Routed {
        keys: &keys,
        range,
        route_of: &route_of,
    };
    let bad_routes = [
        vec![Route::Device(&table), Route::Device(&table)],
        vec![Route::Device(&table), Route::Device(&split)],
        vec![Route::Device(&table), Route::InPlace(&unmapped)],
    ];
    for routes in &bad_routes {
        let refused = CuckooTable::get_routed(s, routes, call(0..4), &mut found, None).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
        assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);
    }
    let routes = [Route::Device(&table), Route::InPlace(&image)];
    let mut short = DeviceBuffer::<u32>::zeroed(s, 3).unwrap();
    let few_routes = DeviceBuffer::from_host(s, &[0u32, 1]).unwrap();
    let refused = [
        CuckooTable::get_routed(s, &routes, call(0..5), &mut found, None),
        CuckooTable::get_routed(s, &routes, call(0..4), &mut found, Some(&mut short)),
        CuckooTable::get_routed(
            s,
            &routes,
            Routed {
                keys: &keys,
                range: 1..4,
                route_of: &few_routes,
            },
            &mut found,
            None,
        ),
    ];
    for outcome in refused {
        assert_eq!(outcome.unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);
    }
    let twice = [Route::InPlace(&image), Route::InPlace(&image)];
    CuckooTable::<u32, u32>::get_routed(s, &twice, call(0..4), &mut found, None).unwrap();
    let expected = table.contains(&[1, 2, 3, 4]).unwrap();
    let expected: Vec<u8> = expected.into_iter().map(u8::from).collect();
    assert_eq!(found.to_host(s).unwrap(), expected);
    found.copy_from_host(s, &[UNTOUCHED_FLAG; 4]).unwrap();
    CuckooTable::<u32, u32>::get_routed(s, &[], call(1..3), &mut found, None).unwrap();
    assert_eq!(found.to_host(s).unwrap(), vec![UNTOUCHED_FLAG; 4]);
}
