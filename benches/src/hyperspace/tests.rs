//! The CPU index against a model (a Vec of tuples scanned), and the generator's promises.

use std::collections::HashSet;

use gpuhash_hyperspace::cost::{Population, space_for, spread_key, total_bits};
use gpuhash_hyperspace::history::QueryHistory;
use gpuhash_hyperspace::regroup::{RegroupOptions, RegroupPolicy};
use gpuhash_hyperspace::shape::{Field, FieldSet, SpaceShape};

use super::cpu_index::{CpuHyperspace, CpuIndexError, EMPTY, REMOVED, Tuples};
use super::cpu_search::{Matches, QueryBatch};
use super::workload::{self, Skew, Spec};

const A0: Field = Field::Attribute(0);
const A1: Field = Field::Attribute(1);
const A2: Field = Field::Attribute(2);

/// Rows (key, attributes, value) of `tuples`.
fn rows(tuples: &Tuples, p: usize) -> Vec<Vec<u32>> {
    (0..tuples.len()).map(|t| tuples.row(p, t)).collect()
}

/// Each query's matching rows, sorted, as the index answers them.
fn answered(matches: &Matches, p: usize) -> Vec<Vec<Vec<u32>>> {
    let all = rows(&matches.tuples, p);
    assert_eq!(matches.offsets.len(), matches.counts.len() + 1);
    (0..matches.counts.len())
        .map(|i| {
            let (start, end) = (matches.offsets[i] as usize, matches.offsets[i + 1] as usize);
            assert_eq!(end - start, matches.counts[i] as usize);
            let mut row = all[start..end].to_vec();
            row.sort_unstable();
            row
        })
        .collect()
}

/// Each query's matching rows, sorted, by scanning the model.
fn scanned(model: &[Vec<u32>], batch: &QueryBatch) -> Vec<Vec<Vec<u32>>> {
    let column = |f: Field| match f {
        Field::Key => 0,
        Field::Attribute(i) => usize::from(i) + 1,
    };
    (0..batch.len())
        .map(|i| {
            let mut hits: Vec<Vec<u32>> = model
                .iter()
                .filter(|row| {
                    batch
                        .fields
                        .iter()
                        .enumerate()
                        .all(|(j, &f)| row[column(f)] == batch.value(j, i))
                })
                .cloned()
                .collect();
            hits.sort_unstable();
            hits
        })
        .collect()
}

/// The key index and subspaces over `groups`, sized for chains of about 3 nodes.
fn spaces(n: usize, groups: &[&[Field]]) -> (SpaceShape, Vec<SpaceShape>) {
    let population = Population::uniform(n as u64);
    let key = space_for(&[Field::Key], &population, 3.0).unwrap();
    let subspaces = groups
        .iter()
        .map(|g| space_for(g, &population, 3.0).unwrap())
        .collect();
    (key, subspaces)
}

/// As [`spaces`], or with `spread`, subspaces whose attributes of `cardinality` values
/// take the bits those can use and the key the rest, as a last dimension.
fn spread_spaces(
    n: usize,
    groups: &[&[Field]],
    cardinality: u32,
    spread: bool,
) -> (SpaceShape, Vec<SpaceShape>) {
    let (key, subspaces) = spaces(n, groups);
    if !spread {
        return (key, subspaces);
    }
    let population = Population::with_distinct(n as u64, &[u64::from(cardinality); 8]);
    let total = total_bits(&population, 3.0).unwrap();
    let spread = groups
        .iter()
        .map(|g| spread_key(space_for(g, &population, 3.0).unwrap(), total))
        .collect();
    (key, spread)
}

fn spec(tuples: usize, attributes: usize, cardinality: u32, skew: Skew) -> Spec {
    Spec {
        tuples,
        attributes,
        cardinality,
        skew,
        seed: 17,
    }
}

/// Searches of every kind over `data`: hits and misses by key, each attribute, pairs and
/// a key with an attribute.
fn batches(data: &Tuples, p: usize) -> Vec<QueryBatch> {
    let mut out = vec![workload::queries(data, &[Field::Key], 300, 1)];
    out.push(QueryBatch {
        fields: vec![Field::Key],
        values: vec![EMPTY, REMOVED, 12345, 0],
    });
    for a in 0..p as u8 {
        out.push(workload::queries(
            data,
            &[Field::Attribute(a)],
            40,
            2 + u64::from(a),
        ));
    }
    out.push(QueryBatch {
        fields: vec![A0],
        values: vec![0xdead_beef, 7],
    });
    if p >= 2 {
        out.push(workload::queries(data, &[A1, A0], 40, 20));
        // Pairs of values each held, rarely together.
        let mut crossed = workload::queries(data, &[A0, A1], 40, 21);
        crossed.values[..40].rotate_left(1);
        out.push(crossed);
    }
    if p >= 3 {
        out.push(workload::queries(data, &[A0, A2], 40, 22));
        out.push(workload::queries(data, &[A2, A1, A0], 40, 23));
    }
    out.push(workload::queries(data, &[A0, Field::Key], 40, 24));
    out
}

fn check_searches(index: &CpuHyperspace, model: &[Vec<u32>], data: &Tuples) {
    let p = index.attributes();
    for batch in batches(data, p) {
        let matches = index.search(&batch).unwrap();
        assert_eq!(
            answered(&matches, p),
            scanned(model, &batch),
            "{:?}",
            batch.fields
        );
    }
}

#[test]
fn searches_match_a_scan_on_random_and_skewed_data() {
    let layouts: [&[&[Field]]; 3] = [&[&[A0]], &[&[A0], &[A1], &[A2]], &[&[A0, A2], &[A1]]];
    for (layout, p) in layouts.into_iter().zip([1, 3, 3]) {
        let cases = [Skew::Uniform, Skew::Zipf]
            .into_iter()
            .flat_map(|skew| [(skew, false), (skew, true)]);
        for (skew, spread) in cases {
            for cardinality in [3, 1000] {
                let spec = spec(4000, p, cardinality, skew);
                let data = workload::tuples(&spec, 3);
                let (key, subspaces) = spread_spaces(data.len(), layout, cardinality, spread);
                let spread_keys = subspaces.iter().any(|s| s.fields().contains(Field::Key));
                assert_eq!(spread_keys, spread && cardinality == 3, "{subspaces:?}");
                let population = Population::with_distinct(0, &[u64::from(cardinality); 8]);
                let index = CpuHyperspace::build(p, &data, key, subspaces, population, 3).unwrap();
                assert_eq!(index.len(), 4000);
                check_searches(&index, &rows(&data, p), &data);
            }
        }
    }
}

#[test]
fn answers_do_not_depend_on_the_thread_count() {
    let data = workload::tuples(&spec(3000, 3, 50, Skew::Zipf), 2);
    let build = |threads| {
        let (key, subspaces) = spaces(3000, &[&[A0, A1], &[A2]]);
        CpuHyperspace::build(3, &data, key, subspaces, Population::uniform(0), threads).unwrap()
    };
    let (one, five) = (build(1), build(5));
    for batch in batches(&data, 3) {
        let (a, b) = (one.search(&batch).unwrap(), five.search(&batch).unwrap());
        assert_eq!(a.counts, b.counts);
        assert_eq!(answered(&a, 3), answered(&b, 3));
    }
    assert_eq!(
        workload::tuples(&spec(3000, 3, 50, Skew::Zipf), 1),
        workload::tuples(&spec(3000, 3, 50, Skew::Zipf), 4)
    );
}

#[test]
fn modifies_and_deletes_match_the_model() {
    let cases = [Skew::Uniform, Skew::Zipf]
        .into_iter()
        .flat_map(|skew| [(skew, false), (skew, true)]);
    for (skew, spread) in cases {
        let p = 3;
        let spec = spec(5000, p, 20, skew);
        let data = workload::tuples(&spec, 2);
        let (key, subspaces) = spread_spaces(data.len(), &[&[A0], &[A1, A2]], 20, spread);
        // 20 values fill 5 bits of the 6 a space of 5000 tuples gets: 1 left to the key
        // beside A0 alone, 0 beside A1 and A2.
        let expected_keys = if spread {
            vec![true, false]
        } else {
            vec![false, false]
        };
        let keyed: Vec<bool> = subspaces
            .iter()
            .map(|s| s.fields().contains(Field::Key))
            .collect();
        assert_eq!(keyed, expected_keys, "{subspaces:?}");
        let mut index =
            CpuHyperspace::build(p, &data, key, subspaces, Population::uniform(0), 4).unwrap();
        let mut model = rows(&data, p);
        for round in 0..3u64 {
            let change = workload::modifies(&spec, &data, 700, 40 + round);
            let mut keys = change.keys.clone();
            keys.push(0xabad_cafe); // not held
            let mut attributes = Vec::new();
            for a in 0..p {
                attributes.extend_from_slice(&change.attributes[a * 700..(a + 1) * 700]);
                attributes.push(1);
            }
            let mut values = change.values.clone();
            values.push(2);
            let found = index.modify(&keys, &attributes, &values).unwrap();
            for (i, &key) in keys.iter().enumerate() {
                let row = model.iter_mut().find(|r| r[0] == key);
                assert_eq!(found[i], row.is_some());
                if let Some(row) = row {
                    for a in 0..p {
                        row[a + 1] = attributes[a * keys.len() + i];
                    }
                    row[p + 1] = values[i];
                }
            }
            check_searches(&index, &model, &data);
        }
        let mut gone = workload::deletes(&data, 900, 50);
        gone.push(gone[0]);
        gone.push(0xabad_cafe);
        let deleted = index.delete(&gone);
        assert_eq!(deleted.iter().filter(|&&d| d).count(), 900);
        assert!(!deleted[900] && !deleted[901]);
        model.retain(|r| !gone.contains(&r[0]));
        assert_eq!(index.len(), model.len());
        check_searches(&index, &model, &data);
        let mut held = rows(&index.tuples(), p);
        held.sort_unstable();
        model.sort_unstable();
        assert_eq!(held, model);
    }
}

#[test]
fn regroup_keeps_every_tuple_once() {
    let data = workload::tuples(&spec(4000, 4, 30, Skew::Zipf), 2);
    let (key, subspaces) = spaces(4000, &[&[A0], &[A1], &[A2], &[Field::Attribute(3)]]);
    let mut index =
        CpuHyperspace::build(4, &data, key, subspaces, Population::uniform(0), 3).unwrap();
    let change = workload::modifies(&spec(4000, 4, 30, Skew::Zipf), &data, 500, 3);
    index
        .modify(&change.keys, &change.attributes, &change.values)
        .unwrap();
    index.delete(&workload::deletes(&data, 300, 4));
    let mut model = rows(&index.tuples(), 4);
    let (_, regrouped) = spaces(4000, &[&[A0, A2], &[A1, Field::Attribute(3)]]);
    let memory = index.memory();
    index.regroup(regrouped.clone()).unwrap();
    // Two subspaces instead of four, each about as large: about 3/5 of the memory.
    let ratio = index.memory() as f64 / memory as f64;
    assert!((0.5..0.7).contains(&ratio), "{ratio}");
    assert_eq!(index.shapes()[1..], regrouped[..]);
    let mut held = rows(&index.tuples(), 4);
    held.sort_unstable();
    model.sort_unstable();
    assert_eq!(held, model);
    check_searches(&index, &model, &data);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let data = workload::tuples(&spec(500, 2, 10, Skew::Uniform), 1);
    let (key, subspaces) = spaces(500, &[&[A0], &[A1]]);
    let build = |tuples: &Tuples, p: usize, subspaces: Vec<SpaceShape>| {
        CpuHyperspace::build(p, tuples, key.clone(), subspaces, Population::uniform(0), 2)
    };
    for reserved in [EMPTY, REMOVED] {
        let mut bad = data.clone();
        bad.keys[7] = reserved;
        assert_eq!(
            build(&bad, 2, subspaces.clone()).unwrap_err(),
            CpuIndexError::ReservedKey(reserved)
        );
    }
    let mut twice = data.clone();
    twice.keys[9] = twice.keys[400];
    assert_eq!(
        build(&twice, 2, subspaces.clone()).unwrap_err(),
        CpuIndexError::DuplicateKey(twice.keys[9])
    );
    assert!(matches!(
        build(&data, 3, subspaces.clone()),
        Err(CpuIndexError::LengthMismatch { .. })
    ));
    assert_eq!(
        build(&data, 0, subspaces.clone()).unwrap_err(),
        CpuIndexError::AttributeCount(0)
    );
    let (_, keyed) = spaces(500, &[&[Field::Key, A0]]);
    assert_eq!(
        build(&data, 2, keyed).unwrap_err(),
        CpuIndexError::BadSpaces
    );
    let (_, too_far) = spaces(500, &[&[A2]]);
    assert_eq!(
        build(&data, 2, too_far.clone()).unwrap_err(),
        CpuIndexError::BadSpaces
    );

    let mut index = build(&data, 2, subspaces).unwrap();
    let before = {
        let mut held = rows(&index.tuples(), 2);
        held.sort_unstable();
        held
    };
    assert_eq!(
        index.regroup(too_far).unwrap_err(),
        CpuIndexError::BadSpaces
    );
    for fields in [vec![], vec![A0, A0], vec![A2]] {
        let batch = QueryBatch {
            fields: fields.clone(),
            values: vec![1; fields.len()],
        };
        assert_eq!(
            index.search(&batch).unwrap_err(),
            CpuIndexError::BadFields(fields)
        );
    }
    let ragged = QueryBatch {
        fields: vec![A0, A1],
        values: vec![1, 2, 3],
    };
    assert!(matches!(
        index.search(&ragged),
        Err(CpuIndexError::LengthMismatch { .. })
    ));
    let keys = [data.keys[0], data.keys[1], data.keys[0]];
    assert_eq!(
        index.modify(&keys, &[5; 6], &[6; 3]).unwrap_err(),
        CpuIndexError::DuplicateKey(data.keys[0])
    );
    assert!(matches!(
        index.modify(&keys[..2], &[5; 3], &[6; 2]),
        Err(CpuIndexError::LengthMismatch { .. })
    ));
    let mut after = rows(&index.tuples(), 2);
    after.sort_unstable();
    assert_eq!(after, before);
    let empty = QueryBatch {
        fields: vec![A0],
        values: vec![],
    };
    assert_eq!(
        index.search(&empty).unwrap(),
        Matches {
            offsets: vec![0],
            ..Matches::default()
        }
    );
}

#[test]
fn generated_tuples_keep_their_promises() {
    let uniform = workload::tuples(&spec(50_000, 2, 100, Skew::Uniform), 2);
    let keys: HashSet<u32> = uniform.keys.iter().copied().collect();
    assert_eq!(keys.len(), 50_000);
    assert!(!keys.contains(&EMPTY) && !keys.contains(&REMOVED));
    assert_eq!(workload::key(0xffff_ffff), workload::key(0xffff_ffff));
    let distinct = |column: &[u32]| column.iter().copied().collect::<HashSet<u32>>().len();
    assert_eq!(distinct(&uniform.attributes[..50_000]), 100);
    assert_eq!(distinct(&uniform.attributes[50_000..]), 100);
    let zipf = workload::tuples(&spec(50_000, 1, 10_000, Skew::Zipf), 2);
    let top = zipf
        .attributes
        .iter()
        .filter(|&&v| v == workload::attribute_value(0))
        .count();
    // About ln 2 / ln 10001 of the draws: 7.5%.
    assert!((3000..4500).contains(&top), "{top}");
    assert!(distinct(&zipf.attributes) <= 10_000);
    // Reserved words never become keys, even where the standard keys hit them.
    for i in 0..(1u32 << 20) {
        assert!(workload::key(i) < REMOVED);
    }
}

#[test]
fn generated_batches_keep_their_promises() {
    let spec = spec(20_000, 3, 100, Skew::Zipf);
    let data = workload::tuples(&spec, 2);
    let change = workload::modifies(&spec, &data, 5000, 9);
    let positions: std::collections::HashMap<u32, usize> =
        data.keys.iter().enumerate().map(|(t, &k)| (k, t)).collect();
    assert_eq!(change.keys.iter().collect::<HashSet<_>>().len(), 5000);
    for (i, key) in change.keys.iter().enumerate() {
        let t = positions[key];
        for a in 0..3 {
            assert_ne!(
                change.attributes[a * 5000 + i],
                data.attributes[a * 20_000 + t]
            );
        }
    }
    // One value only: a modify moves to a word outside the value set.
    let one_value = Spec {
        cardinality: 1,
        ..spec
    };
    let single = workload::modifies(&one_value, &workload::tuples(&one_value, 1), 10, 9);
    assert!(
        single
            .attributes
            .iter()
            .all(|&v| v == !workload::attribute_value(0))
    );
    let gone = workload::deletes(&data, 3000, 5);
    assert_eq!(gone.iter().collect::<HashSet<_>>().len(), 3000);
    let mix = workload::shifting_mix(&data, 3, 6, 100, 1);
    let named: Vec<Vec<Field>> = mix.iter().map(|b| b.fields.clone()).collect();
    assert_eq!(
        named,
        [
            vec![A0],
            vec![A1],
            vec![A0],
            vec![A0, A2],
            vec![A0, A2],
            vec![A0, A2]
        ]
    );
    assert!(mix.iter().all(|b| b.len() == 100));
    let conjunctions = workload::queries(&data, &[A0, A2], 100, 3);
    let model = rows(&data, 3);
    assert!(
        scanned(&model, &conjunctions)
            .iter()
            .all(|hits| !hits.is_empty())
    );
}

#[test]
fn the_shifting_mix_regroups_once_and_answers_alike() {
    // The calling sequence of W6's adaptive part: record each batch's fields, ask the
    // policy after each batch, regroup when it says so.
    let spec = spec(20_000, 4, 100, Skew::Uniform);
    let data = workload::tuples(&spec, 2);
    let population = spec.population();
    let options = RegroupOptions {
        check_every: 1,
        ..RegroupOptions::default()
    };
    let policy = RegroupPolicy::new(4, options).unwrap();
    let key = space_for(&[Field::Key], &population, 1.0).unwrap();
    let start = policy.default_grouping(&population);
    let mut index =
        CpuHyperspace::build(4, &data, key.clone(), start, population.clone(), 2).unwrap();
    let mut history = QueryHistory::new(4, 1000.0).unwrap();
    let model = rows(&data, 4);
    let mut regroups = Vec::new();
    for (b, batch) in workload::shifting_mix(&data, 4, 12, 500, 3)
        .iter()
        .enumerate()
    {
        let matches = index.search(batch).unwrap();
        assert_eq!(answered(&matches, 4), scanned(&model, batch));
        history.record(batch.named(), batch.len() as u64).unwrap();
        let current = index.shapes()[1..].to_vec();
        if let Some(next) = policy
            .advise(&mut history, &key, &current, &population)
            .unwrap()
        {
            index.regroup(next).unwrap();
            regroups.push(b);
        }
    }
    // Singles: each attribute alone is best. Conjunctions: once they outweigh the decayed
    // singles enough, A0 and A2 share a subspace, once.
    assert_eq!(regroups.len(), 1, "{regroups:?}");
    assert!((6..12).contains(&regroups[0]), "{regroups:?}");
    let groups: Vec<_> = index.shapes()[1..].iter().map(SpaceShape::fields).collect();
    assert!(groups.contains(&FieldSet::of([A0, A2])), "{groups:?}");
}

#[test]
fn prefixes_keep_the_first_items_of_every_column() {
    let spec = spec(5000, 3, 100, Skew::Uniform);
    let data = workload::tuples(&spec, 2);
    let batch = workload::queries(&data, &[A0, A2], 100, 4);
    let head = batch.prefix(7);
    assert_eq!((head.len(), head.fields.clone()), (7, batch.fields.clone()));
    for j in 0..2 {
        for i in 0..7 {
            assert_eq!(head.value(j, i), batch.value(j, i));
        }
    }
    assert_eq!(batch.prefix(1000), batch);
    let change = workload::modifies(&spec, &data, 50, 2);
    let first = change.prefix(5);
    assert_eq!(first.keys, change.keys[..5]);
    assert_eq!(first.values, change.values[..5]);
    for a in 0..3 {
        assert_eq!(
            first.attributes[a * 5..a * 5 + 5],
            change.attributes[a * 50..a * 50 + 5]
        );
    }
    assert_eq!(change.prefix(50).attributes, change.attributes);
    // The CPU index answers a prefix as the first rows of the whole batch.
    let (key_index, subspaces) = spaces(5000, &[&[A0], &[A2]]);
    let index = CpuHyperspace::build(3, &data, key_index, subspaces, spec.population(), 2).unwrap();
    let (whole, part) = (index.search(&batch).unwrap(), index.search(&head).unwrap());
    assert_eq!(part.counts, whole.counts[..7]);
}
