//! The host's choices for the passes of one insert batch: whether it is sorted by
//! partition, which of its pairs the place pass reads a home quarter of first, and whether
//! homeless pairs are retried before the table grows. Pure arithmetic, measured on an H100
//! (docs/benchmarks/cuckoo.md) and tested here.

/// What the passes of an insert batch are chosen by (see [`sorts_by_partition`] and
/// [`home_quarter_pairs`]).
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
/// Times the L2 cache a table's lines (a packed table's bytes; a split one's twice, its
/// pairs touching two lines each) must exceed for a large batch to go in sorted.
const SORT_L2_MULTIPLE: u64 = 2;

/// Whether a batch goes in sorted by partition (the crate docs, "Batches sorted by
/// partition"): when the place pass cannot hold it in flight whole (a smaller batch is in
/// flight whole whatever its order) and the lines its pairs touch outgrow the L2 cache
/// twice over: a packed pair touches one line, a split pair two (the key's and the
/// value's). Measured on an H100 (docs/benchmarks/cuckoo.md): packed, sorted builds of
/// 2^24 to 2^26 pairs ran 1.1 to 1.4 times as fast, while a table of 1.3 or 1.7 times
/// the L2 built faster unsorted; split, a table of 1.3 times the L2 built 1.3 times as
/// fast sorted, one within it faster unsorted.
pub fn sorts_by_partition(shape: &InsertShape) -> bool {
    let lines = if shape.split { 2 } else { 1 };
    shape.pairs > shape.in_flight && lines * shape.table_bytes > SORT_L2_MULTIPLE * shape.l2_bytes
}

/// How many pairs of a batch, from its first, the place pass reads the home quarter of
/// before the home half: those that go in while the table is at most 0.6 full (the pass
/// takes a batch in order), where a pair mostly finds an empty slot in the quarter and one
/// sector a pair is read instead of two. On an H100 (docs/benchmarks/cuckoo.md) it
/// shortened builds of 2^22 to 2^26 pairs at every final load, by 2 to 14%; past fill 0.6
/// the quarter is full too often (a whole batch read so to load 0.8 was up to 3% slower).
pub fn home_quarter_pairs(shape: &InsertShape) -> u64 {
    let room = (QUARTER_FIRST_FILL * shape.capacity as f64) as u64;
    room.saturating_sub(shape.len).min(shape.pairs)
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
    fn batches_sort_past_the_pairs_in_flight_where_their_lines_outgrow_twice_the_l2() {
        // W1 at 2^24, load 0.5: 268 MB, split or packed.
        assert!(sorts_by_partition(&h100(true, 1 << 24, 0, 1 << 25, 8)));
        assert!(sorts_by_partition(&h100(false, 1 << 24, 0, 1 << 25, 8)));
        // 2^22 pairs at load 0.5: 67 MB, split only (its pairs touch 134 MB of lines).
        assert!(sorts_by_partition(&h100(true, 1 << 22, 0, 1 << 23, 8)));
        assert!(!sorts_by_partition(&h100(false, 1 << 22, 0, 1 << 23, 8)));
        // 2^22 pairs at load 0.8: 42 MB, within the L2.
        assert!(!sorts_by_partition(&h100(true, 1 << 22, 0, 5_242_880, 8)));
        // A batch held in flight whole.
        assert!(!sorts_by_partition(&h100(true, 1 << 20, 0, 1 << 27, 8)));
    }

    #[test]
    fn home_quarters_come_first_for_the_pairs_that_go_in_below_fill_0_6() {
        // 2^26 pairs at load 0.5 (1 GB): every pair; 2^22 alike.
        assert_eq!(
            home_quarter_pairs(&h100(false, 1 << 26, 0, 1 << 27, 8)),
            1 << 26
        );
        assert_eq!(
            home_quarter_pairs(&h100(false, 1 << 22, 0, 1 << 23, 8)),
            1 << 22
        );
        // At load 0.8, those up to fill 0.6: three quarters of the batch.
        let capacity = 83_886_080;
        assert_eq!(
            home_quarter_pairs(&h100(false, 1 << 26, 0, capacity, 8)),
            (0.6 * capacity as f64) as u64
        );
        // The pairs held count: a table 0.5 full takes a tenth of its slots so.
        assert_eq!(
            home_quarter_pairs(&h100(false, 1 << 24, 1 << 26, 1 << 27, 8)),
            (0.6 * f64::from(1u32 << 27)) as u64 - (1 << 26)
        );
        // Past fill 0.6 already: none.
        assert_eq!(
            home_quarter_pairs(&h100(false, 1 << 24, 7 << 24, 1 << 27, 8)),
            0
        );
    }

    #[test]
    fn homeless_pairs_are_retried_in_place_twice_below_beta() {
        assert!(retries_in_place(0, 94, 0.99, 100));
        assert!(retries_in_place(1, 94, 0.99, 100));
        assert!(!retries_in_place(2, 94, 0.99, 100));
        assert!(!retries_in_place(0, 99, 0.99, 100));
    }
}
