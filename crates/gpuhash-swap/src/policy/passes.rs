//! The passes a batch of several segments takes over them.

use std::ops::Range;

use super::page_groups;

/// How one pass of a batch reaches a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Not in this pass: its keys are left out of the pass's partitions.
    Skip,
    /// As each segment's own counts choose: the verb on a resident child; an insert or a
    /// removal on a child on the host paged in; a lookup of a child on the host probed in
    /// place or paged in, as the cost model says for the segment.
    AsCounted,
    /// The child paged in, a lookup's whatever a segment's counts say.
    Page,
    /// A lookup of a child on the host probed in place once, at the batch's end, on the
    /// keys its filter passed in every segment, collected as the segments run
    /// ([`deferred_segment`]).
    Defer,
}

/// The passes of a batch over its segments, each saying how it reaches every child.
///
/// `keys[child]` counts the batch's keys of each child and `paged[child]` marks the
/// children on the host that the batch pages in for all its segments (a lookup's that
/// the cost model pages, every one with keys for an insert or a removal); `deferred[child]`
/// those a lookup probes in place at its end (never a paged one). With none paged, one
/// pass reaches every child as counted (the deferred ones deferred). Otherwise the
/// children not paged take a first pass (left out when none of them has keys), and the
/// paged ones follow in groups of `group` (at most the children the device holds at once:
/// half of them, [`super::page_group`]), in the order given: each group takes a pass of its
/// own over every segment, paged in once and resident throughout ([`page_groups`]). Every
/// child is reached in exactly one pass, so that a key's visits all fall in one pass, in
/// segment order.
pub fn passes(keys: &[u32], paged: &[bool], deferred: &[bool], group: usize) -> Vec<Vec<Reach>> {
    let children = keys.len();
    let paged_children: Vec<usize> = (0..children).filter(|&child| paged[child]).collect();
    let mut passes = Vec::new();
    let others_have_keys = (0..children).any(|child| !paged[child] && keys[child] > 0);
    if others_have_keys || paged_children.is_empty() {
        let first = (0..children)
            .map(|child| match (paged[child], deferred[child]) {
                (true, _) => Reach::Skip,
                (false, true) => Reach::Defer,
                (false, false) => Reach::AsCounted,
            })
            .collect();
        passes.push(first);
    }
    for children_of_group in page_groups(&paged_children, group) {
        let mut reach = vec![Reach::Skip; children];
        for child in children_of_group {
            reach[child] = Reach::Page;
        }
        passes.push(reach);
    }
    passes
}

/// The segment a lookup of several segments runs in when it defers its probes in place to
/// its end, or `None` when it does not: with `probed[child]` keys that the filters pass for
/// each child probed in place (0 for the others), each key and its place in the batch
/// (`key_bytes + 4`) are kept from its segment to the batch's end, where they are all
/// probed in one call (a flag and a value each, `1 + value_bytes`). That
/// room comes out of the scratch of `segment` elements of `element_bytes` each, which
/// keeps at least half for the segments: the segment shrinks by the kept keys' room. A
/// lookup with no child probed defers nothing.
pub fn deferred_segment(
    probed: &[u32],
    segment: usize,
    element_bytes: u64,
    key_bytes: usize,
    value_bytes: usize,
) -> Option<usize> {
    let kept: u64 = probed.iter().map(|&keys| u64::from(keys)).sum();
    if kept == 0 {
        return None;
    }
    let scratch = (segment as u64).saturating_mul(element_bytes);
    let held = kept.saturating_mul(key_bytes as u64 + 4);
    let answers = kept.saturating_mul(1 + value_bytes as u64);
    if held.saturating_add(answers) > scratch / 2 {
        return None;
    }
    Some(((scratch - held) / element_bytes.max(1)) as usize)
}

/// Device bytes a segment keeps for each key it reads, moved or not: the key's child.
pub const READ_BYTES: u64 = 4;

/// The scratch of `segment` elements of `element_bytes` each (every key read and moved),
/// and the keys of a segment that reads `len` keys and moves `moved` of them: the child of
/// each key read, and a whole element for each key moved.
pub struct SegmentRoom {
    /// Elements the scratch holds when every key read is moved: the segment as planned.
    pub segment: usize,
    /// Bytes of an element moved.
    pub element_bytes: u64,
}

impl SegmentRoom {
    fn scratch(&self) -> u64 {
        (self.segment as u64).saturating_mul(self.element_bytes)
    }

    /// Whether a segment that reads `len` keys and moves `moved` of them fits the scratch;
    /// one no longer than the planned segment always does.
    pub fn fits(&self, len: usize, moved: u64) -> bool {
        let needs = (len as u64)
            .saturating_mul(READ_BYTES)
            .saturating_add(moved.saturating_mul(self.element_bytes));
        len <= self.segment || needs <= self.scratch()
    }

    /// Keys a segment of a pass reads, when the pass moves `moved` of the batch's `keys`
    /// (a pass leaves the keys of the children it skips where they are): as many as the
    /// scratch holds if the segment moves its share of them and a quarter more, never fewer
    /// than the planned segment, nor more than the 32-bit places of a segment count. A
    /// segment that moves more than that is cut shorter once counted ([`SegmentRoom::fits`]).
    pub fn stretched(&self, moved: u64, keys: u64) -> usize {
        if keys == 0 {
            return self.segment;
        }
        let share = moved.min(keys) as f64 / keys as f64;
        let per_key = READ_BYTES as f64 + 1.25 * share * self.element_bytes as f64;
        let len = (self.scratch() as f64 / per_key) as u64;
        len.min(u64::from(u32::MAX)).max(self.segment as u64) as usize
    }

    /// The next segment of a pass over `0..len` that reads `read` keys a segment, from
    /// `start`: `count` counts a range and answers what it counted with the keys that range
    /// moves; a range that would move more than the scratch holds is counted again at half
    /// the length, and so on, never shorter than the planned segment (which always fits).
    pub fn next<C, E>(
        &self,
        (start, len): (usize, usize),
        read: usize,
        mut count: impl FnMut(Range<usize>) -> Result<(C, u64), E>,
    ) -> Result<C, E> {
        let mut take = read.min(len.saturating_sub(start));
        loop {
            let (counted, moved) = count(start..start + take)?;
            if self.fits(take, moved) {
                return Ok(counted);
            }
            take = (take / 2).max(self.segment);
        }
    }
}

#[cfg(test)]
mod tests {
    use quickcheck::quickcheck;

    use super::*;
    use Reach::{AsCounted, Defer, Page, Skip};

    #[test]
    fn resident_children_go_first_then_paged_ones_in_groups() {
        let keys = [3, 0, 5, 1, 2];
        let paged = [false, false, true, true, true];
        assert_eq!(
            passes(&keys, &paged, &[false; 5], 2),
            vec![
                vec![AsCounted, AsCounted, Skip, Skip, Skip],
                vec![Skip, Skip, Page, Page, Skip],
                vec![Skip, Skip, Skip, Skip, Page],
            ]
        );
        // No keys outside the paged children: no first pass.
        let keys = [0, 0, 5, 1, 2];
        assert_eq!(
            passes(&keys, &paged, &[false; 5], 3),
            vec![vec![Skip, Skip, Page, Page, Page]]
        );
        // Nothing paged: one pass, every child as counted.
        assert_eq!(
            passes(&keys, &[false; 5], &[false; 5], 1),
            vec![vec![AsCounted; 5]]
        );
        assert_eq!(passes(&[], &[], &[], 1), vec![Vec::<Reach>::new()]);
        // Deferred children in the first pass, deferred.
        let keys = [3, 1, 5, 1, 2];
        let deferred = [false, true, false, false, false];
        assert_eq!(
            passes(&keys, &paged, &deferred, 3),
            vec![
                vec![AsCounted, Defer, Skip, Skip, Skip],
                vec![Skip, Skip, Page, Page, Page],
            ]
        );
    }

    #[test]
    fn deferred_keys_take_at_most_half_the_scratch_from_the_segment() {
        // 1000 elements of 42 bytes: 42000 bytes, half of it 21000.
        assert_eq!(deferred_segment(&[0, 0], 1000, 42, 4, 4), None);
        // 100 keys kept (800 bytes) and their 100 answers (500 bytes): the segment loses 800.
        assert_eq!(
            deferred_segment(&[40, 0, 60], 1000, 42, 4, 4),
            Some((42000 - 800) / 42)
        );
        // 1600 keys kept (12800) and their answers (8000) fit the half; 1700 do not.
        assert_eq!(
            deferred_segment(&[800, 800], 1000, 42, 4, 4),
            Some((42000 - 12800) / 42)
        );
        assert_eq!(deferred_segment(&[850, 850], 1000, 42, 4, 4), None);
        // 2000 keys kept (16000) and 2000 answers (10000): past half, not deferred.
        assert_eq!(deferred_segment(&[2000], 1000, 42, 4, 4), None);
        assert_eq!(deferred_segment(&[u32::MAX; 4], 1000, 42, 4, 4), None);
    }

    #[test]
    fn a_pass_that_moves_a_quarter_of_its_keys_reads_longer_segments() {
        let room = SegmentRoom {
            segment: 1000,
            element_bytes: 42,
        };
        // Every key moved: the planned segment.
        assert_eq!(room.stretched(5000, 5000), 1000);
        // A quarter moved: 42000 bytes over 4 + 1.25 * 0.25 * 42 bytes a key read.
        assert_eq!(room.stretched(1250, 5000), (42000.0 / 17.125) as usize);
        // None moved: the children of the keys read alone.
        assert_eq!(room.stretched(0, 5000), 42000 / 4);
        assert_eq!(room.stretched(0, 0), 1000);
        // 2452 keys read, 1000 moved: 9808 + 42000 bytes, past the scratch.
        assert!(!room.fits(2452, 1000));
        assert!(room.fits(2452, 700));
        // No longer than planned: fits whatever it moves.
        assert!(room.fits(1000, 1000));
    }

    quickcheck! {
        fn segments_that_move_too_much_are_cut_until_they_fit(
            moves: Vec<bool>, segment: u8, read: u16
        ) -> bool {
            // Keys that move (true) and keys that stay, element 8 bytes: a segment that
            // reads n keys and moves m fits when 4n + 8m <= 8 * segment, or n <= segment.
            let room = SegmentRoom {
                segment: usize::from(segment % 16) + 1,
                element_bytes: 8,
            };
            let read = room.segment.max(usize::from(read % 64));
            let moved = |range: Range<usize>| moves[range].iter().filter(|&&m| m).count() as u64;
            let mut start = 0;
            let mut covered = 0;
            while start < moves.len() {
                let counted: Result<_, ()> = room.next((start, moves.len()), read, |range| {
                    let m = moved(range.clone());
                    Ok((range, m))
                });
                let range = counted.unwrap();
                let fits = room.fits(range.len(), moved(range.clone()));
                // As long as it may be: all it may read, the planned segment, or half of
                // a length that would not have fit.
                let most = read.min(moves.len() - start);
                let halved = [2 * range.len(), 2 * range.len() + 1]
                    .into_iter()
                    .any(|l| l <= most && !room.fits(l, moved(start..start + l)));
                let as_long = range.len() == most || range.len() <= room.segment || halved;
                if range.start != start || range.is_empty() || !fits || !as_long {
                    return false;
                }
                covered += range.len();
                start = range.end;
            }
            covered == moves.len()
        }

        fn a_stretched_segment_that_moves_its_share_fits(
            segment: u16, element_bytes: u8, moved: u32, keys: u32
        ) -> bool {
            let room = SegmentRoom {
                segment: usize::from(segment),
                element_bytes: u64::from(element_bytes % 64) + READ_BYTES,
            };
            let (moved, keys) = (u64::from(moved.min(keys)), u64::from(keys));
            let len = room.stretched(moved, keys);
            let share = (len as u64 * moved).checked_div(keys).unwrap_or(0);
            len >= room.segment && room.fits(len, share)
        }
    }

    quickcheck! {
        fn every_child_with_keys_is_reached_in_exactly_one_pass(
            children: Vec<(u8, bool)>,
            resident: u8
        ) -> bool {
            let keys: Vec<u32> = children.iter().map(|&(k, _)| u32::from(k % 4)).collect();
            // The caller pages only children with keys.
            let paged: Vec<bool> = children.iter().zip(&keys).map(|(&(_, p), &k)| p && k > 0).collect();
            let resident = usize::from(resident % 5);
            let deferred: Vec<bool> = children.iter().zip(&paged).map(|(&(k, _), &p)| !p && k % 3 == 1).collect();
            let passes = passes(&keys, &paged, &deferred, resident);
            let reached_once = (0..keys.len()).all(|child| {
                let reached = passes.iter().filter(|reach| reach[child] != Skip).count();
                reached == 1 || (reached == 0 && keys[child] == 0)
            });
            // A paged child only in a pass that pages, as many as the slots hold; the
            // others only as counted.
            let pages_fit = passes.iter().all(|reach| {
                let paging = reach.iter().filter(|&&r| r == Page).count();
                paging <= resident.max(1)
                    && reach.iter().zip(&paged).zip(&deferred).all(|((&r, &p), &d)| match r {
                        Skip => true,
                        Page => p,
                        AsCounted => !p && !d,
                        Defer => d,
                    })
            });
            let no_empty_pass = passes.len() == 1
                || passes.iter().all(|reach| {
                    reach.iter().zip(&keys).any(|(&r, &k)| r != Skip && k > 0)
                });
            reached_once && pages_fit && no_empty_pass
        }
    }
}
