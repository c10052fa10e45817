//! The scenario a table's device view is checked on: the view must answer as `get` after
//! inserts, after removes and after growth, for present and absent keys, random and
//! adversarial, the table's reserved keys among them.

use std::collections::HashSet;

use gpuhash_core::table::Map;

use crate::inputs::{SeededRng, adversarial_keys, values_of};

/// How many keys each step takes.
#[derive(Debug, Clone, Copy)]
pub struct ViewSizes {
    /// Random keys inserted first.
    pub first: usize,
    /// Random keys never inserted, queried beside the others.
    pub absent: usize,
    /// Random keys inserted last, to grow the table.
    pub growth: usize,
}

/// Inserts `sizes.first` random keys and the adversarial keys (every key of `reserved`,
/// half of the others), then calls `check(map, queries, step)` after the inserts, after
/// removing every other key, and after inserting `sizes.growth` more; `queries` holds
/// every third key inserted, every adversarial key, `sizes.absent` keys never inserted and,
/// after growth, every fifth key of the growth.
pub fn view_scenario<M: Map>(
    map: &M,
    rng: &mut SeededRng,
    reserved: &[M::Key],
    sizes: ViewSizes,
    mut check: impl FnMut(&M, &[M::Key], &str),
) {
    let adversarial = adversarial_keys::<M::Key>();
    let mut keys: Vec<M::Key> = rng.distinct_keys(sizes.first);
    let held: HashSet<M::Key> = keys.iter().copied().collect();
    let present: Vec<M::Key> = adversarial
        .iter()
        .copied()
        .filter(|k| reserved.contains(k) || held.contains(k) || rng.next_u64().is_multiple_of(2))
        .collect();
    keys.extend(present.iter().filter(|k| !held.contains(k)));
    map.insert(&keys, &values_of::<M::Key, M::Value>(&keys))
        .expect("the inserts go in");

    let mut queries: Vec<M::Key> = keys.iter().step_by(3).copied().collect();
    queries.extend(&adversarial);
    queries.extend(rng.distinct_keys::<M::Key>(sizes.absent));
    check(map, &queries, "after inserts");

    let removed: Vec<M::Key> = keys.iter().step_by(2).copied().collect();
    map.remove(&removed).expect("the removes run");
    check(map, &queries, "after removes");

    let more: Vec<M::Key> = rng.distinct_keys(sizes.growth);
    map.insert(&more, &values_of::<M::Key, M::Value>(&more))
        .expect("the growth goes in");
    queries.extend(more.iter().step_by(5));
    check(map, &queries, "after growth");
}
