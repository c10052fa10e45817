//! The regroup policy: which attributes share a subspace, chosen from the query history.
//!
//! The GHSH paper (section 5) splits the one hyperspace over all attributes into
//! subspaces over groups of them, beside a one-dimensional key index that never moves, and
//! regroups from the query history so that frequent combinations touch the fewest
//! buckets. Here a grouping is a partition of the attributes into at most
//! [`RegroupOptions::max_subspaces`] groups (each subspace holds a full copy of every
//! tuple: this is the memory limit) of at most [`RegroupOptions::max_dimensions`]
//! attributes, each group a space whose bits come from [`space_for`] (the tuple count and
//! [`RegroupOptions::target_chain_nodes`]). Its cost is [`grouping_cost`]: each search
//! recorded in the history, weighted by its frequency, answered in the cheapest space (the
//! key index included).
//!
//! [`RegroupPolicy::choose`] searches every partition: at most 4140 for 8 attributes (the
//! Bell number), each costed from a table of the cost of every search in every possible
//! group, so the search is exact and takes milliseconds. Ties, compared with a relative
//! tolerance of 1e-9, go to fewer subspaces (less memory, fewer copies to write on an
//! insert), then to the first partition in the order of restricted growth strings
//! (attribute 0 in group 0, each next attribute in an existing group before a new one).
//! The result lists the groups by their lowest attribute, the attributes of each in order.
//!
//! [`RegroupPolicy::advise`] is what an index calls as searches come in: every
//! [`RegroupOptions::check_every`] searches it compares the cost of the current grouping
//! with the best one under the recent history, and proposes the best when the current
//! costs more than [`RegroupOptions::shift_factor`] times as much.

use crate::cost::{
    PolicyError, Population, check_attributes, check_option, grouping_cost, space_for, spread_key,
    total_bits,
};
use crate::history::QueryHistory;
use crate::shape::{Field, FieldSet, SpaceShape};

/// Costs within this relative distance are ties.
const TIE_TOLERANCE: f64 = 1e-9;

/// The limits and thresholds of regrouping.
#[derive(Clone, Debug, PartialEq)]
pub struct RegroupOptions {
    /// Most attributes a subspace may have (at least 1).
    pub max_dimensions: usize,
    /// Most attribute subspaces (each holds a copy of every tuple; at least 1).
    pub max_subspaces: usize,
    /// Chain length a space's buckets are sized for, in nodes of 31 tuples on average
    /// (positive).
    pub target_chain_nodes: f64,
    /// [`RegroupPolicy::advise`] proposes a regroup when the current grouping costs more
    /// than this many times the best one (at least 1).
    pub shift_factor: f64,
    /// Searches between two looks of [`RegroupPolicy::advise`] at the history.
    pub check_every: u64,
}

impl Default for RegroupOptions {
    /// Subspaces of at most 3 attributes, no limit on their number below one per attribute,
    /// chains of one node, a regroup when the current grouping costs 1.5 times the best,
    /// looked at every 65536 searches.
    fn default() -> Self {
        RegroupOptions {
            max_dimensions: 3,
            max_subspaces: crate::shape::MAX_ATTRIBUTES,
            target_chain_nodes: 1.0,
            shift_factor: 1.5,
            check_every: 1 << 16,
        }
    }
}

/// The regroup policy of an index over tuples of a given attribute count.
#[derive(Clone, Debug)]
pub struct RegroupPolicy {
    attributes: usize,
    options: RegroupOptions,
    key_spread: bool,
}

/// Groups of attributes as bit masks (bit `i` attribute `i`).
type Partition = Vec<u8>;

impl RegroupPolicy {
    /// The policy for tuples of `attributes` attributes; fails on bad options or limits no
    /// grouping meets.
    pub fn new(attributes: usize, options: RegroupOptions) -> Result<RegroupPolicy, PolicyError> {
        check_attributes(attributes)?;
        let count = |name, value: usize| check_option(name, value as f64, value >= 1, "[1, inf)");
        count("max_dimensions", options.max_dimensions)?;
        count("max_subspaces", options.max_subspaces)?;
        check_option(
            "target_chain_nodes",
            options.target_chain_nodes,
            options.target_chain_nodes > 0.0,
            "(0, inf)",
        )?;
        check_option(
            "shift_factor",
            options.shift_factor,
            options.shift_factor >= 1.0,
            "[1, inf)",
        )?;
        if options.max_dimensions.saturating_mul(options.max_subspaces) < attributes {
            return Err(PolicyError::NoGrouping {
                attributes,
                max_dimensions: options.max_dimensions,
                max_subspaces: options.max_subspaces,
            });
        }
        Ok(RegroupPolicy {
            attributes,
            options,
            key_spread: false,
        })
    }

    /// This policy with its subspaces taking the key as a last dimension, with the bits
    /// their attributes cannot use ([`spread_key`]; what an index whose
    /// [`crate::HyperspaceOptions::key_spread`] is on asks for), or without (`false`, the
    /// default of [`RegroupPolicy::new`]: the GHSH paper's subspaces).
    pub fn with_key_spread(mut self, key_spread: bool) -> RegroupPolicy {
        self.key_spread = key_spread;
        self
    }

    /// Whether the subspaces take the key as a last dimension.
    pub fn key_spread(&self) -> bool {
        self.key_spread
    }

    /// The options.
    pub fn options(&self) -> &RegroupOptions {
        &self.options
    }

    /// Attributes of the tuples.
    pub fn attributes(&self) -> usize {
        self.attributes
    }

    /// The grouping to start from, knowing nothing of the searches: each attribute alone,
    /// or, when fewer subspaces are allowed, the attributes in order cut into that many
    /// groups whose sizes differ by at most one.
    pub fn default_grouping(&self, population: &Population) -> Vec<SpaceShape> {
        let groups = self.options.max_subspaces.min(self.attributes);
        let (size, larger) = (self.attributes / groups, self.attributes % groups);
        let mut next = 0;
        let partition: Partition = (0..groups)
            .map(|g| {
                let len = size + usize::from(g < larger);
                let mask = ((1u16 << len) - 1) << next;
                next += len;
                mask as u8
            })
            .collect();
        self.shapes(&partition, population)
    }

    /// The space of one group of attributes (bit `i` attribute `i`): [`space_for`] the
    /// attributes, then, with the key spread on, the key with the bits they leave.
    pub fn space(&self, group: u8, population: &Population) -> SpaceShape {
        let fields: Vec<Field> = FieldSet::from_mask(u16::from(group) << 1)
            .fields()
            .collect();
        let target = self.options.target_chain_nodes;
        let shape = space_for(&fields, population, target)
            .expect("a group is a non-empty set and the target was checked");
        if self.key_spread {
            let total = total_bits(population, target).expect("the target was checked");
            spread_key(shape, total)
        } else {
            shape
        }
    }

    fn shapes(&self, partition: &[u8], population: &Population) -> Vec<SpaceShape> {
        partition
            .iter()
            .map(|&group| self.space(group, population))
            .collect()
    }

    /// The frequency-weighted cost of answering `history`'s searches with the key index
    /// `key_index` and the attribute subspaces `subspaces` (see the module docs).
    pub fn cost(
        &self,
        history: &QueryHistory,
        key_index: &SpaceShape,
        subspaces: &[SpaceShape],
        population: &Population,
    ) -> f64 {
        let mut spaces = vec![key_index.clone()];
        spaces.extend_from_slice(subspaces);
        grouping_cost(history.frequencies(), &spaces, population)
    }

    /// The attribute subspaces of least cost under `history` beside `key_index` (see the
    /// module docs for the search and its ties). Fails when `history` is over another
    /// attribute count.
    pub fn choose(
        &self,
        history: &QueryHistory,
        key_index: &SpaceShape,
        population: &Population,
    ) -> Result<Vec<SpaceShape>, PolicyError> {
        if history.attributes() != self.attributes {
            return Err(PolicyError::AttributeCount(history.attributes()));
        }
        let searches = history.frequencies();
        let table = CostTable::new(self, &searches, key_index, population);
        let mut best: Option<(f64, Partition)> = None;
        let mut groups = Vec::with_capacity(self.attributes);
        self.for_each_partition(0, &mut groups, &mut |partition| {
            let cost = table.cost(partition);
            let better = match &best {
                None => true,
                Some((best_cost, best_groups)) => {
                    let margin = TIE_TOLERANCE * best_cost.abs();
                    cost < best_cost - margin
                        || (cost <= best_cost + margin && partition.len() < best_groups.len())
                }
            };
            if better {
                best = Some((cost, partition.to_vec()));
            }
        });
        let (_, partition) = best.expect("the limits admit a grouping");
        Ok(self.shapes(&partition, population))
    }

    /// Calls `visit` with every partition of the attributes from `next` on, added to
    /// `groups`, that meets the limits, in the order of restricted growth strings.
    fn for_each_partition(
        &self,
        next: usize,
        groups: &mut Partition,
        visit: &mut dyn FnMut(&[u8]),
    ) {
        if next == self.attributes {
            visit(groups);
            return;
        }
        let bit = 1u8 << next;
        for g in 0..groups.len() {
            if (groups[g].count_ones() as usize) < self.options.max_dimensions {
                groups[g] |= bit;
                self.for_each_partition(next + 1, groups, visit);
                groups[g] &= !bit;
            }
        }
        // A new group only if the attributes after this one still fit: the room left in
        // the open groups and in the groups still allowed, this one's slot taken.
        let free_groups = self.options.max_subspaces.saturating_sub(groups.len());
        let room_in_open: usize = groups
            .iter()
            .map(|g| self.options.max_dimensions - g.count_ones() as usize)
            .sum();
        let room = room_in_open + free_groups * self.options.max_dimensions;
        if free_groups > 0 && room > self.attributes - next - 1 {
            groups.push(bit);
            self.for_each_partition(next + 1, groups, visit);
            groups.pop();
        }
    }

    /// Whether [`RegroupOptions::check_every`] searches (at least one) were recorded in
    /// `history` since its mark: [`RegroupPolicy::advise`] looks at it then.
    pub fn due(&self, history: &QueryHistory) -> bool {
        history.recorded_since_mark() >= self.options.check_every.max(1)
    }

    /// Every [`RegroupOptions::check_every`] searches recorded in `history` (marking it):
    /// the best grouping when the current one, `subspaces` beside `key_index`, costs more
    /// than [`RegroupOptions::shift_factor`] times as much under the history; `None`
    /// otherwise. The current spaces are costed with the bits they have, the best with
    /// bits for `population` now, so the advice may also be the same groups with more
    /// bits, once the tuples have outgrown the current spaces.
    pub fn advise(
        &self,
        history: &mut QueryHistory,
        key_index: &SpaceShape,
        subspaces: &[SpaceShape],
        population: &Population,
    ) -> Result<Option<Vec<SpaceShape>>, PolicyError> {
        if !self.due(history) {
            return Ok(None);
        }
        history.mark();
        let best = self.choose(history, key_index, population)?;
        let current_cost = self.cost(history, key_index, subspaces, population);
        let best_cost = self.cost(history, key_index, &best, population);
        let shifted = current_cost > self.options.shift_factor * best_cost * (1.0 + TIE_TOLERANCE);
        Ok((shifted && best != subspaces).then_some(best))
    }
}

/// The cost of every recorded search in every group a partition may use, and in the key
/// index, computed once for the whole search over partitions.
struct CostTable {
    /// Weight of each search.
    weights: Vec<f64>,
    /// Cost of each search in the key index.
    key_costs: Vec<f64>,
    /// `group_costs[group][search]`, empty for groups over the size limit.
    group_costs: Vec<Vec<f64>>,
}

impl CostTable {
    fn new(
        policy: &RegroupPolicy,
        searches: &[(FieldSet, f64)],
        key_index: &SpaceShape,
        population: &Population,
    ) -> CostTable {
        // Searches naming the key run in the key index, never in a subspace (even one
        // with the key as a dimension).
        let cost_in = |space: &SpaceShape, key_index: bool| -> Vec<f64> {
            searches
                .iter()
                .map(
                    |&(named, _)| match named.contains(Field::Key) && !key_index {
                        true => f64::INFINITY,
                        false => {
                            grouping_cost([(named, 1.0)], std::slice::from_ref(space), population)
                        }
                    },
                )
                .collect()
        };
        let group_costs = (0..1usize << policy.attributes)
            .map(|group| {
                let size = group.count_ones() as usize;
                if size == 0 || size > policy.options.max_dimensions {
                    Vec::new()
                } else {
                    cost_in(&policy.space(group as u8, population), false)
                }
            })
            .collect();
        CostTable {
            weights: searches.iter().map(|&(_, w)| w).collect(),
            key_costs: cost_in(key_index, true),
            group_costs,
        }
    }

    /// The frequency-weighted cost of a partition, each search in its cheapest space.
    fn cost(&self, partition: &[u8]) -> f64 {
        self.weights
            .iter()
            .enumerate()
            .map(|(s, &weight)| {
                let cheapest = partition
                    .iter()
                    .map(|&g| self.group_costs[usize::from(g)][s])
                    .fold(self.key_costs[s], f64::min);
                weight * cheapest
            })
            .sum()
    }
}

#[cfg(test)]
mod tests;
