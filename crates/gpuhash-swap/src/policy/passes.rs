//! The passes a batch of several segments takes over them.

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
}

/// The passes of a batch over its segments, each saying how it reaches every child.
///
/// `keys[child]` counts the batch's keys of each child and `paged[child]` marks the
/// children on the host that the batch pages in for all its segments (a lookup's that
/// the cost model pages, every one with keys for an insert or a removal). With none
/// paged, one pass reaches every child as counted. Otherwise the children not paged take a
/// first pass (left out when none of them has keys), and the paged ones follow in groups
/// of `resident`, the children the device holds at once, in the order given: each group
/// takes a pass of its own over every segment, paged in once and resident throughout
/// ([`page_groups`]). Every child is reached in exactly one pass, so that a key's visits
/// all fall in one pass, in segment order.
pub fn passes(keys: &[u32], paged: &[bool], resident: usize) -> Vec<Vec<Reach>> {
    let children = keys.len();
    let paged_children: Vec<usize> = (0..children).filter(|&child| paged[child]).collect();
    let mut passes = Vec::new();
    let others_have_keys = (0..children).any(|child| !paged[child] && keys[child] > 0);
    if others_have_keys || paged_children.is_empty() {
        let first = paged
            .iter()
            .map(|&paged| match paged {
                true => Reach::Skip,
                false => Reach::AsCounted,
            })
            .collect();
        passes.push(first);
    }
    for group in page_groups(&paged_children, resident) {
        let mut reach = vec![Reach::Skip; children];
        for child in group {
            reach[child] = Reach::Page;
        }
        passes.push(reach);
    }
    passes
}

#[cfg(test)]
mod tests {
    use quickcheck::quickcheck;

    use super::*;
    use Reach::{AsCounted, Page, Skip};

    #[test]
    fn resident_children_go_first_then_paged_ones_in_groups() {
        let keys = [3, 0, 5, 1, 2];
        let paged = [false, false, true, true, true];
        assert_eq!(
            passes(&keys, &paged, 2),
            vec![
                vec![AsCounted, AsCounted, Skip, Skip, Skip],
                vec![Skip, Skip, Page, Page, Skip],
                vec![Skip, Skip, Skip, Skip, Page],
            ]
        );
        // No keys outside the paged children: no first pass.
        let keys = [0, 0, 5, 1, 2];
        assert_eq!(
            passes(&keys, &paged, 3),
            vec![vec![Skip, Skip, Page, Page, Page]]
        );
        // Nothing paged: one pass, every child as counted.
        assert_eq!(passes(&keys, &[false; 5], 1), vec![vec![AsCounted; 5]]);
        assert_eq!(passes(&[], &[], 1), vec![Vec::<Reach>::new()]);
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
            let passes = passes(&keys, &paged, resident);
            let reached_once = (0..keys.len()).all(|child| {
                let reached = passes.iter().filter(|reach| reach[child] != Skip).count();
                reached == 1 || (reached == 0 && keys[child] == 0)
            });
            // A paged child only in a pass that pages, as many as the slots hold; the
            // others only as counted.
            let pages_fit = passes.iter().all(|reach| {
                let paging = reach.iter().filter(|&&r| r == Page).count();
                paging <= resident.max(1)
                    && reach.iter().zip(&paged).all(|(&r, &p)| match r {
                        Skip => true,
                        Page => p,
                        AsCounted => !p,
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
