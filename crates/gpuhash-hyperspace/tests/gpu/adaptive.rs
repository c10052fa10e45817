//! The index's own history and population, searches routed by them, regrouping from the
//! history on a call, and adaptive regrouping in the middle of a query stream while other
//! threads search and write.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{
    Model, batch, check_contents, check_searches, index, random_tuples, some_queries, with_keys,
};
use gpuhash_hyperspace::regroup::{RegroupOptions, RegroupPolicy};
use gpuhash_hyperspace::shape::{Field, FieldSet, SpaceShape};
use gpuhash_hyperspace::{
    HyperspaceIndex, HyperspaceOptions, InsertStatus, Matches, Query, Subspaces, Tuple, Tuples,
};
use gpuhash_test_support::{SeededRng, device, shared_memory};

/// Values each attribute takes: few enough that a search on one attribute reads long
/// chains, which a subspace over two of them shortens.
const CARDINALITY: u64 = 40;

fn attrs(list: &[u8]) -> FieldSet {
    FieldSet::of(list.iter().map(|&i| Field::Attribute(i)))
}

/// `count` conjunctions of A0 and A2 (0-based): half the pairs of held tuples, half
/// random values.
fn conjunctions(rng: &mut SeededRng, held: &[Tuple], count: usize) -> Vec<Query> {
    (0..count)
        .map(|i| {
            let (a0, a2) = match held.get(rng.next_u64() as usize % held.len().max(1)) {
                Some(t) if i % 2 == 0 => (t.attributes[0], t.attributes[2]),
                _ => (
                    (rng.next_u64() % CARDINALITY) as u32,
                    (rng.next_u64() % CARDINALITY) as u32,
                ),
            };
            Query::attribute(0, a0).and(Field::Attribute(2), a2)
        })
        .collect()
}

/// `count` searches of one attribute each, attributes in turn.
fn singles(rng: &mut SeededRng, count: usize) -> Vec<Query> {
    (0..count)
        .map(|i| Query::attribute((i % 3) as u8, (rng.next_u64() % CARDINALITY) as u32))
        .collect()
}

/// The position among the subspaces of the one over exactly the attributes `fields` (and
/// the key, with the key spread).
fn subspace_over(shapes: &[SpaceShape], fields: FieldSet) -> Option<usize> {
    let attributes_of = |s: &SpaceShape| FieldSet::from_mask(s.fields().mask() & !Field::Key.bit());
    shapes.iter().position(|s| attributes_of(s) == fields)
}

#[test]
#[ignore = "needs a CUDA device"]
fn searches_fill_the_history_and_writes_the_population() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(41);
    let options = HyperspaceOptions::default().history_half_life(f64::INFINITY);
    let idx = index(3, 20_000, options);
    let mut model = Model::default();
    let mut tuples = random_tuples(&mut rng, 3, 20_000, 1 << 30, CARDINALITY);
    // Attribute 2 of many values, to be estimated rather than counted.
    for v in &mut tuples.attributes[40_000..] {
        *v = (rng.next_u64() % 100_000) as u32;
    }
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    // Inserting them again adds no tuple.
    idx.insert(batch(&tuples)).expect("insert again");
    let population = idx.population();
    assert_eq!(population.tuples, 20_000);
    assert_eq!(population.distinct[0], Some(CARDINALITY));
    assert_eq!(population.distinct[1], Some(CARDINALITY));
    let distinct_a2 = tuples.attributes[40_000..]
        .iter()
        .collect::<HashSet<_>>()
        .len() as f64;
    let estimate = population.distinct[2].expect("a sketch of attribute 2") as f64;
    assert!(
        (estimate / distinct_a2 - 1.0).abs() < 0.1,
        "{estimate} for {distinct_a2}"
    );
    assert_eq!(population.distinct[3], None);

    // Searches count per query; gets and refused batches do not.
    assert_eq!(idx.query_history().recorded(), 0);
    let held: Vec<Tuple> = model.tuples.values().cloned().collect();
    let mut queries = singles(&mut rng, 6);
    queries.extend(conjunctions(&mut rng, &held, 4));
    queries.push(Query::new(Field::Key, held[0].key));
    queries.push(Query::new(Field::Key, held[1].key).and(Field::Attribute(1), 3));
    check_searches(&idx, &model, &queries, "recorded searches");
    idx.get(&tuples.keys[..100]).expect("a get");
    assert!(idx.search(&[Query::attribute(3, 1)]).is_err());
    let history = idx.query_history();
    assert_eq!(history.recorded(), 12);
    assert_eq!(history.frequency(attrs(&[0])), 2.0);
    assert_eq!(history.frequency(attrs(&[2])), 2.0);
    assert_eq!(history.frequency(attrs(&[0, 2])), 4.0);
    assert_eq!(history.frequency(FieldSet::of([Field::Key])), 1.0);
    let key_and_a1 = FieldSet::of([Field::Key, Field::Attribute(1)]);
    assert_eq!(history.frequency(key_and_a1), 1.0);
    let stream = gpuhash_test_support::stream();
    idx.search_on(stream, &queries[..3])
        .expect("a search on a stream");
    assert_eq!(idx.query_history().recorded(), 15);

    // Routing: the key index for the key, an attribute's own subspace for it alone.
    assert_eq!(idx.best_space(FieldSet::of([Field::Key])), 0);
    assert_eq!(idx.best_space(key_and_a1), 0);
    for a in 0..3u8 {
        assert_eq!(idx.best_space(attrs(&[a])), usize::from(a) + 1);
    }

    // Deletes count each key found once; modifies add no tuple.
    let mut gone: Vec<u32> = tuples.keys[..3000].to_vec();
    gone.extend_from_slice(&tuples.keys[..500]);
    gone.push(1 << 31);
    let expected = model.delete(&gone);
    assert_eq!(idx.delete(&gone).expect("delete"), {
        let mut answers = expected;
        answers[3000..3500].fill(true);
        answers
    });
    assert_eq!(idx.population().tuples, 17_000);
    let changed = with_keys(&mut rng, 3, tuples.keys[5000..6000].to_vec(), CARDINALITY);
    assert_eq!(
        idx.modify(batch(&changed)).expect("modify"),
        model.modify(&changed)
    );
    assert_eq!(idx.population().tuples, 17_000);
    check_searches(&idx, &model, &queries, "after deletes and modifies");
    check_contents(&idx, &model, &gone, "after deletes and modifies");
    idx.clear().expect("clear");
    assert_eq!(idx.population().tuples, 0);
    assert_eq!(idx.population().distinct[0], None);
    // 15 searches before, 12 more by the check after the deletes.
    assert_eq!(
        idx.query_history().recorded(),
        27,
        "a clear keeps the history"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn regroup_from_history_groups_a_frequent_conjunction() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(42);
    let idx = index(3, 30_000, HyperspaceOptions::default());
    let mut model = Model::default();
    let tuples = random_tuples(&mut rng, 3, 30_000, 1 << 32, CARDINALITY);
    idx.insert(batch(&tuples)).expect("insert");
    model.insert(&tuples);
    assert_eq!(idx.regroup_from_history().expect("nothing searched"), None);
    let broad = some_queries(&mut rng, 3, CARDINALITY, &model);
    check_searches(&idx, &model, &broad, "before");
    let held: Vec<Tuple> = model.tuples.values().cloned().collect();
    for round in 0..40 {
        let queries = conjunctions(&mut rng, &held, 256);
        check_searches(&idx, &model, &queries, &format!("conjunctions {round}"));
    }
    // The index regroups to what the policy chooses from its own history and population.
    let shapes = idx.space_shapes();
    let policy = RegroupPolicy::new(3, RegroupOptions::default())
        .expect("a policy")
        .with_key_spread(idx.options().key_spread);
    let expected = policy
        .choose(&idx.query_history(), &shapes[0], &idx.population())
        .expect("a choice");
    let chosen = idx
        .regroup_from_history()
        .expect("a regroup")
        .expect("new subspaces");
    assert_eq!(chosen, expected);
    let pair = subspace_over(&chosen, attrs(&[0, 2])).expect("A0 and A2 share a subspace");
    let before = shapes;
    let shapes = idx.space_shapes();
    assert_eq!(shapes[0], before[0], "the key index never moves");
    assert_eq!(&shapes[1..], &chosen[..]);
    assert_eq!(idx.options().subspaces, Subspaces::Shapes(chosen.clone()));
    assert_eq!(idx.best_space(attrs(&[0, 2])), pair + 1);
    assert_eq!(idx.population().tuples, 30_000);
    check_searches(&idx, &model, &broad, "after");
    check_searches(&idx, &model, &conjunctions(&mut rng, &held, 512), "after");
    check_contents(&idx, &model, &[], "after");
    // The same history a moment later: nothing to change.
    assert_eq!(idx.regroup_from_history().expect("no regroup"), None);
    // Writes reach the new subspaces.
    let more = random_tuples(&mut rng, 3, 4000, 1 << 32, CARDINALITY);
    assert_eq!(
        idx.insert(batch(&more)).expect("insert"),
        model.insert(&more)
    );
    let gone = &tuples.keys[..5000];
    assert_eq!(idx.delete(gone).expect("delete"), model.delete(gone));
    check_searches(&idx, &model, &broad, "after writes");
    check_contents(&idx, &model, gone, "after writes");
}

/// Checks a batch's matches while other threads write: every match meets its query, and
/// the tuples of `stable` (which no thread changes) are found exactly, each once.
fn check_stable(matches: &Matches, queries: &[Query], stable: &BTreeMap<u32, Tuple>, what: &str) {
    assert_eq!(matches.offsets.len(), queries.len() + 1, "{what}: offsets");
    for (q, query) in queries.iter().enumerate() {
        let got = matches.of(q);
        assert!(
            got.iter().all(|t| query.matches(t)),
            "{what}: query {q} {query:?} has a match that does not match"
        );
        let mut got_stable: Vec<Tuple> = got
            .into_iter()
            .filter(|t| stable.contains_key(&t.key))
            .collect();
        got_stable.sort();
        let expected: Vec<Tuple> = stable
            .values()
            .filter(|t| query.matches(t))
            .cloned()
            .collect();
        assert_eq!(got_stable, expected, "{what}: query {q} {query:?}");
    }
}

/// The tuples of `a`, then those of `b`.
fn concat(a: &Tuples, b: &Tuples) -> Tuples {
    let p = a.attribute_count;
    let (na, nb) = (a.len(), b.len());
    Tuples {
        attribute_count: p,
        keys: [&a.keys[..], &b.keys[..]].concat(),
        attributes: (0..p)
            .flat_map(|c| {
                let left = &a.attributes[c * na..(c + 1) * na];
                let right = &b.attributes[c * nb..(c + 1) * nb];
                left.iter().chain(right).copied()
            })
            .collect(),
        values: [&a.values[..], &b.values[..]].concat(),
    }
}

/// Tuples of odd keys, which the writer changes, inserts and deletes; even keys stay.
fn churn_tuples(rng: &mut SeededRng, keys: Vec<u32>) -> Tuples {
    with_keys(rng, 3, keys, CARDINALITY)
}

/// The writer's rounds until `done`: modifies of held odd keys (attributes and values),
/// inserts of new odd keys, deletes of held ones, each checked; returns what it holds.
fn write_until(
    idx: &HyperspaceIndex,
    mut held: BTreeMap<u32, Tuple>,
    done: &AtomicBool,
) -> BTreeMap<u32, Tuple> {
    let mut rng = SeededRng::new(45);
    let mut next_key = 1u32 << 30 | 1;
    let mut rounds = 0;
    while !done.load(Ordering::SeqCst) || rounds < 3 {
        // Held keys, and one missing (inserted below), answered false.
        let mut keys: Vec<u32> = held.keys().copied().step_by(3).take(800).collect();
        keys.push(next_key);
        let changed = churn_tuples(&mut rng, keys);
        let modified = idx.modify(batch(&changed)).expect("a modify");
        let expected: Vec<bool> = changed.keys.iter().map(|k| held.contains_key(k)).collect();
        assert_eq!(modified, expected);
        for (t, modified) in changed.iter().zip(modified) {
            if modified {
                held.insert(t.key, t);
            }
        }
        let new_keys: Vec<u32> = (0..400).map(|i| next_key + 2 * i).collect();
        next_key += 800;
        let new = churn_tuples(&mut rng, new_keys);
        let inserted = idx.insert(batch(&new)).expect("an insert");
        assert!(inserted.iter().all(|&s| s == InsertStatus::Inserted));
        held.extend(new.iter().map(|t| (t.key, t)));
        let gone: Vec<u32> = held
            .keys()
            .copied()
            .skip(rounds % 5)
            .step_by(7)
            .take(400)
            .collect();
        let deleted = idx.delete(&gone).expect("a delete");
        assert!(deleted.iter().all(|&d| d));
        gone.iter().for_each(|k| {
            held.remove(k);
        });
        rounds += 1;
    }
    held
}

#[test]
#[ignore = "needs a CUDA device"]
fn adaptive_regroups_mid_stream_lose_and_duplicate_nothing() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(43);
    let stable_keys: Vec<u32> = (0..16_000u32).map(|k| 2 * k).collect();
    let churn_keys: Vec<u32> = (0..4000u32).map(|k| 2 * k + 1).collect();
    let stable_tuples = with_keys(&mut rng, 3, stable_keys, CARDINALITY);
    let churn = churn_tuples(&mut rng, churn_keys);
    let stable: BTreeMap<u32, Tuple> = stable_tuples.iter().map(|t| (t.key, t)).collect();
    let all = concat(&stable_tuples, &churn);
    let regrouping = RegroupOptions {
        check_every: 2048,
        ..RegroupOptions::default()
    };
    let options = HyperspaceOptions::default()
        .adaptive(regrouping)
        .history_half_life(2048.0);
    let idx = HyperspaceIndex::build(device(), 3, batch(&all), options).expect("a build");
    let before = idx.space_shapes();
    let held_stable: Vec<Tuple> = stable.values().cloned().collect();
    let done = AtomicBool::new(false);
    let churned = std::thread::scope(|scope| {
        let (idx, stable, done, held_stable) = (&idx, &stable, &done, &held_stable);
        let writer = scope.spawn(move || {
            let held: BTreeMap<u32, Tuple> = churn.iter().map(|t| (t.key, t)).collect();
            write_until(idx, held, done)
        });
        let searcher = scope.spawn(move || {
            let mut rng = SeededRng::new(44);
            let mut rounds = 0;
            while !done.load(Ordering::SeqCst) || rounds < 3 {
                let mut queries = conjunctions(&mut rng, held_stable, 64);
                for _ in 0..64 {
                    let t = &held_stable[rng.next_u64() as usize % held_stable.len()];
                    queries.push(Query::new(Field::Key, t.key));
                }
                let matches = idx.search(&queries).expect("a search");
                check_stable(&matches, &queries, stable, &format!("searcher {rounds}"));
                rounds += 1;
            }
        });
        // The stream: searches of one attribute, then of A0 and A2 together, until the
        // index has regrouped by itself and for 8 batches after.
        let mut after_regroup = None;
        for round in 0..400 {
            let queries = if round < 16 {
                singles(&mut rng, 256)
            } else {
                conjunctions(&mut rng, held_stable, 256)
            };
            let matches = idx.search(&queries).expect("a search");
            check_stable(&matches, &queries, stable, &format!("stream {round}"));
            let shapes = idx.space_shapes();
            if after_regroup.is_none() && subspace_over(&shapes[1..], attrs(&[0, 2])).is_some() {
                after_regroup = Some(round);
            }
            if after_regroup.is_some_and(|at| round >= at + 8) {
                break;
            }
        }
        done.store(true, Ordering::SeqCst);
        searcher.join().expect("the searcher's checks");
        let churned = writer.join().expect("the writer's checks");
        assert!(
            after_regroup.is_some(),
            "no regroup to A0 and A2: {:?}, {:?}",
            idx.space_shapes(),
            idx.adaptive_report()
        );
        churned
    });
    let report = idx.adaptive_report();
    assert!(report.regroups >= 1 && report.failures == 0, "{report:?}");
    assert!(report.checks >= report.regroups);
    assert_ne!(idx.space_shapes(), before);
    assert_eq!(
        idx.space_shapes()[0],
        before[0],
        "the key index never moves"
    );
    // Nothing lost or duplicated: the index holds the stable tuples and the writer's.
    let mut model = Model::default();
    model.tuples.extend(stable);
    model.tuples.extend(churned);
    let mut exported: Vec<Tuple> = idx.export().expect("export").iter().collect();
    exported.sort();
    let expected: Vec<Tuple> = model.tuples.values().cloned().collect();
    assert_eq!(exported, expected);
    check_contents(&idx, &model, &[1 << 31 | 1], "after the stream");
    let queries = some_queries(&mut rng, 3, CARDINALITY, &model);
    check_searches(&idx, &model, &queries, "after the stream");
    let held: Vec<Tuple> = model.tuples.values().cloned().collect();
    check_searches(
        &idx,
        &model,
        &conjunctions(&mut rng, &held, 256),
        "after the stream",
    );
}
