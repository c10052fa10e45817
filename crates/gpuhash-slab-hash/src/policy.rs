//! How a multimap insert pass splits its work between the tiled pass and the grouped
//! appends (`cuda-src/slab_hash/slab_runs.cuh`): pure functions of what the host knows,
//! tested on the CPU.
//!
//! The tiled pass stores a pair in the first [`walk_slabs`] slabs of its list where they
//! have room, and defers it otherwise; it never extends a list. The grouped appends group
//! the deferred pairs by bucket and walk each bucket's list once for all of them. So a pair
//! costs at most `walk_slabs` slab reads in the tiled pass, whatever the copies of its key,
//! and a bucket at most one walk of its list a pass in the appends.

/// The fewest slabs a tiled multimap insert reads before it defers: its list's head and
/// one slab more.
pub const MIN_WALK_SLABS: u32 = 2;

/// The most slabs a tiled multimap insert reads before it defers. A list longer than this
/// holds many copies of some key (or far more entries than its table was sized for), and
/// its inserts cost one walk a pass in the grouped appends instead of one walk each.
pub const MAX_WALK_SLABS: u32 = 8;

/// Slabs a tiled multimap insert reads before it defers to the grouped appends, for a
/// table that will hold at most `entries` entries over `lists` lists (its buckets, the
/// reserved-key ones included), `per_slab` entries to a slab.
///
/// A list of a uniform table holds about `entries / lists` entries, which take
/// `ceil(entries / lists / per_slab)` slabs (at least the head): the tiled pass walks them
/// as a map insert does (8 slabs in flight a warp) and one slab more, for the spread of a
/// Poisson law around its mean, within [`MIN_WALK_SLABS`] and [`MAX_WALK_SLABS`]. A pair
/// whose list is longer (its key, or a key sharing its bucket, has many copies) defers,
/// as does every pair that finds a full tail. An unknown bound (`u64::MAX`, a table
/// loaded from an image) walks the most.
pub fn walk_slabs(entries: u64, lists: u64, per_slab: u64) -> u32 {
    let per_list = entries.div_ceil(lists.max(1));
    let mean_slabs = per_list.div_ceil(per_slab.max(1)).max(1);
    mean_slabs
        .saturating_add(1)
        .clamp(u64::from(MIN_WALK_SLABS), u64::from(MAX_WALK_SLABS)) as u32
}

/// Slots of the grouped appends' table of buckets for a batch of `batch` pairs into
/// `lists` lists: a power of two at least twice the buckets the deferred pairs can fall
/// in (at most one a pair, at most every list), so that linear probing stays short and
/// always ends.
pub fn run_slots(batch: usize, lists: u64) -> usize {
    let buckets = (batch as u64).min(lists).max(1);
    (2 * buckets).next_power_of_two() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_walk_their_mean_and_one_slab_more() {
        // An empty table, and one at the mean of a load-0.5 table: one slab a list.
        assert_eq!(walk_slabs(0, 1000, 15), MIN_WALK_SLABS);
        assert_eq!(walk_slabs(7_500, 1000, 15), 2);
        // 40 pairs a list take 3 slabs: 4 read before deferring.
        assert_eq!(walk_slabs(40_000, 1000, 15), 4);
        // 7 wide entries a slab: 40 a list take 6 slabs.
        assert_eq!(walk_slabs(40_000, 1000, 7), 7);
    }

    #[test]
    fn long_lists_and_unknown_bounds_walk_the_most() {
        // 100 keys of 167K copies each in 16 lists: the hyperspace index's columns.
        assert_eq!(walk_slabs(1 << 24, 16, 15), MAX_WALK_SLABS);
        assert_eq!(walk_slabs(u64::MAX, 3, 15), MAX_WALK_SLABS);
        assert_eq!(walk_slabs(u64::MAX, 1 << 20, 1), MAX_WALK_SLABS);
    }

    #[test]
    fn degenerate_sizes_do_not_divide_by_zero() {
        assert_eq!(walk_slabs(10, 0, 15), 2);
        assert_eq!(walk_slabs(10, 10, 0), 2);
    }

    #[test]
    fn run_slots_cover_the_batch_or_every_list() {
        assert_eq!(run_slots(0, 100), 2);
        assert_eq!(run_slots(1, 100), 2);
        assert_eq!(run_slots(3, 100), 8);
        assert_eq!(run_slots(1 << 20, 3), 8);
        assert_eq!(run_slots(1 << 24, (1 << 24) / 9 + 3), 1 << 22);
    }

    quickcheck::quickcheck! {
        fn walks_stay_within_their_bounds(entries: u64, lists: u64, per_slab: u8) -> bool {
            let walk = walk_slabs(entries, lists, u64::from(per_slab));
            (MIN_WALK_SLABS..=MAX_WALK_SLABS).contains(&walk)
        }

        fn more_entries_never_walk_less(entries: u32, more: u32, lists: u16, per_slab: u8) -> bool {
            let (lists, per_slab) = (u64::from(lists), u64::from(per_slab));
            let entries = u64::from(entries);
            walk_slabs(entries, lists, per_slab)
                <= walk_slabs(entries + u64::from(more), lists, per_slab)
        }

        fn slots_are_twice_the_buckets_that_can_come(batch: u32, lists: u32) -> bool {
            let slots = run_slots(batch as usize, u64::from(lists)) as u64;
            let buckets = u64::from(batch).min(u64::from(lists)).max(1);
            slots.is_power_of_two() && slots >= 2 * buckets && slots < 4 * buckets
        }
    }
}
