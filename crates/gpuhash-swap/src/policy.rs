//! The host side's pure policy: which child a key lives in, how the budgets divide, the
//! ranges of a partitioned batch, and which resident child goes out first.

use std::ops::Range;

use gpuhash_core::hash::fmix64;

use crate::layouts::GH_SWAP_SEED;

/// The child of `key` among `children`: the high 32 bits of `fmix64(key ^ seed)`, scaled by
/// a multiply-shift. The device's `gh_swap_child` computes the same.
pub fn child_of(key: u64, children: u32) -> u32 {
    let high = fmix64(key ^ GH_SWAP_SEED) >> 32;
    ((high * u64::from(children)) >> 32) as u32
}

/// Device bytes a batch element needs while a segment runs: its key and value twice (the
/// partitioned copy and the child's own), its child id and input place, and its answer
/// (flag and value) twice.
pub fn scratch_per_element(key_bytes: usize, value_bytes: usize) -> u64 {
    (2 * (key_bytes + value_bytes) + 8 + 2 * (value_bytes + 1)) as u64
}

/// How the device budget divides: children resident at once and batch elements a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Children resident at once.
    pub resident: usize,
    /// Batch elements partitioned at once.
    pub segment: usize,
}

/// The plan for a device budget, or why the budget is too small: it must hold the scratch
/// and at least one child of `child_bytes`, and the scratch at least one element.
pub fn plan(
    device_budget: u64,
    scratch_bytes: u64,
    child_bytes: u64,
    element_bytes: u64,
    children: usize,
) -> Result<Plan, String> {
    let for_children = device_budget.saturating_sub(scratch_bytes);
    let resident = (for_children / child_bytes.max(1)).min(children as u64) as usize;
    if resident == 0 {
        return Err(format!(
            "a device budget of {device_budget} bytes holds no child of {child_bytes} bytes \
             beside {scratch_bytes} bytes of scratch"
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

/// The ranges `0..len` cut into pieces of at most `segment`.
pub fn segments(len: usize, segment: usize) -> impl Iterator<Item = Range<usize>> {
    (0..len)
        .step_by(segment.max(1))
        .map(move |start| start..len.min(start + segment))
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

    #[test]
    fn the_budget_must_hold_one_child_and_scratch() {
        assert!(plan(100, 60, 50, 10, 8).is_err());
        assert!(plan(110, 110, 50, 10, 8).is_err());
        assert!(plan(110, 5, 50, 10, 8).is_err());
        assert_eq!(
            plan(110, 60, 50, 10, 8),
            Ok(Plan {
                resident: 1,
                segment: 6
            })
        );
        assert_eq!(plan(u64::MAX, 64, 50, 8, 8).unwrap().resident, 8);
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

    quickcheck! {
        fn child_is_in_range(key: u64, children: u32) -> bool {
            let children = children.max(1);
            child_of(key, children) < children
        }

        fn segments_cover_the_batch_in_order(len: u16, segment: u8) -> bool {
            let segment = usize::from(segment).max(1);
            let pieces: Vec<_> = segments(usize::from(len), segment).collect();
            pieces.iter().all(|r| !r.is_empty() && r.len() <= segment)
                && pieces.iter().flat_map(Clone::clone).eq(0..usize::from(len))
        }

        fn child_ranges_tile_the_batch(counts: Vec<u8>) -> bool {
            let counts: Vec<u32> = counts.into_iter().map(u32::from).collect();
            let ranges = child_ranges(&counts);
            let total: u32 = counts.iter().sum();
            ranges.iter().zip(&counts).all(|(r, &c)| r.len() == c as usize)
                && ranges.windows(2).all(|w| w[0].end == w[1].start)
                && ranges.last().map_or(0, |r| r.end) == total as usize
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
