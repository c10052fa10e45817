//! The host's choices for the passes of one insert batch: whether it is sorted by
//! partition, how its place pass reads a pair's first bucket, and whether homeless pairs
//! are retried before the table grows. Pure arithmetic, measured on an H100
//! (docs/benchmarks/cuckoo.md) and tested here.

/// What the passes of an insert batch are chosen by (see [`sorts_by_partition`] and
/// [`reads_home_quarter_first`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InsertShape {
    /// Whether buckets keep keys and values apart (split) rather than packed.
    pub split: bool,
    /// Pairs of the batch.
    pub pairs: u64,
    /// Pairs the lock-free place pass holds in flight at once on this device.
    pub in_flight: u64,
    /// Pairs the table holds before the batch.
    pub len: u64,
    /// Slots of the table.
    pub capacity: u64,
    /// Device bytes of the table's subtables and shared words.
    pub table_bytes: u64,
    /// Bytes of the device's L2 cache.
    pub l2_bytes: u64,
}

/// The fill factor up to which the place pass reads home quarters first.
const QUARTER_FIRST_FILL: f64 = 0.6;
/// Times the L2 cache from which a table's place pass reads home quarters first.
const QUARTER_FIRST_L2_MULTIPLE: u64 = 4;

/// Whether a batch goes in sorted by partition (the crate docs, "Batches sorted by
/// partition"): when its pairs touch two lines each (split buckets: the key's and the
/// value's), the place pass cannot hold it in flight whole (a smaller batch is in flight
/// whole whatever its order) and the table outgrows the L2 cache (one that fits is read
/// from L2 in any order). A packed pair touches one line: sorted, its pass ran no faster on
/// an H100 and the sort cost a fifth of the insert.
pub fn sorts_by_partition(shape: &InsertShape) -> bool {
    shape.split && shape.pairs > shape.in_flight && shape.table_bytes > shape.l2_bytes
}

/// Whether the place pass reads a pair's home quarter before its home half: while the
/// table, with the batch, stays at most 0.6 full, a pair mostly finds an empty slot in the
/// quarter, and one sector a pair is read instead of two. Where the table spans 4 times the
/// L2 cache or more, that sector comes from DRAM: there it shortened a build of 2^26 pairs
/// at load 0.5 by 9 to 11% on an H100, of 2^24 by 0 to 4% (docs/benchmarks/cuckoo.md); at
/// load 0.8 it was up to 3% slower, and a table near the L2's size built no faster.
pub fn reads_home_quarter_first(shape: &InsertShape) -> bool {
    let fill = (shape.len + shape.pairs) as f64 / shape.capacity.max(1) as f64;
    fill <= QUARTER_FIRST_FILL && shape.table_bytes >= QUARTER_FIRST_L2_MULTIPLE * shape.l2_bytes
}

/// Rounds of an insert's clean-up whose homeless pairs are first retried without an upsize.
const IN_PLACE_RETRIES: usize = 2;

/// Whether the homeless pairs of clean-up round `round` are retried as the table is, with
/// fresh random swaps, rather than after an upsize: in the first two rounds, while the table
/// would hold `len` pairs (its own and the homeless ones) below `beta` of its `capacity`. A
/// random walk that ran out of swaps mostly finds room on another try there, and growing a
/// table short of its bound for a few pairs would double a subtable for nothing.
pub fn retries_in_place(round: usize, len: u64, beta: f64, capacity: u64) -> bool {
    round < IN_PLACE_RETRIES && (len as f64) < beta * capacity as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H100: 50 MiB of L2, about 2.2M pairs in flight.
    fn h100(split: bool, pairs: u64, len: u64, capacity: u64, pair_bytes: u64) -> InsertShape {
        InsertShape {
            split,
            pairs,
            in_flight: 2_162_688,
            len,
            capacity,
            table_bytes: capacity * pair_bytes,
            l2_bytes: 50 << 20,
        }
    }

    #[test]
    fn only_split_batches_past_the_l2_and_the_pairs_in_flight_sort() {
        // W1 at 2^24, load 0.5: 268 MB of split buckets sort, packed ones never.
        assert!(sorts_by_partition(&h100(true, 1 << 24, 0, 1 << 25, 8)));
        assert!(!sorts_by_partition(&h100(false, 1 << 24, 0, 1 << 25, 8)));
        // 2^22 pairs at load 0.8: 42 MB, within the L2.
        assert!(!sorts_by_partition(&h100(true, 1 << 22, 0, 5_242_880, 8)));
        // A batch held in flight whole.
        assert!(!sorts_by_partition(&h100(true, 1 << 20, 0, 1 << 27, 8)));
    }

    #[test]
    fn home_quarters_come_first_at_low_fill_in_tables_far_past_the_l2() {
        // 2^26 pairs at load 0.5 (1 GB): quarter first; at 0.8 not.
        assert!(reads_home_quarter_first(&h100(
            false,
            1 << 26,
            0,
            1 << 27,
            8
        )));
        assert!(!reads_home_quarter_first(&h100(
            false,
            1 << 26,
            0,
            83_886_080,
            8
        )));
        // 2^22 pairs at load 0.5: 67 MB, under 4 times the L2.
        assert!(!reads_home_quarter_first(&h100(
            false,
            1 << 22,
            0,
            1 << 23,
            8
        )));
        // The pairs held count: half full before, the batch takes it past 0.6.
        assert!(!reads_home_quarter_first(&h100(
            false,
            1 << 24,
            1 << 26,
            1 << 27,
            8
        )));
    }

    #[test]
    fn homeless_pairs_are_retried_in_place_twice_below_beta() {
        assert!(retries_in_place(0, 94, 0.99, 100));
        assert!(retries_in_place(1, 94, 0.99, 100));
        assert!(!retries_in_place(2, 94, 0.99, 100));
        assert!(!retries_in_place(0, 99, 0.99, 100));
    }
}
