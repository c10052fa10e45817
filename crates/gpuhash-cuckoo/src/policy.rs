//! The host half of DyHash's resizing, pure arithmetic that runs (and is tested) on the CPU:
//! which subtable to resize, when, and which subtable a new pair starts in.
//!
//! The DyHash paper (section 5) keeps the fill factor `len / capacity` within
//! `[alpha, beta]` by doubling the smallest subtable when it rises above `beta` and halving
//! the largest when it falls below `alpha`, so that no subtable is ever more than twice
//! another. New pairs go to subtable `i` with probability proportional to
//! `n_i / C(m_i, 2)`, `n_i` its slots and `m_i` its pairs before the batch.
//!
//! Beyond the paper, a downsize never takes the table below a floor of slots
//! ([`Bounds::min_slots`]): the capacity a table was created for, kept the way a `Vec` keeps
//! its capacity, so that a table built for a large batch does not shrink after a small one
//! and pay every upsize again at the next large one.

mod batch;
pub use batch::{InsertShape, home_quarter_pairs, retries_in_place, sorts_by_partition};

/// One resize step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// Double the bucket count of this subtable.
    Up(usize),
    /// Halve the bucket count of this subtable.
    Down(usize),
    /// Double every subtable and rehash all pairs (the rehash-everything baseline).
    UpAll,
    /// Halve every subtable and rehash all pairs (the rehash-everything baseline).
    DownAll,
}

/// The fill bounds and size limits a policy decision needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Lower bound of the fill factor.
    pub alpha: f64,
    /// Upper bound of the fill factor.
    pub beta: f64,
    /// Slots of one bucket (32 for u32 keys, 16 for u64 keys).
    pub slots: u64,
    /// No subtable shrinks below this many buckets.
    pub min_buckets: u64,
    /// No downsize leaves the table fewer slots than this (its capacity floor); 0 for none.
    pub min_slots: u64,
    /// Resize by rehashing everything instead of one subtable at a time.
    pub rehash_all: bool,
}

/// Slots of a table whose subtables have these bucket counts.
pub fn capacity(buckets: &[u64], slots: u64) -> u64 {
    buckets.iter().sum::<u64>() * slots
}

/// Slots that `pairs` pairs fill to `beta`: the floor that keeps room for them.
pub fn slots_for(pairs: u64, beta: f64) -> u64 {
    (pairs as f64 / beta).ceil() as u64
}

/// `len / capacity`, 0 for an empty table.
pub fn fill(buckets: &[u64], slots: u64, len: u64) -> f64 {
    let capacity = capacity(buckets, slots);
    if capacity == 0 {
        0.0
    } else {
        len as f64 / capacity as f64
    }
}

/// The subtable an upsize doubles: the smallest, the first of equals.
pub fn upsize_target(buckets: &[u64]) -> usize {
    let smallest = *buckets.iter().min().expect("a table has subtables");
    buckets
        .iter()
        .position(|&b| b == smallest)
        .expect("the minimum is an element")
}

/// The subtable a downsize halves: the largest, the last of equals, if it can be halved
/// (even bucket count, half at least `min_buckets`).
pub fn downsize_target(buckets: &[u64], min_buckets: u64) -> Option<usize> {
    let largest = *buckets.iter().max()?;
    let index = buckets.iter().rposition(|&b| b == largest)?;
    (largest % 2 == 0 && largest / 2 >= min_buckets.max(1)).then_some(index)
}

/// The next resize that brings `len` pairs towards `[alpha, beta]`, or `None` when the
/// fill factor is within bounds (or below `alpha` with no downsize possible that would
/// neither push it above `beta` nor leave fewer than `min_slots` slots).
pub fn next_resize(buckets: &[u64], len: u64, bounds: &Bounds) -> Option<Resize> {
    let slots = bounds.slots;
    let capacity = capacity(buckets, slots) as f64;
    let len_f = len as f64;
    if len_f > bounds.beta * capacity {
        return Some(if bounds.rehash_all {
            Resize::UpAll
        } else {
            Resize::Up(upsize_target(buckets))
        });
    }
    if len_f >= bounds.alpha * capacity {
        return None;
    }
    if bounds.rehash_all {
        let halvable = buckets
            .iter()
            .all(|&b| b % 2 == 0 && b / 2 >= bounds.min_buckets.max(1));
        return (halvable && downsize_fits(capacity / 2.0, len_f, bounds))
            .then_some(Resize::DownAll);
    }
    let target = downsize_target(buckets, bounds.min_buckets)?;
    let after = capacity - (buckets[target] / 2 * slots) as f64;
    downsize_fits(after, len_f, bounds).then_some(Resize::Down(target))
}

/// Whether a downsize to `after` slots keeps `len` pairs at most at `beta` and the table at
/// its floor or above.
fn downsize_fits(after: f64, len: f64, bounds: &Bounds) -> bool {
    after >= bounds.min_slots as f64 && len <= bounds.beta * after
}

/// Bucket counts after `resize`.
pub fn apply(buckets: &[u64], resize: Resize) -> Vec<u64> {
    let mut out = buckets.to_vec();
    match resize {
        Resize::Up(i) => out[i] *= 2,
        Resize::Down(i) => out[i] /= 2,
        Resize::UpAll => out.iter_mut().for_each(|b| *b *= 2),
        Resize::DownAll => out.iter_mut().for_each(|b| *b /= 2),
    }
    out
}

/// The paper's weight of subtable `i` for new pairs: `n_i / C(m_i, 2)`, with `C(m, 2)`
/// taken as at least 1 so that an empty subtable gets weight `n_i` rather than infinity.
pub fn home_weights(buckets: &[u64], counts: &[u64], slots: u64) -> Vec<f64> {
    buckets
        .iter()
        .zip(counts)
        .map(|(&b, &m)| {
            let n = (b * slots) as f64;
            let m = m as f64;
            let pairs = (m * (m - 1.0) / 2.0).max(1.0);
            n / pairs
        })
        .collect()
}

/// Cumulative 32-bit thresholds for the kernels: a pair whose uniform 32-bit choice is
/// below `thresholds[i]` (and not below `thresholds[i - 1]`) starts in subtable `i`. The
/// last subtable of positive weight ends at `u32::MAX`; entries past `weights.len()` too.
pub fn thresholds(weights: &[f64]) -> [u32; 8] {
    let total: f64 = weights.iter().sum();
    let mut out = [u32::MAX; 8];
    let last = weights.iter().rposition(|&w| w > 0.0);
    let mut cumulative = 0.0;
    for (i, &w) in weights.iter().enumerate() {
        cumulative += w;
        out[i] = if Some(i) >= last || total <= 0.0 {
            u32::MAX
        } else {
            (cumulative / total * 4_294_967_296.0).min(4_294_967_295.0) as u32
        };
    }
    out
}

/// The 32-bit choices (inclusive) that send a key to one subtable; empty when `lo > hi`.
///
/// The thresholds move from batch to batch, and a key whose first subtable moved may rest
/// where today's probe order would not have put it. The table keeps, for each subtable,
/// the choices it has taken under every threshold an insert used (the intersection of
/// these ranges): lookups of keys whose choice lies there may stop at the first clean
/// bucket with an empty slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChoiceRange {
    /// Lowest choice in the range.
    pub lo: u32,
    /// Highest choice in the range.
    pub hi: u32,
}

impl ChoiceRange {
    /// Every choice.
    pub const ALL: Self = Self {
        lo: 0,
        hi: u32::MAX,
    };
    /// No choice.
    pub const NONE: Self = Self { lo: 1, hi: 0 };

    /// The choices in both ranges.
    pub fn intersect(self, other: Self) -> Self {
        let (lo, hi) = (self.lo.max(other.lo), self.hi.min(other.hi));
        if lo > hi { Self::NONE } else { Self { lo, hi } }
    }

    /// Whether `choice` lies in the range.
    pub fn contains(self, choice: u32) -> bool {
        self.lo <= choice && choice <= self.hi
    }
}

impl Default for ChoiceRange {
    /// Before any insert every choice is settled.
    fn default() -> Self {
        Self::ALL
    }
}

/// The choices each of the first `subtables` subtables takes under `thresholds`, read as
/// the kernels read them: the first subtable `t` with `choice < thresholds[t]`, the last
/// one taking every choice left.
pub fn choice_ranges(thresholds: &[u32; 8], subtables: usize) -> [ChoiceRange; 8] {
    let mut out = [ChoiceRange::NONE; 8];
    let mut lo = 0u64;
    for (t, range) in out.iter_mut().enumerate().take(subtables) {
        let end = if t + 1 == subtables {
            1 << 32
        } else {
            u64::from(thresholds[t]).max(lo)
        };
        if end > lo {
            *range = ChoiceRange {
                lo: lo as u32,
                hi: (end - 1) as u32,
            };
        }
        lo = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        alpha: 0.4,
        beta: 0.9,
        slots: 32,
        min_buckets: 1,
        min_slots: 0,
        rehash_all: false,
    };

    fn ratio_ok(buckets: &[u64]) -> bool {
        let min = *buckets.iter().min().unwrap();
        let max = *buckets.iter().max().unwrap();
        max <= 2 * min
    }

    #[test]
    fn upsizes_the_smallest_and_downsizes_the_largest() {
        assert_eq!(upsize_target(&[8, 4, 4]), 1);
        assert_eq!(upsize_target(&[4, 4, 4]), 0);
        assert_eq!(downsize_target(&[8, 8, 4], 1), Some(1));
        assert_eq!(downsize_target(&[4, 4, 4], 1), Some(2));
        assert_eq!(downsize_target(&[1, 1, 1], 1), None);
        assert_eq!(downsize_target(&[6, 3, 3], 4), None, "6 / 2 < min 4");
        assert_eq!(
            downsize_target(&[5, 5, 5], 1),
            None,
            "odd counts do not halve"
        );
    }

    #[test]
    fn resizes_only_out_of_bounds() {
        // capacity 3 * 4 * 32 = 384: beta * 384 = 345.6, alpha * 384 = 153.6.
        let b = [4, 4, 4];
        assert_eq!(next_resize(&b, 345, &BOUNDS), None);
        assert_eq!(next_resize(&b, 346, &BOUNDS), Some(Resize::Up(0)));
        assert_eq!(next_resize(&b, 154, &BOUNDS), None);
        assert_eq!(next_resize(&b, 153, &BOUNDS), Some(Resize::Down(2)));
        // Never a downsize that would land above beta.
        let tight = Bounds {
            alpha: 0.89,
            ..BOUNDS
        };
        assert_eq!(next_resize(&b, 300, &tight), None);
        let all = Bounds {
            rehash_all: true,
            ..BOUNDS
        };
        assert_eq!(next_resize(&b, 346, &all), Some(Resize::UpAll));
        assert_eq!(next_resize(&b, 10, &all), Some(Resize::DownAll));
        assert_eq!(next_resize(&[1, 1, 1], 0, &all), None);
    }

    /// Whether no downsize of `buckets` is allowed for `len` pairs: none can halve, or the
    /// one that could would pass beta or go below the floor.
    fn downsize_blocked(buckets: &[u64], len: u64, bounds: &Bounds) -> bool {
        let Some(target) = downsize_target(buckets, bounds.min_buckets) else {
            return true;
        };
        let after = apply(buckets, Resize::Down(target));
        fill(&after, bounds.slots, len) > bounds.beta
            || capacity(&after, bounds.slots) < bounds.min_slots
    }

    #[test]
    fn a_large_table_keeps_its_floor_after_a_small_batch() {
        // Issue 13: built for 2^22 pairs, it held 100K and halved down to its minimum.
        let built = [1u64 << 16; 3];
        let floor = capacity(&built, 32);
        let kept = Bounds {
            min_slots: floor,
            ..BOUNDS
        };
        assert_eq!(next_resize(&built, 100_000, &kept), None);
        assert_eq!(next_resize(&built, 100_000, &BOUNDS), Some(Resize::Down(2)));
        // Above the floor it shrinks back to the floor, not below.
        assert_eq!(
            next_resize(&[1 << 17, 1 << 16, 1 << 16], 100_000, &kept),
            Some(Resize::Down(0))
        );
        // Rehash-everything halves only while the half keeps the floor.
        let all = Bounds {
            rehash_all: true,
            ..kept
        };
        assert_eq!(next_resize(&built, 100_000, &all), None);
        assert_eq!(
            next_resize(&[1 << 17; 3], 100_000, &all),
            Some(Resize::DownAll)
        );
    }

    #[test]
    fn slots_for_holds_the_pairs_at_beta() {
        assert_eq!(slots_for(0, 0.9), 0);
        assert_eq!(slots_for(9, 0.9), 10);
        assert_eq!(slots_for(10, 0.9), 12);
        assert_eq!(slots_for(1 << 20, 1.0), 1 << 20);
    }

    quickcheck::quickcheck! {
        // From any reachable shape at or above the floor, repeated policy steps end within
        // bounds (or where the minimum size or the floor stops a downsize), no subtable ever
        // exceeds twice another, and no step goes below the floor.
        fn policy_converges_keeps_the_ratio_and_the_floor(
            log_start: u8,
            floor_shift: u8,
            lens: Vec<u32>
        ) -> bool {
            let mut buckets = vec![1u64 << (log_start % 8); 3];
            // 0, or the starting capacity divided by 1, 2, 4 or 8.
            let min_slots = match floor_shift % 5 {
                4 => 0,
                shift => capacity(&buckets, 32) >> shift,
            };
            let bounds = Bounds { min_slots, ..BOUNDS };
            for len in lens {
                let len = u64::from(len % 100_000);
                let mut steps = 0;
                while let Some(r) = next_resize(&buckets, len, &bounds) {
                    buckets = apply(&buckets, r);
                    steps += 1;
                    if !ratio_ok(&buckets) || capacity(&buckets, 32) < min_slots || steps > 200 {
                        return false;
                    }
                }
                let f = fill(&buckets, 32, len);
                if f > bounds.beta || (f < bounds.alpha && !downsize_blocked(&buckets, len, &bounds)) {
                    return false;
                }
            }
            true
        }

        fn choice_ranges_match_the_kernels_reading(weights: Vec<u16>, choices: Vec<u32>) -> bool {
            let weights: Vec<f64> = weights.iter().take(8).map(|&w| f64::from(w)).collect();
            let d = weights.len();
            if d == 0 {
                return true;
            }
            let t = thresholds(&weights);
            let ranges = choice_ranges(&t, d);
            let edges = [0, 1, u32::MAX - 1, u32::MAX];
            choices.iter().chain(&edges).chain(&t).all(|&r| {
                // The kernels' start_of.
                let mut first = 0;
                while first + 1 < d && r >= t[first] {
                    first += 1;
                }
                (0..8).all(|s| ranges[s].contains(r) == (s == first))
            })
        }

        fn intersection_holds_what_both_hold(a: (u32, u32), b: (u32, u32), r: u32) -> bool {
            let (a, b) = (
                ChoiceRange { lo: a.0, hi: a.1 },
                ChoiceRange { lo: b.0, hi: b.1 },
            );
            a.intersect(b).contains(r) == (a.contains(r) && b.contains(r))
        }

        fn thresholds_are_monotone_and_end_at_max(weights: Vec<u16>) -> bool {
            let weights: Vec<f64> = weights.iter().take(8).map(|&w| f64::from(w)).collect();
            if weights.is_empty() {
                return true;
            }
            let t = thresholds(&weights);
            t.windows(2).all(|w| w[0] <= w[1]) && t[weights.len() - 1] == u32::MAX
        }
    }

    #[test]
    fn weights_follow_the_paper() {
        // Equal sizes, equal counts: equal weights.
        let w = home_weights(&[4, 4, 4], &[100, 100, 100], 32);
        assert!(w.windows(2).all(|p| (p[0] - p[1]).abs() < 1e-12));
        // Twice the slots, same pairs: twice the weight (the paper's upsizing remark).
        let w = home_weights(&[8, 4, 4], &[100, 100, 100], 32);
        assert!((w[0] / w[1] - 2.0).abs() < 1e-9);
        // n / C(m, 2) exactly.
        let w = home_weights(&[4], &[10], 32);
        assert!((w[0] - 128.0 / 45.0).abs() < 1e-12);
        // Empty subtables weigh their slots.
        let w = home_weights(&[4, 4, 8], &[0, 1, 0], 32);
        assert_eq!(w, vec![128.0, 128.0, 256.0]);
    }

    #[test]
    fn thresholds_split_the_32_bit_range_by_weight() {
        let t = thresholds(&[1.0, 1.0, 2.0]);
        assert_eq!(t[0], 1 << 30);
        assert_eq!(t[1], 1 << 31);
        assert_eq!(t[2], u32::MAX);
        // An excluded last subtable: the one before it takes the rest of the range.
        let t = thresholds(&[1.0, 1.0, 0.0]);
        assert_eq!(t[0], 1 << 31);
        assert_eq!(t[1], u32::MAX);
        // An excluded first subtable takes nothing.
        let t = thresholds(&[0.0, 1.0, 1.0]);
        assert_eq!(t[0], 0);
        assert_eq!(t[1], 1 << 31);
    }

    #[test]
    fn settled_ranges_shrink_to_what_every_threshold_agreed_on() {
        // Equal thresholds, then the first subtable's share doubled (its upsize).
        let before = choice_ranges(&thresholds(&[1.0, 1.0, 2.0]), 3);
        let after = choice_ranges(&thresholds(&[2.0, 1.0, 2.0]), 3);
        let settled: Vec<ChoiceRange> = (0..3).map(|s| before[s].intersect(after[s])).collect();
        // Thresholds at 2/5 and 3/5 of the range after, 1/4 and 1/2 before.
        let (two_fifths, three_fifths) = (1_717_986_918, 2_576_980_377);
        assert_eq!(
            settled[0],
            ChoiceRange {
                lo: 0,
                hi: (1 << 30) - 1
            }
        );
        assert_eq!(
            settled[1],
            ChoiceRange {
                lo: two_fifths,
                hi: (1 << 31) - 1
            }
        );
        assert_eq!(
            settled[2],
            ChoiceRange {
                lo: three_fifths,
                hi: u32::MAX
            }
        );
        // A subtable that lost its whole range keeps nothing.
        let none = choice_ranges(&thresholds(&[1.0, 1.0, 2.0]), 3)[0].intersect(ChoiceRange {
            lo: 1 << 30,
            hi: u32::MAX,
        });
        assert_eq!(none, ChoiceRange::NONE);
    }

    #[test]
    fn one_upsize_keeps_the_fill_above_beta_d_over_d_plus_one() {
        // The paper's bound: from just above beta, one upsize leaves at least
        // beta * d / (d + 1).
        for shape in [[4u64, 4, 4], [8, 4, 4], [8, 8, 4]] {
            let cap = capacity(&shape, 32) as f64;
            let len = (0.9 * cap).ceil() as u64 + 1;
            let Some(Resize::Up(i)) = next_resize(&shape, len, &BOUNDS) else {
                panic!("must upsize {shape:?}");
            };
            let after = apply(&shape, Resize::Up(i));
            assert!(ratio_ok(&after));
            assert!(fill(&after, 32, len) >= 0.9 * 3.0 / 4.0);
        }
    }
}
