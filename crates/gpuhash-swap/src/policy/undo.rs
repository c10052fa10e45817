//! The order a failed batch is taken back in.

use std::ops::Range;

/// The undo steps of a failed batch, child by child: for each child that a logged visit
/// changed (in child order), the batch elements of each of its logged visits, the last
/// segment's first.
///
/// `child_of[i]` is the child of batch element `i`; `logged` holds, for each segment that
/// ran, in the order they ran, its range of the batch and the children whose changing
/// visits were logged there (their keys looked up before their forms ran). A batch that
/// takes several passes over its segments has an entry for each pass's segment, the
/// passes' children apart: each child's entries are in segment order. Elements of children
/// a segment did not log (visits that never ran) are left out, and so are empty parts.
///
/// A key lives in one child, so each child's steps touch no other child's keys: the
/// children can be taken back in any order (the resident ones first, each paged in once),
/// and only a child's own visits must go back last first, so that a key repeated across
/// segments ends with what it held before the batch.
pub fn undo_steps(
    child_of: &[u32],
    logged: &[(Range<usize>, Vec<usize>)],
    children: usize,
) -> Vec<(usize, Vec<Vec<usize>>)> {
    let mut steps: Vec<Vec<Vec<usize>>> = vec![Vec::new(); children];
    for (segment, visited) in logged.iter().rev() {
        let mut elements: Vec<Option<Vec<usize>>> = vec![None; children];
        for &child in visited {
            elements[child] = Some(Vec::new());
        }
        for i in segment.clone() {
            if let Some(mine) = &mut elements[child_of[i] as usize] {
                mine.push(i);
            }
        }
        for &child in visited {
            steps[child].extend(elements[child].take().filter(|part| !part.is_empty()));
        }
    }
    steps
        .into_iter()
        .enumerate()
        .filter(|(_, steps)| !steps.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use quickcheck::quickcheck;

    use super::*;

    #[test]
    fn each_child_takes_back_its_own_visits_last_segment_first() {
        //              0  1  2  3  4  5  6  7
        let child_of = [0, 1, 0, 2, 1, 1, 0, 2];
        // Segment 0..4 logged children 0, 1 and 2; segment 4..8 only child 1 (its visit
        // of child 0 never ran, nor did child 2's).
        let logged = vec![(0..4, vec![1, 0, 2]), (4..8, vec![1])];
        assert_eq!(
            undo_steps(&child_of, &logged, 3),
            vec![
                (0, vec![vec![0, 2]]),
                (1, vec![vec![4, 5], vec![1]]),
                (2, vec![vec![3]]),
            ]
        );
        assert!(undo_steps(&child_of, &[], 3).is_empty());
    }

    #[test]
    fn passes_over_the_same_segments_take_back_each_childs_own() {
        //              0  1  2  3  4  5  6  7
        let child_of = [0, 1, 0, 2, 1, 1, 0, 2];
        // A first pass over both segments for child 0, then one for children 1 and 2 that
        // failed in the second segment before child 2's visit.
        let logged = vec![
            (0..4, vec![0]),
            (4..8, vec![0]),
            (0..4, vec![1, 2]),
            (4..8, vec![1]),
        ];
        assert_eq!(
            undo_steps(&child_of, &logged, 3),
            vec![
                (0, vec![vec![6], vec![0, 2]]),
                (1, vec![vec![4, 5], vec![1]]),
                (2, vec![vec![3]]),
            ]
        );
    }

    quickcheck! {
        fn every_logged_element_goes_back_once_in_its_child_after_later_segments(
            children: Vec<u8>,
            cuts: Vec<u8>,
            unlogged: Vec<(u8, u8)>
        ) -> bool {
            let count = 5;
            let child_of: Vec<u32> = children.iter().map(|&c| u32::from(c) % count).collect();
            // Segments end to end over the elements; some children of some segments
            // never ran.
            let mut logged = Vec::new();
            let mut start = 0;
            for (s, &cut) in cuts.iter().enumerate() {
                let end = (start + usize::from(cut % 8)).min(child_of.len());
                let visited: Vec<usize> = (0..count as usize)
                    .filter(|&c| !unlogged.contains(&(s as u8, c as u8)))
                    .collect();
                logged.push((start..end, visited));
                start = end;
            }
            let steps = undo_steps(&child_of, &logged, count as usize);
            let segment_of = |i: usize| logged.iter().position(|(r, _)| r.contains(&i));
            let mut seen = vec![0; child_of.len()];
            for (child, parts) in &steps {
                let mut last_segment = usize::MAX;
                for part in parts {
                    let Some(segment) = part.first().and_then(|&i| segment_of(i)) else {
                        return false;
                    };
                    // Strictly earlier segments, each a child's part of one segment.
                    if segment >= last_segment || part.iter().any(|&i| segment_of(i) != Some(segment)) {
                        return false;
                    }
                    last_segment = segment;
                    for &i in part {
                        if child_of[i] as usize != *child {
                            return false;
                        }
                        seen[i] += 1;
                    }
                }
            }
            (0..child_of.len()).all(|i| {
                let logged_here = segment_of(i)
                    .is_some_and(|s| logged[s].1.contains(&(child_of[i] as usize)));
                seen[i] == usize::from(logged_here)
            })
        }
    }
}
