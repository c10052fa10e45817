//! The host side's pure policy: which child a key lives in, how the budgets divide, the
//! ranges of a partitioned batch, which resident child goes out first, how large a miss
//! filter is, whether a batch pages a child in or probes its image in place, which passes
//! a batch of several segments takes ([`passes`]), and in which order a failed batch is
//! taken back ([`undo_steps`]).

use std::ops::Range;

use gpuhash_core::hash::fmix64;

use crate::layouts::GH_SWAP_SEED;

mod passes;
mod undo;
pub use passes::{Reach, SegmentRoom, deferred_segment, passes};
pub use undo::undo_steps;

/// The child of `key` among `children`: [`Spread::children`]'s part.
pub fn child_of(key: u64, children: u32) -> u32 {
    Spread::children(children).part_of(key)
}

/// How keys spread over parts: part `(high * parts) >> 32` of a key, `high` the high 32
/// bits of `fmix64(key ^ seed)`. The device's `gh_swap_child` computes the same.
///
/// A swap table's children take `GH_SWAP_SEED` ([`Spread::children`]). A layer above
/// that splits batches among tables which may be swap tables takes a seed of its own: with
/// the same seed, the keys of part r of R would all fall in children r C / R to (r + 1) C /
/// R of its table, leaving the rest empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    /// How many parts.
    pub parts: u32,
    /// The seed xored into each key before it is mixed.
    pub seed: u64,
}

impl Spread {
    /// A swap table's spread over its `children`.
    pub fn children(children: u32) -> Self {
        Self {
            parts: children,
            seed: GH_SWAP_SEED,
        }
    }

    /// The part of `key`.
    pub fn part_of(&self, key: u64) -> u32 {
        let high = fmix64(key ^ self.seed) >> 32;
        ((high * u64::from(self.parts)) >> 32) as u32
    }
}

/// Device bytes a batch element needs while a segment runs, whatever the verb: the larger
/// of [`lookup_scratch_per_element`] and [`change_scratch_per_element`] (the first, for
/// keys of 4 bytes or more).
pub fn scratch_per_element(key_bytes: usize, value_bytes: usize) -> u64 {
    lookup_scratch_per_element(key_bytes, value_bytes)
        .max(change_scratch_per_element(key_bytes, value_bytes))
}

/// Device bytes an element of a lookup needs while its segment runs: its key and value
/// twice (the partitioned copy and the child's own), its child id and input place, its
/// answer (flag and value) twice, and its key and place again where a filter passes it.
pub fn lookup_scratch_per_element(key_bytes: usize, value_bytes: usize) -> u64 {
    (3 * key_bytes + 2 * value_bytes + 12 + 2 * (value_bytes + 1)) as u64
}

/// Device bytes an element of an insert or a removal needs while its segment runs: its key
/// and value twice and its child id and input place, as a lookup's; a removal's answer flag
/// twice; and the undo log: what the key held before its visit (flag and value) as the
/// child's lookup answers it, again in the log, and its place, which the log keeps while
/// the next segment is partitioned (`crate::undo`). No filter survivors and no answer
/// values: the log takes their room.
pub fn change_scratch_per_element(key_bytes: usize, value_bytes: usize) -> u64 {
    (2 * key_bytes + 2 * value_bytes + 8 + 2 + 2 * (value_bytes + 1) + 4) as u64
}

/// Blocks (of 256 bits) of a child's miss filter: `bits_per_key` bits for each of the
/// `child_capacity` pairs a child is made for, at least one block.
pub fn filter_blocks(child_capacity: usize, bits_per_key: u32) -> u32 {
    let bits = (child_capacity as u64).saturating_mul(u64::from(bits_per_key));
    bits.div_ceil(256).clamp(1, u64::from(u32::MAX)) as u32
}

/// Device bytes kept for the partition of batch segments under a device budget, unless
/// set, at least: a quarter of the budget is kept when that is more.
pub const DEFAULT_SCRATCH_BYTES: u64 = 64 << 20;

/// Device bytes a table keeps for partitioning batches: `asked` when set. Otherwise, with
/// no device budget (`u64::MAX`), no bound: a batch (of up to 2^32 elements) is one
/// segment, its scratch allocated for its own length. With a budget, a quarter of it, at
/// least [`DEFAULT_SCRATCH_BYTES`]: the paper's input segments beside its child slots.
/// A batch cut into many short segments takes passes so that it pages each child once
/// ([`passes`]), but still pays a partition (with a wait) a segment for each pass, and a
/// visit's fixed cost (a few kernels and copies a child) once a segment for every child.
pub fn scratch_bytes(device_budget: u64, asked: Option<u64>) -> u64 {
    match (asked, device_budget) {
        (Some(bytes), _) => bytes,
        (None, u64::MAX) => u64::MAX,
        (None, budget) => (budget / 4).max(DEFAULT_SCRATCH_BYTES),
    }
}

/// How the device budget divides: children resident at once and batch elements a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Children resident at once.
    pub resident: usize,
    /// Batch elements partitioned at once.
    pub segment: usize,
}

/// What the device budget holds besides the resident children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    /// Bytes for partitioning a batch segment.
    pub scratch_bytes: u64,
    /// Bytes of every child's miss filter.
    pub filter_bytes: u64,
}

/// The plan for a device budget, or why the budget is too small: it must hold the scratch,
/// the filters and at least one child of `child_bytes`, and the scratch at least one element.
pub fn plan(
    device_budget: u64,
    fixed: Fixed,
    child_bytes: u64,
    element_bytes: u64,
    children: usize,
) -> Result<Plan, String> {
    let Fixed {
        scratch_bytes,
        filter_bytes,
    } = fixed;
    // No budget bounds neither the children nor the scratch.
    let for_children = match device_budget {
        u64::MAX => u64::MAX,
        budget => budget
            .saturating_sub(scratch_bytes)
            .saturating_sub(filter_bytes),
    };
    let resident = (for_children / child_bytes.max(1)).min(children as u64) as usize;
    if resident == 0 {
        return Err(format!(
            "a device budget of {device_budget} bytes holds no child of {child_bytes} bytes \
             beside {scratch_bytes} bytes of scratch and {filter_bytes} bytes of filters"
        ));
    }
    let segment = (scratch_bytes / element_bytes.max(1)).min(u64::from(u32::MAX)) as usize;
    if segment == 0 {
        return Err(format!(
            "{scratch_bytes} bytes of scratch hold no batch element of {element_bytes} bytes"
        ));
    }
    Ok(Plan { resident, segment })
}

/// The children a batch pages in for all its segments (`paged`), in groups of `group`
/// (at least one): each group takes a pass over the batch's segments, paged in once and
/// resident throughout ([`passes`]).
pub fn page_groups(paged: &[usize], group: usize) -> Vec<Vec<usize>> {
    paged.chunks(group.max(1)).map(<[usize]>::to_vec).collect()
}

/// Children a paging pass takes at once under `resident` slots: half of them (at least
/// one), so that the next group pages in, into the other half, while this one's segments
/// run (`crate::prefetch`); with one slot, the one.
pub fn page_group(resident: usize) -> usize {
    (resident / 2).max(1)
}

/// The order a batch visits its children in: the resident ones first, then the others,
/// each group in the order given. A batch that visits every child in child order under an
/// LRU that holds fewer than all of them misses on every child (the children it evicts
/// first are the ones the batch reaches last, or the resident ones it has yet to reach);
/// visiting the resident ones first pages only the others in.
pub fn resident_first<T>(
    children: impl IntoIterator<Item = (usize, T)>,
    is_resident: impl Fn(usize) -> bool,
) -> Vec<(usize, T)> {
    let mut order: Vec<(usize, T)> = children.into_iter().collect();
    order.sort_by_key(|(child, _)| !is_resident(*child));
    order
}

/// Each child's range of a partitioned batch, from its count: the exclusive scan.
pub fn child_ranges(counts: &[u32]) -> Vec<Range<usize>> {
    let mut start = 0;
    counts
        .iter()
        .map(|&count| {
            let range = start..start + count as usize;
            start = range.end;
            range
        })
        .collect()
}

/// How a lookup batch reaches a child on the host: paging its image in, or probing the
/// image in place over the bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Copy the whole image to the device (evicting the least recently used child), then
    /// look up there.
    Page,
    /// Look up in the image where it lies in mapped pinned memory (zero-copy).
    Probe,
}

/// The rates that decide between paging a child in and probing it in place, per child per
/// batch: paging costs the image's bytes over the host-to-device rate, plus a fixed cost
/// (allocations and one copy a section), plus the lookups on the device; probing costs
/// the probes' bytes over the rate the bus serves random reads of mapped memory. Paging
/// also leaves the child resident for later batches, which the model does not count: it
/// favours probing only when probing this one batch is cheaper.
///
/// The defaults are the rates the W5 benchmark measured on an H100 SXM on PCIe 5.0 x16
/// (docs/benchmarks/swap.md; it prints them for the machine it runs on): 54 GB/s for
/// copies from pinned memory, 21 GB/s of 64-byte random reads of mapped memory (DyHash
/// lookups of an image in place), 100 us to set a child up beyond its bytes, and 20
/// billion device lookups a second. With them a batch probes a child of 2^20 pairs in
/// place up to about 2^17 of its keys (2^21 keys a batch over 16 children); the estimates
/// they replace (10 GB/s, 50 us, 10^9 lookups) paged from 2^16 on, 2.7x slower at 2^20
/// keys a batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Bytes a second a copy from pinned memory to the device moves.
    pub host_to_device_bytes_per_s: f64,
    /// Bytes a second kernels read from mapped pinned memory at random.
    pub zero_copy_bytes_per_s: f64,
    /// Seconds to page a child in besides its bytes: allocations and copies to queue.
    pub page_in_seconds: f64,
    /// Lookups a second on a resident child.
    pub device_lookups_per_s: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            host_to_device_bytes_per_s: 54e9,
            zero_copy_bytes_per_s: 21e9,
            page_in_seconds: 100e-6,
            device_lookups_per_s: 20e9,
        }
    }
}

impl CostModel {
    /// Seconds to page in an image of `image_bytes` and look `probes` keys up on the device.
    pub fn page_seconds(&self, probes: u64, image_bytes: u64) -> f64 {
        self.page_in_seconds
            + image_bytes as f64 / self.host_to_device_bytes_per_s
            + probes as f64 / self.device_lookups_per_s
    }

    /// Seconds to look `probes` keys up in place, each reading `probe_bytes` over the bus.
    pub fn probe_seconds(&self, probes: u64, probe_bytes: u64) -> f64 {
        probes as f64 * probe_bytes as f64 / self.zero_copy_bytes_per_s
    }

    /// The cheaper way to look `probes` keys up in a child on the host whose image holds
    /// `image_bytes`, each probe reading `probe_bytes`: [`Access::Probe`] where that is no
    /// dearer, else [`Access::Page`].
    pub fn choose(&self, probes: u64, probe_bytes: u64, image_bytes: u64) -> Access {
        if self.probe_seconds(probes, probe_bytes) <= self.page_seconds(probes, image_bytes) {
            Access::Probe
        } else {
            Access::Page
        }
    }

    /// The fewest probes for which paging an image of `image_bytes` is cheaper than probing
    /// it, each probe reading `probe_bytes` (`u64::MAX` when probing always wins).
    pub fn crossover(&self, probe_bytes: u64, image_bytes: u64) -> u64 {
        let per_probe =
            probe_bytes as f64 / self.zero_copy_bytes_per_s - 1.0 / self.device_lookups_per_s;
        if per_probe <= 0.0 {
            return u64::MAX;
        }
        let fixed = self.page_seconds(0, image_bytes);
        let estimate = (fixed / per_probe).floor().min(u64::MAX as f64) as u64;
        // The float estimate may be one off either way: settle it by the model itself.
        (estimate.saturating_sub(1)..=estimate.saturating_add(2))
            .find(|&probes| self.choose(probes, probe_bytes, image_bytes) == Access::Page)
            .unwrap_or(u64::MAX)
    }
}

/// The next child of a batch's visits, from `from` on, that must be paged in: the first
/// that needs the device (`needs_device`) and is not resident. The look-ahead pages it in
/// while the kernels of the child before it run.
pub fn next_page_in(
    visits: &[(usize, bool)],
    from: usize,
    is_resident: impl Fn(usize) -> bool,
) -> Option<usize> {
    visits
        .get(from..)?
        .iter()
        .find(|&&(child, needs_device)| needs_device && !is_resident(child))
        .map(|&(child, _)| child)
}

/// How the look-ahead makes room for the child it pages in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// A slot is free: nothing leaves.
    Free,
    /// This resident child leaves first (written back if changed, else dropped).
    Evict(usize),
}

/// Which children are resident, and when each was last used.
#[derive(Debug, Clone)]
pub struct Lru {
    limit: usize,
    resident: Vec<(usize, u64)>,
    clock: u64,
}

impl Lru {
    /// No child resident yet; at most `limit` at once.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            resident: Vec::with_capacity(limit),
            clock: 0,
        }
    }

    /// Whether `child` is resident.
    pub fn is_resident(&self, child: usize) -> bool {
        self.resident.iter().any(|&(c, _)| c == child)
    }

    /// The resident children.
    pub fn resident(&self) -> impl Iterator<Item = usize> + '_ {
        self.resident.iter().map(|&(c, _)| c)
    }

    /// The resident children, least recently used first: touched in this order, they keep
    /// it.
    pub fn by_age(&self) -> Vec<usize> {
        let mut resident = self.resident.clone();
        resident.sort_by_key(|&(_, used)| used);
        resident.into_iter().map(|(c, _)| c).collect()
    }

    /// The child to page out before another comes in: the least recently used, when as
    /// many as the limit are resident.
    pub fn victim(&self) -> Option<usize> {
        if self.resident.len() < self.limit {
            return None;
        }
        self.resident
            .iter()
            .min_by_key(|&&(_, used)| used)
            .map(|&(c, _)| c)
    }

    /// Room for one more child while the children `busy` says keep their slots (the one
    /// whose kernels run now, and those the batch visits next): a free slot, else the least
    /// recently used child that is not busy; `None` when every resident child is busy.
    pub fn ahead(&self, busy: impl Fn(usize) -> bool) -> Option<Ahead> {
        if self.resident.len() < self.limit {
            return Some(Ahead::Free);
        }
        self.resident
            .iter()
            .filter(|&&(c, _)| !busy(c))
            .min_by_key(|&&(_, used)| used)
            .map(|&(c, _)| Ahead::Evict(c))
    }

    /// Marks `child` used now, admitting it if it was not resident. The caller pages out
    /// [`Lru::victim`] first.
    pub fn touch(&mut self, child: usize) {
        self.clock += 1;
        match self.resident.iter_mut().find(|(c, _)| *c == child) {
            Some(entry) => entry.1 = self.clock,
            None => self.resident.push((child, self.clock)),
        }
        debug_assert!(self.resident.len() <= self.limit);
    }

    /// Forgets `child`, which has been paged out.
    pub fn evict(&mut self, child: usize) {
        self.resident.retain(|&(c, _)| c != child);
    }

    /// The page-ins ahead that bring in the children of `wanted` not resident, in order,
    /// each with the room it takes ([`Lru::ahead`]), as many as there is room for while
    /// the children `busy` says, and those of `wanted`, keep their slots. Run one after
    /// the other, each victim out before its child comes in, they keep the limit.
    pub fn moves_ahead(
        &self,
        wanted: &[usize],
        busy: impl Fn(usize) -> bool,
    ) -> Vec<(usize, Ahead)> {
        let mut after = self.clone();
        let mut moves = Vec::new();
        for &incoming in wanted {
            if after.is_resident(incoming) {
                continue;
            }
            let Some(ahead) = after.ahead(|c| busy(c) || wanted.contains(&c)) else {
                break;
            };
            if let Ahead::Evict(victim) = ahead {
                after.evict(victim);
            }
            after.touch(incoming);
            moves.push((incoming, ahead));
        }
        moves
    }
}

#[cfg(test)]
mod tests {
    use quickcheck::quickcheck;

    use super::*;

    #[test]
    fn keys_spread_evenly_over_children() {
        for children in [1u32, 7, 8, 64] {
            let mut counts = vec![0u32; children as usize];
            let keys = 1u64 << 18;
            for key in 0..keys {
                counts[child_of(key, children) as usize] += 1;
            }
            let mean = keys as f64 / f64::from(children);
            for &count in &counts {
                assert!(
                    (f64::from(count) - mean).abs() < 0.05 * mean + 64.0,
                    "{counts:?}"
                );
            }
        }
    }

    #[test]
    fn keys_equal_in_their_low_bits_spread_too() {
        let mut counts = [0u32; 8];
        for high in 0..1u64 << 16 {
            counts[child_of(high << 32, 8) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 7000), "{counts:?}");
    }

    fn scratch(scratch_bytes: u64) -> Fixed {
        Fixed {
            scratch_bytes,
            filter_bytes: 0,
        }
    }

    #[test]
    fn the_budget_must_hold_one_child_and_scratch() {
        assert!(plan(100, scratch(60), 50, 10, 8).is_err());
        assert!(plan(110, scratch(110), 50, 10, 8).is_err());
        assert!(plan(110, scratch(5), 50, 10, 8).is_err());
        assert_eq!(
            plan(110, scratch(60), 50, 10, 8),
            Ok(Plan {
                resident: 1,
                segment: 6
            })
        );
        assert_eq!(plan(u64::MAX, scratch(64), 50, 8, 8).unwrap().resident, 8);
    }

    #[test]
    fn paging_passes_take_half_the_slots() {
        assert_eq!(page_group(0), 1);
        assert_eq!(page_group(1), 1);
        assert_eq!(page_group(2), 1);
        assert_eq!(page_group(5), 2);
        assert_eq!(page_group(8), 4);
    }

    #[test]
    fn page_groups_fill_the_slots_in_order() {
        assert_eq!(
            page_groups(&[1, 4, 5, 7, 9], 2),
            vec![vec![1, 4], vec![5, 7], vec![9]]
        );
        assert_eq!(page_groups(&[3, 2], 0), vec![vec![3], vec![2]]);
        assert!(page_groups(&[], 4).is_empty());
    }

    #[test]
    fn scratch_is_a_quarter_of_a_budget_or_unbounded_without_one() {
        assert_eq!(scratch_bytes(1 << 33, None), 1 << 31);
        assert_eq!(scratch_bytes(1 << 20, None), DEFAULT_SCRATCH_BYTES);
        assert_eq!(scratch_bytes(1 << 33, Some(4096)), 4096);
        assert_eq!(scratch_bytes(u64::MAX, Some(4096)), 4096);
        let unbounded = scratch_bytes(u64::MAX, None);
        let plan = plan(u64::MAX, scratch(unbounded), 50, 42, 8).unwrap();
        assert_eq!(plan.resident, 8);
        assert_eq!(plan.segment, u32::MAX as usize);
    }

    #[test]
    fn the_filters_come_out_of_the_budget() {
        let fixed = Fixed {
            scratch_bytes: 60,
            filter_bytes: 40,
        };
        assert_eq!(plan(200, fixed, 50, 10, 8).unwrap().resident, 2);
        assert!(plan(140, fixed, 50, 10, 8).is_err());
    }

    #[test]
    fn the_undo_log_fits_in_the_room_of_a_lookups_survivors() {
        assert_eq!(scratch_per_element(4, 8), 58);
        assert_eq!(change_scratch_per_element(4, 8), 56);
        assert_eq!(scratch_per_element(8, 8), 70);
        assert_eq!(change_scratch_per_element(8, 8), 64);
        // Keys narrower than the place word would need more for the log than the
        // survivors take: the larger wins.
        assert_eq!(scratch_per_element(1, 8), change_scratch_per_element(1, 8));
    }

    #[test]
    fn filters_take_their_bits_per_key() {
        assert_eq!(filter_blocks(1 << 20, 8), 1 << 15);
        assert_eq!(filter_blocks(1, 8), 1);
        assert_eq!(filter_blocks(0, 8), 1);
        assert_eq!(filter_blocks(100, 10), 4);
        assert_eq!(filter_blocks(usize::MAX, 64), u32::MAX);
    }

    #[test]
    fn small_batches_probe_and_large_ones_page() {
        let model = CostModel::default();
        let image = 16 << 20;
        assert_eq!(model.choose(1 << 10, 72, image), Access::Probe);
        assert_eq!(model.choose(1 << 22, 72, image), Access::Page);
        let crossover = model.crossover(72, image);
        assert_eq!(model.choose(crossover, 72, image), Access::Page);
        assert_eq!(model.choose(crossover - 1, 72, image), Access::Probe);
        let free_bus = CostModel {
            zero_copy_bytes_per_s: f64::INFINITY,
            ..model
        };
        assert_eq!(free_bus.crossover(72, image), u64::MAX);
    }

    #[test]
    fn the_least_recently_used_child_goes_first() {
        let mut lru = Lru::new(2);
        assert_eq!(lru.victim(), None);
        lru.touch(3);
        lru.touch(5);
        assert_eq!(lru.victim(), Some(3));
        lru.touch(3);
        assert_eq!(lru.victim(), Some(5));
        lru.evict(5);
        assert!(!lru.is_resident(5) && lru.is_resident(3));
        assert_eq!(lru.victim(), None);
    }

    #[test]
    fn children_touched_by_age_keep_their_order() {
        let mut lru = Lru::new(3);
        for child in [4, 1, 7, 4] {
            lru.touch(child);
        }
        assert_eq!(lru.by_age(), vec![1, 7, 4]);
        for child in lru.by_age() {
            lru.touch(child);
        }
        assert_eq!(lru.by_age(), vec![1, 7, 4]);
        assert_eq!(lru.victim(), Some(1));
    }

    /// Page-ins of `batches` batches that each visit all of `children` children, under an
    /// LRU of `limit`, in child order or resident first.
    fn page_ins(
        children: usize,
        limit: usize,
        batches: usize,
        resident_first_order: bool,
    ) -> usize {
        let mut lru = Lru::new(limit);
        let mut page_ins = 0;
        for _ in 0..batches {
            let all = (0..children).map(|child| (child, ()));
            let order: Vec<usize> = if resident_first_order {
                resident_first(all, |child| lru.is_resident(child))
                    .into_iter()
                    .map(|(child, ())| child)
                    .collect()
            } else {
                (0..children).collect()
            };
            for child in order {
                if !lru.is_resident(child) {
                    if let Some(victim) = lru.victim() {
                        lru.evict(victim);
                    }
                    page_ins += 1;
                }
                lru.touch(child);
            }
        }
        page_ins
    }

    #[test]
    fn batches_visiting_resident_children_first_page_in_only_the_others() {
        // Eight children, two resident: child order misses all eight every batch.
        assert_eq!(page_ins(8, 2, 10, false), 80);
        assert_eq!(page_ins(8, 2, 10, true), 8 + 9 * 6);
        // All resident: only the first batch pages.
        assert_eq!(page_ins(4, 4, 10, true), 4);
        let order = resident_first([(3, 'a'), (1, 'b'), (5, 'c'), (0, 'd')], |c| {
            c == 5 || c == 0
        });
        assert_eq!(order, vec![(5, 'c'), (0, 'd'), (3, 'a'), (1, 'b')]);
    }

    /// A batch's visits run as the table runs them: each visit finds its child resident
    /// (paged in by the look-ahead, else at once, the least recently used out), and after
    /// its kernels are queued the look-ahead makes room for the next child to page in.
    /// Returns the page-ins the visits waited for and those the look-ahead made, or why
    /// the schedule broke the budget or evicted a child the batch still needed.
    fn pipeline(visits: &[(usize, bool)], lru: &mut Lru) -> Result<(usize, usize), String> {
        let mut waited = 0;
        let mut ahead = 0;
        let mut incoming: Option<usize> = None;
        for (at, &(child, needs_device)) in visits.iter().enumerate() {
            if let Some(next) = incoming.take() {
                lru.touch(next);
            }
            if needs_device {
                if !lru.is_resident(child) {
                    if let Some(victim) = lru.victim() {
                        lru.evict(victim);
                    }
                    waited += 1;
                }
                lru.touch(child);
            }
            let upcoming = &visits[at + 1..];
            let Some(next) = next_page_in(visits, at + 1, |c| lru.is_resident(c)) else {
                continue;
            };
            let busy = |c: usize| c == child || upcoming.iter().any(|&(u, _)| u == c);
            match lru.ahead(busy) {
                Some(Ahead::Free) => {}
                Some(Ahead::Evict(victim)) => {
                    if busy(victim) || !lru.is_resident(victim) {
                        return Err(format!("evicted {victim} at visit {at}"));
                    }
                    lru.evict(victim);
                }
                None => continue,
            }
            incoming = Some(next);
            ahead += 1;
            if lru.resident().count() + 1 > lru.limit {
                return Err(format!("over the limit at visit {at}"));
            }
        }
        Ok((waited, ahead))
    }

    #[test]
    fn the_look_ahead_pages_every_child_but_the_first_while_another_runs() {
        // Eight children each needing the device, two slots: only the first waits.
        let visits: Vec<(usize, bool)> = (0..8).map(|c| (c, true)).collect();
        assert_eq!(pipeline(&visits, &mut Lru::new(2)), Ok((1, 7)));
        // One slot: no room to look ahead; every child waits.
        assert_eq!(pipeline(&visits, &mut Lru::new(1)), Ok((8, 0)));
        // Children probed in place take no slot and are skipped over.
        let mixed = [(0, true), (1, false), (2, false), (3, true)];
        assert_eq!(next_page_in(&mixed, 1, |_| false), Some(3));
        assert_eq!(pipeline(&mixed, &mut Lru::new(2)), Ok((1, 1)));
    }

    #[test]
    fn the_look_ahead_keeps_the_running_child_and_those_to_come() {
        let mut lru = Lru::new(2);
        lru.touch(1);
        lru.touch(2);
        assert_eq!(lru.ahead(|c| c == 2), Some(Ahead::Evict(1)));
        assert_eq!(lru.ahead(|c| c == 1), Some(Ahead::Evict(2)));
        assert_eq!(lru.ahead(|c| c == 1 || c == 2), None);
        lru.evict(1);
        assert_eq!(lru.ahead(|_| true), Some(Ahead::Free));
    }

    quickcheck! {
        fn the_undo_log_leaves_the_segment_length_as_it_was(wide_keys: bool, value_bytes: u16) -> bool {
            let (key, value) = (if wide_keys { 8 } else { 4 }, usize::from(value_bytes));
            change_scratch_per_element(key, value) <= lookup_scratch_per_element(key, value)
                && scratch_per_element(key, value) == lookup_scratch_per_element(key, value)
        }

        fn resident_first_keeps_every_child_once(children: Vec<u8>, resident: Vec<u8>) -> bool {
            let items: Vec<(usize, usize)> =
                children.iter().enumerate().map(|(i, &c)| (usize::from(c), i)).collect();
            let is_resident = |c: usize| resident.iter().any(|&r| usize::from(r) == c);
            let order = resident_first(items.clone(), is_resident);
            let boundary = order.iter().take_while(|(c, _)| is_resident(*c)).count();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            let mut expected = items;
            expected.sort_unstable();
            sorted == expected
                && order[boundary..].iter().all(|(c, _)| !is_resident(*c))
                && order.windows(2).all(|w| is_resident(w[0].0) != is_resident(w[1].0) || w[0].1 < w[1].1)
        }

        fn child_is_in_range(key: u64, children: u32) -> bool {
            let children = children.max(1);
            child_of(key, children) < children
        }

        fn child_ranges_tile_the_batch(counts: Vec<u8>) -> bool {
            let counts: Vec<u32> = counts.into_iter().map(u32::from).collect();
            let ranges = child_ranges(&counts);
            let total: u32 = counts.iter().sum();
            ranges.iter().zip(&counts).all(|(r, &c)| r.len() == c as usize)
                && ranges.windows(2).all(|w| w[0].end == w[1].start)
                && ranges.last().map_or(0, |r| r.end) == total as usize
        }

        fn more_probes_never_turn_paging_into_probing(probes: u32, more: u32, bytes: u8, image: u32) -> bool {
            let model = CostModel::default();
            let (probes, bytes, image) = (u64::from(probes), u64::from(bytes), u64::from(image));
            model.choose(probes, bytes, image) == Access::Probe
                || model.choose(probes + u64::from(more), bytes, image) == Access::Page
        }

        fn larger_images_never_turn_probing_into_paging(probes: u32, bytes: u8, image: u32, more: u32) -> bool {
            let model = CostModel::default();
            let (probes, bytes, image) = (u64::from(probes), u64::from(bytes), u64::from(image));
            model.choose(probes, bytes, image) == Access::Page
                || model.choose(probes, bytes, image + u64::from(more)) == Access::Probe
        }

        fn the_crossover_splits_probing_from_paging(bytes: u8, image: u32) -> bool {
            let model = CostModel::default();
            let (bytes, image) = (u64::from(bytes).max(1), u64::from(image));
            let crossover = model.crossover(bytes, image);
            crossover == u64::MAX
                || (model.choose(crossover, bytes, image) == Access::Page
                    && (crossover == 0 || model.choose(crossover - 1, bytes, image) == Access::Probe))
        }

        fn the_look_ahead_keeps_the_budget_and_what_the_batch_needs(
            children: Vec<(u8, bool)>,
            limit: u8,
            resident: Vec<u8>
        ) -> bool {
            let limit = usize::from(limit % 4) + 1;
            let mut lru = Lru::new(limit);
            for &child in resident.iter().take(limit) {
                lru.touch(usize::from(child % 16));
            }
            // A batch visits each child once, the resident ones first.
            let mut seen = Vec::new();
            let visits: Vec<(usize, (usize, bool))> = children
                .iter()
                .map(|&(c, needs)| (usize::from(c % 16), needs))
                .filter(|&(c, _)| {
                    let new = !seen.contains(&c);
                    seen.push(c);
                    new
                })
                .map(|(c, needs)| (c, (c, needs)))
                .collect();
            let visits: Vec<(usize, bool)> = resident_first(visits, |c| lru.is_resident(c))
                .into_iter()
                .map(|(_, visit)| visit)
                .collect();
            let paged = visits.iter().filter(|&&(c, needs)| needs && !lru.is_resident(c)).count();
            match pipeline(&visits, &mut lru) {
                // Each child paged in once, by the look-ahead or at its visit; with two
                // slots or more only the first page-in of a batch waits.
                Ok((waited, ahead)) => {
                    waited + ahead == paged && (limit == 1 || waited <= 1)
                        && lru.resident().count() <= limit
                }
                Err(_) => false,
            }
        }

        fn moves_ahead_keep_the_limit_and_spare_what_the_batch_needs(
            resident: Vec<u8>,
            wanted: Vec<u8>,
            busy: Vec<u8>,
            limit: u8
        ) -> bool {
            let limit = usize::from(limit % 5) + 1;
            let mut lru = Lru::new(limit);
            for &child in &resident {
                let child = usize::from(child % 12);
                if !lru.is_resident(child) && let Some(victim) = lru.victim() {
                    lru.evict(victim);
                }
                lru.touch(child);
            }
            let wanted: Vec<usize> = wanted.iter().map(|&c| usize::from(c % 12)).collect();
            let busy: Vec<usize> = busy.iter().map(|&c| usize::from(c % 12)).collect();
            let spared = |c: usize| busy.contains(&c) || wanted.contains(&c);
            let moves = lru.moves_ahead(&wanted, |c| busy.contains(&c));
            let mut after = lru.clone();
            for &(incoming, ahead) in &moves {
                if after.is_resident(incoming) || !wanted.contains(&incoming) {
                    return false;
                }
                match ahead {
                    Ahead::Free if after.resident().count() < limit => {}
                    Ahead::Evict(victim) if after.is_resident(victim) && !spared(victim) => {
                        after.evict(victim);
                    }
                    _ => return false,
                }
                after.touch(incoming);
                if after.resident().count() > limit {
                    return false;
                }
            }
            // It stops only where no room is left, or once every wanted child is in.
            let all_in = wanted.iter().all(|&c| after.is_resident(c));
            all_in || after.ahead(spared).is_none()
        }

        fn the_lru_keeps_the_limit_and_evicts_the_oldest(uses: Vec<u8>) -> bool {
            let mut lru = Lru::new(3);
            let mut last_used: Vec<(usize, usize)> = Vec::new();
            for (time, &child) in uses.iter().enumerate() {
                let child = usize::from(child % 8);
                if !lru.is_resident(child) && let Some(victim) = lru.victim() {
                    let oldest = last_used.iter().filter(|(c, _)| lru.is_resident(*c))
                        .min_by_key(|&&(_, t)| t).map(|&(c, _)| c);
                    if oldest != Some(victim) {
                        return false;
                    }
                    lru.evict(victim);
                }
                lru.touch(child);
                last_used.retain(|&(c, _)| c != child);
                last_used.push((child, time));
                if lru.resident().count() > 3 {
                    return false;
                }
            }
            true
        }
    }
}
