//! The regroup policy against a brute-force optimum and the cases it must get right.

use super::*;
use crate::cost::{search_cost, space_for};
use quickcheck::{Arbitrary, Gen, TestResult, quickcheck};

fn attrs(list: &[u8]) -> FieldSet {
    FieldSet::of(list.iter().map(|&i| Field::Attribute(i)))
}

fn key_index(population: &Population) -> SpaceShape {
    space_for(&[Field::Key], population, 1.0).unwrap()
}

fn history(attributes: usize, searches: &[(FieldSet, u64)]) -> QueryHistory {
    let mut history = QueryHistory::new(attributes, f64::INFINITY).unwrap();
    for &(named, count) in searches {
        history.record(named, count).unwrap();
    }
    history
}

fn groups(shapes: &[SpaceShape]) -> Vec<FieldSet> {
    shapes.iter().map(SpaceShape::fields).collect()
}

/// The least cost over every partition, found by trying every assignment of attributes
/// to group labels and costing it with `grouping_cost` directly.
fn brute_force_optimum(
    policy: &RegroupPolicy,
    history: &QueryHistory,
    key: &SpaceShape,
    population: &Population,
) -> f64 {
    let p = policy.attributes();
    let options = policy.options();
    let mut best = f64::INFINITY;
    for code in 0..p.pow(p as u32) {
        let mut masks = vec![0u8; p];
        let mut rest = code;
        for attribute in 0..p {
            masks[rest % p] |= 1 << attribute;
            rest /= p;
        }
        masks.retain(|&m| m != 0);
        if masks.len() > options.max_subspaces
            || masks
                .iter()
                .any(|m| m.count_ones() as usize > options.max_dimensions)
        {
            continue;
        }
        let shapes: Vec<SpaceShape> = masks.iter().map(|&m| policy.space(m, population)).collect();
        best = best.min(policy.cost(history, key, &shapes, population));
    }
    best
}

/// A random policy question: attribute count, limits, data and searches.
#[derive(Clone, Debug)]
struct Case {
    attributes: usize,
    options: RegroupOptions,
    population: Population,
    searches: Vec<(FieldSet, u64)>,
    key_spread: bool,
}

impl Case {
    fn policy(&self) -> Option<RegroupPolicy> {
        let policy = RegroupPolicy::new(self.attributes, self.options.clone()).ok()?;
        Some(policy.with_key_spread(self.key_spread))
    }
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let attributes = usize::arbitrary(g) % 5 + 1;
        let max_dimensions = usize::arbitrary(g) % 3 + 1;
        let least_subspaces = attributes.div_ceil(max_dimensions);
        let max_subspaces = least_subspaces + usize::arbitrary(g) % (attributes + 1);
        let tuples = u64::from(u32::arbitrary(g) % (1 << 22));
        let population = if bool::arbitrary(g) {
            Population::uniform(tuples)
        } else {
            let distinct: Vec<u64> = (0..attributes)
                .map(|_| [2, 100, 10_000, 100_000][usize::arbitrary(g) % 4])
                .collect();
            Population::with_distinct(tuples, &distinct)
        };
        let searches = (0..usize::arbitrary(g) % 6 + 1)
            .map(|_| {
                let mask = (u16::arbitrary(g) % (1 << attributes)).max(1) << 1;
                let with_key = u8::arbitrary(g) % 8 == 0;
                let named = FieldSet::from_mask(mask | u16::from(with_key));
                (named, u64::from(u16::arbitrary(g)) + 1)
            })
            .collect();
        Case {
            attributes,
            options: RegroupOptions {
                max_dimensions,
                max_subspaces,
                target_chain_nodes: [0.5, 1.0, 4.0][usize::arbitrary(g) % 3],
                ..RegroupOptions::default()
            },
            population,
            searches,
            key_spread: bool::arbitrary(g),
        }
    }
}

#[test]
fn bad_options_are_refused() {
    let options = RegroupOptions::default();
    assert!(RegroupPolicy::new(0, options.clone()).is_err());
    assert!(RegroupPolicy::new(9, options.clone()).is_err());
    let bad = [
        RegroupOptions {
            max_dimensions: 0,
            ..options.clone()
        },
        RegroupOptions {
            max_subspaces: 0,
            ..options.clone()
        },
        RegroupOptions {
            target_chain_nodes: -1.0,
            ..options.clone()
        },
        RegroupOptions {
            shift_factor: 0.5,
            ..options.clone()
        },
        RegroupOptions {
            shift_factor: f64::NAN,
            ..options.clone()
        },
    ];
    for options in bad {
        assert!(
            RegroupPolicy::new(4, options.clone()).is_err(),
            "{options:?}"
        );
    }
    let tight = RegroupOptions {
        max_dimensions: 2,
        max_subspaces: 2,
        ..options
    };
    assert_eq!(
        RegroupPolicy::new(5, tight.clone()).unwrap_err(),
        PolicyError::NoGrouping {
            attributes: 5,
            max_dimensions: 2,
            max_subspaces: 2
        }
    );
    let policy = RegroupPolicy::new(4, tight).unwrap();
    let population = Population::uniform(1000);
    let other = QueryHistory::new(3, 1.0).unwrap();
    assert!(
        policy
            .choose(&other, &key_index(&population), &population)
            .is_err()
    );
}

#[test]
fn default_grouping_is_each_attribute_alone_or_balanced_chunks() {
    let population = Population::uniform(1 << 20);
    let policy = RegroupPolicy::new(4, RegroupOptions::default()).unwrap();
    assert_eq!(
        groups(&policy.default_grouping(&population)),
        vec![attrs(&[0]), attrs(&[1]), attrs(&[2]), attrs(&[3])]
    );
    let limited = RegroupOptions {
        max_subspaces: 3,
        ..RegroupOptions::default()
    };
    let policy = RegroupPolicy::new(8, limited).unwrap();
    assert_eq!(
        groups(&policy.default_grouping(&population)),
        vec![attrs(&[0, 1, 2]), attrs(&[3, 4, 5]), attrs(&[6, 7])]
    );
}

#[test]
fn a_frequent_pair_shares_a_subspace_under_a_memory_limit() {
    // Uniform data: only the memory limit (2 subspaces for 4 attributes) forces
    // groups, and the frequent conjunction decides which.
    let population = Population::uniform(1 << 24);
    let options = RegroupOptions {
        max_subspaces: 2,
        max_dimensions: 2,
        ..RegroupOptions::default()
    };
    let policy = RegroupPolicy::new(4, options).unwrap();
    let key = key_index(&population);
    let searches = history(
        4,
        &[(attrs(&[0, 2]), 100), (attrs(&[1]), 1), (attrs(&[3]), 1)],
    );
    let chosen = policy.choose(&searches, &key, &population).unwrap();
    assert_eq!(groups(&chosen), vec![attrs(&[0, 2]), attrs(&[1, 3])]);
}

#[test]
fn spread_subspaces_end_with_the_key_beside_few_values() {
    // W6's case: 2^24 tuples, 100 values an attribute, searches of one attribute.
    let population = Population::with_distinct(1 << 24, &[100; 2]);
    let paper = RegroupPolicy::new(2, RegroupOptions::default()).unwrap();
    let spread = paper.clone().with_key_spread(true);
    assert!(spread.key_spread() && !paper.key_spread());
    let key = key_index(&population);
    let searches = history(2, &[(attrs(&[0]), 10), (attrs(&[1]), 10)]);
    let chosen = spread.choose(&searches, &key, &population).unwrap();
    for shape in &chosen {
        let dims = shape.dimensions();
        assert_eq!(dims.len(), 2, "{chosen:?}");
        assert_eq!(dims[0].1, 7);
        assert_eq!(dims[1], (Field::Key, 13));
    }
    let plain = paper.choose(&searches, &key, &population).unwrap();
    let spread_cost = spread.cost(&searches, &key, &chosen, &population);
    let plain_cost = paper.cost(&searches, &key, &plain, &population);
    // About the same node reads (the model counts reads, not how many warps share them):
    // 2^13 short chains a search instead of one of ~5400 nodes.
    assert!(
        spread_cost < plain_cost * 1.25,
        "{spread_cost} {plain_cost}"
    );
    // Key searches cost what the key index costs them, subspaces with the key or not.
    let by_key = history(2, &[(FieldSet::of([Field::Key]), 5)]);
    assert_eq!(
        spread.cost(&by_key, &key, &chosen, &population),
        paper.cost(&by_key, &key, &plain, &population)
    );
}

#[test]
fn a_frequent_pair_of_few_values_shares_a_subspace() {
    // 100 values an attribute: alone, a bucket of A0 holds n / 100 tuples; with A2 in
    // the same subspace, a conjunction's bucket holds n / 10^4.
    let population = Population::with_distinct(1 << 24, &[100; 4]);
    let policy = RegroupPolicy::new(4, RegroupOptions::default()).unwrap();
    let key = key_index(&population);
    let before = history(4, &[(attrs(&[0]), 50), (attrs(&[1]), 50)]);
    let after = history(4, &[(attrs(&[0, 2]), 100), (attrs(&[0]), 1)]);
    let start = policy.choose(&before, &key, &population).unwrap();
    assert!(groups(&start).iter().all(|g| g.len() <= 2));
    let chosen = policy.choose(&after, &key, &population).unwrap();
    assert!(groups(&chosen).contains(&attrs(&[0, 2])), "{chosen:?}");
    let conjunction = attrs(&[0, 2]);
    let default = policy.default_grouping(&population);
    let best_default = default
        .iter()
        .map(|s| search_cost(s, conjunction, &population))
        .fold(f64::INFINITY, f64::min);
    let best_chosen = chosen
        .iter()
        .map(|s| search_cost(s, conjunction, &population))
        .fold(f64::INFINITY, f64::min);
    assert!(
        best_chosen * 10.0 < best_default,
        "{best_chosen} {best_default}"
    );
}

#[test]
fn advise_waits_for_a_shift_of_the_mix() {
    let population = Population::with_distinct(1 << 22, &[100; 4]);
    let options = RegroupOptions {
        check_every: 1000,
        ..RegroupOptions::default()
    };
    let policy = RegroupPolicy::new(4, options).unwrap();
    let key = key_index(&population);
    let mut history = QueryHistory::new(4, 2000.0).unwrap();
    let current = policy.default_grouping(&population);
    history
        .record_each((0..999).map(|i| attrs(&[(i % 2) as u8])))
        .unwrap();
    // Not yet time to look.
    assert_eq!(
        policy.advise(&mut history, &key, &current, &population),
        Ok(None)
    );
    history.record(attrs(&[0]), 1).unwrap();
    // Singles: each attribute alone is as good as it gets.
    assert_eq!(
        policy.advise(&mut history, &key, &current, &population),
        Ok(None)
    );
    assert_eq!(history.recorded_since_mark(), 0);
    history.record(attrs(&[0, 2]), 10_000).unwrap();
    let advice = policy
        .advise(&mut history, &key, &current, &population)
        .unwrap();
    let next = advice.expect("the mix shifted to conjunctions");
    assert!(groups(&next).contains(&attrs(&[0, 2])));
    // Once regrouped, no further advice under the same history.
    history.record(attrs(&[0, 2]), 1000).unwrap();
    assert_eq!(
        policy.advise(&mut history, &key, &next, &population),
        Ok(None)
    );
}

#[test]
fn eight_attributes_and_every_search_are_searched_exactly_and_quickly() {
    let population = Population::with_distinct(
        1 << 26,
        &[100, 10_000, 100_000, 100, 10_000, 100_000, 100, 2],
    );
    let policy = RegroupPolicy::new(8, RegroupOptions::default()).unwrap();
    let key = key_index(&population);
    let every: Vec<(FieldSet, u64)> = (1..=255u16)
        .map(|m| (FieldSet::from_mask(m << 1), u64::from(m % 7 + 1)))
        .collect();
    let history = history(8, &every);
    let start = std::time::Instant::now();
    let chosen = policy.choose(&history, &key, &population).unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    let default = policy.default_grouping(&population);
    assert!(
        policy.cost(&history, &key, &chosen, &population)
            <= policy.cost(&history, &key, &default, &population)
    );
}

quickcheck! {
    fn choice_is_the_exact_optimum_and_never_worse_than_the_default(case: Case) -> TestResult {
        let Some(policy) = case.policy() else {
            return TestResult::discard();
        };
        let history = history(case.attributes, &case.searches);
        let key = key_index(&case.population);
        let chosen = policy.choose(&history, &key, &case.population).unwrap();
        let chosen_cost = policy.cost(&history, &key, &chosen, &case.population);
        let default = policy.default_grouping(&case.population);
        let default_cost = policy.cost(&history, &key, &default, &case.population);
        let optimum = brute_force_optimum(&policy, &history, &key, &case.population);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        let all = FieldSet::from_mask(((1u16 << case.attributes) - 1) << 1);
        let attributes_of = |s: &SpaceShape| s.fields().intersection(all);
        // The key, if there, is the last dimension, only with the key spread on.
        let keys_last = chosen.iter().all(|s| {
            let dims = s.dimensions();
            let key_at = dims.iter().position(|&(f, _)| f == Field::Key);
            key_at.is_none_or(|d| case.key_spread && d + 1 == dims.len())
        });
        let limits = chosen.len() <= case.options.max_subspaces
            && chosen.iter().all(|s| attributes_of(s).len() as usize <= case.options.max_dimensions);
        let covered = chosen.iter().fold(FieldSet::EMPTY, |all, s| all.union(attributes_of(s)));
        let disjoint = chosen.iter().map(|s| attributes_of(s).len()).sum::<u32>() == case.attributes as u32;
        TestResult::from_bool(
            limits
                && keys_last
                && disjoint
                && covered == all
                && close(chosen_cost, optimum)
                && chosen_cost <= default_cost * (1.0 + 1e-9),
        )
    }

    fn choice_is_deterministic_and_ignores_search_order(case: Case) -> TestResult {
        let Some(policy) = case.policy() else {
            return TestResult::discard();
        };
        let key = key_index(&case.population);
        let forward = history(case.attributes, &case.searches);
        let mut reversed = case.searches.clone();
        reversed.reverse();
        let backward = history(case.attributes, &reversed);
        let a = policy.choose(&forward, &key, &case.population).unwrap();
        let b = policy.choose(&backward, &key, &case.population).unwrap();
        TestResult::from_bool(a == b)
    }

    fn a_dominant_pair_shares_a_subspace(attributes: u8, i: u8, j: u8, noise: Vec<(u8, u8)>) -> TestResult {
        let p = usize::from(attributes % 5) + 2;
        let (i, j) = (i % p as u8, j % p as u8);
        if i == j {
            return TestResult::discard();
        }
        let population = Population::with_distinct(1 << 24, &[16; 8]);
        let policy = RegroupPolicy::new(p, RegroupOptions::default()).unwrap();
        let mut searches = vec![(attrs(&[i, j]), 100_000)];
        searches.extend(noise.iter().take(8).map(|&(mask, count)| {
            let mask = (u16::from(mask) % (1 << p)).max(1) << 1;
            (FieldSet::from_mask(mask), u64::from(count % 100) + 1)
        }));
        let history = history(p, &searches);
        let chosen = policy.choose(&history, &key_index(&population), &population).unwrap();
        let pair = attrs(&[i, j]);
        TestResult::from_bool(chosen.iter().any(|s| s.fields().intersection(pair) == pair))
    }
}
