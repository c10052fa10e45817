//! Regrouping, and what feeds it: the index records the fields of every search into its
//! query history and keeps the population of its tuples ([`crate::observations`]); the
//! cost model routes searches by them (`search.rs`); [`HyperspaceIndex::regroup`]
//! rebuilds the subspaces from the key index while searches go on;
//! [`HyperspaceIndex::regroup_from_history`] asks [`crate::regroup::RegroupPolicy::choose`] for them; and
//! under [`crate::HyperspaceOptions::adaptive`] a search that brings the history's count
//! to a look asks [`crate::regroup::RegroupPolicy::advise`] and regroups after its batch.
//!
//! One regroup at a time: a manual one waits for another to end, an automatic one gives
//! way (the searching thread goes on; the next look comes `check_every` searches later).
//! The spaces chosen by the policy go to [`HyperspaceIndex::regroup`] as
//! [`Subspaces::Shapes`], with the policy's coordinate bits (from the tuples held, the
//! attributes' distinct values and the target chain length), not the index's own bits rule.

use std::sync::Arc;

use crate::build::tuple_rows;
use crate::cost::{DistinctSketch, Population};
use crate::history::QueryHistory;
use crate::index::HyperspaceIndex;
use crate::observations::{Advice, SKETCH_HASHES, sketch_column, sketch_columns, sketch_pieces};
use crate::options::Subspaces;
use crate::query::Query;
use crate::shape::SpaceShape;
use crate::space::Space;
use crate::{HyperspaceError, Result};

/// Attribute words of a write past which its columns are sketched on threads of their own,
/// beside the device work.
const SKETCH_BESIDE_ABOVE: usize = 1 << 16;

/// What adaptive regrouping did so far.
#[derive(Debug, Clone, Default)]
pub struct AdaptiveReport {
    /// Looks at the query history (each `check_every` searches, when no other regroup was
    /// under way).
    pub checks: u64,
    /// Regroups the looks led to.
    pub regroups: u64,
    /// Regroups that failed (the subspaces stayed as they were; the search that ran it
    /// still answered).
    pub failures: u64,
    /// The error of the last failed regroup.
    pub last_error: Option<HyperspaceError>,
}

impl HyperspaceIndex {
    /// The history of the fields searches named (each query of [`HyperspaceIndex::search`]
    /// and [`HyperspaceIndex::search_on`] counts one search; gets do not count).
    pub fn query_history(&self) -> QueryHistory {
        self.observations.lock().history().clone()
    }

    /// What the index estimates of its tuples, for the cost model: their count and the
    /// distinct values of each attribute (see `src/observations.rs` for the estimate's
    /// limits: distinct values only grow until a clear).
    pub fn population(&self) -> Population {
        self.observations.lock().population().clone()
    }

    /// What adaptive regrouping did so far.
    pub fn adaptive_report(&self) -> AdaptiveReport {
        self.report.lock().clone()
    }

    /// Rebuilds the attribute subspaces as `subspaces` groups them, from the key index
    /// (which never changes), and swaps them in. Searches go on meanwhile, on the old
    /// subspaces until the swap (each search keeps the subspaces it began with); inserts,
    /// modifies and deletes wait for the regroup, so that none lands in subspaces about to
    /// be replaced: the new subspaces hold exactly what the key index holds. Groups take
    /// their coordinate bits from [`crate::HyperspaceOptions::bits_for`] at the larger of
    /// the capacity and the tuples held, dealt by the attributes' distinct values as the
    /// index estimates them when the key spread is on
    /// ([`crate::HyperspaceOptions::key_spread`]); [`Subspaces::Shapes`] keep theirs. On an error
    /// (out of device memory, options the index cannot take) the old subspaces stay.
    pub fn regroup(&self, subspaces: Subspaces) -> Result<()> {
        let _one_at_a_time = self.regrouping.lock();
        self.rebuild(subspaces)
    }

    /// Regroups to the subspaces [`crate::regroup::RegroupPolicy::choose`] finds cheapest
    /// for the query history and the population, under
    /// [`crate::HyperspaceOptions::regrouping`], when they differ from the current ones
    /// (groups or coordinate bits; their order aside) and cost less under the history
    /// than they do. Returns the new subspaces, or `None` when it left them (nothing
    /// searched yet, the best already there, or current subspaces whose bits, from the
    /// index's own rule, make them as cheap).
    pub fn regroup_from_history(&self) -> Result<Option<Vec<SpaceShape>>> {
        let _one_at_a_time = self.regrouping.lock();
        let (history, population) = {
            let observations = self.observations.lock();
            let history = observations.history().clone();
            (history, observations.population().clone())
        };
        let shapes = self.space_shapes();
        let chosen = self.policy.choose(&history, &shapes[0], &population)?;
        let cost = |subspaces: &[SpaceShape]| {
            self.policy
                .cost(&history, &shapes[0], subspaces, &population)
        };
        // The current subspaces may have bits the policy would not give (the index's own
        // rule): they are kept when they cost no more (with nothing searched, nothing
        // costs anything).
        if same_spaces(&chosen, &shapes[1..]) || cost(&chosen) >= cost(&shapes[1..]) {
            return Ok(None);
        }
        self.rebuild(Subspaces::Shapes(chosen.clone()))?;
        Ok(Some(chosen))
    }

    /// Records a search batch's fields in the history: the population to route it by, and
    /// a look at the history when adaptive regrouping is on, the search may `take_look`,
    /// and one falls due.
    pub(crate) fn observe_searches(
        &self,
        queries: &[Query],
        take_look: bool,
    ) -> Result<(Population, Option<Advice>)> {
        let mut observations = self.observations.lock();
        observations.record_searches(queries.iter().map(Query::fields))?;
        let advice = if self.adaptive && take_look {
            observations.advice_due(&self.policy)
        } else {
            None
        };
        Ok((observations.population().clone(), advice))
    }

    /// Asks the policy whether to regroup, and does, after a search batch on its thread;
    /// gives way if another regroup is under way. The outcome goes to the report.
    pub(crate) fn adapt(&self, mut advice: Advice) {
        let Some(_one_at_a_time) = self.regrouping.try_lock() else {
            return;
        };
        let shapes = self.space_shapes();
        let proposal = self.policy.advise(
            &mut advice.history,
            &shapes[0],
            &shapes[1..],
            &advice.population,
        );
        let outcome = proposal
            .map_err(HyperspaceError::from)
            .and_then(|proposal| {
                proposal
                    .map(|chosen| self.rebuild(Subspaces::Shapes(chosen)))
                    .transpose()
            });
        let mut report = self.report.lock();
        report.checks += 1;
        match outcome {
            Ok(None) => {}
            Ok(Some(())) => report.regroups += 1,
            Err(error) => {
                report.failures += 1;
                report.last_error = Some(error);
            }
        }
    }

    /// Runs `write`, which puts a batch of `n` tuples in (or new copies of them), and on
    /// success merges sketches of its `attributes` columns into the population, with `added`
    /// tuples more (counted from what `write` answered). A large batch is sketched on
    /// threads of their own while `write` runs.
    pub(crate) fn observed_write<T>(
        &self,
        attributes: &[u32],
        n: usize,
        write: impl FnOnce() -> Result<T>,
        added: impl FnOnce(&T) -> u64,
    ) -> Result<T> {
        let (answer, sketches) = if attributes.len() > SKETCH_BESIDE_ABOVE {
            sketched_beside(attributes, n, write)
        } else {
            let answer = write();
            (answer, sketch_columns(attributes, n))
        };
        let answer = answer?;
        self.observations.lock().added(added(&answer), &sketches);
        Ok(answer)
    }

    /// Rebuilds the subspaces as `subspaces` groups them (the caller holds the regroup
    /// lock): see [`HyperspaceIndex::regroup`].
    fn rebuild(&self, subspaces: Subspaces) -> Result<()> {
        let _writes = self.writes.write();
        let mut options = self.options();
        options.subspaces = subspaces;
        let stream = self.device().lend_stream()?;
        let tuples = self.key_index.export(&stream)?;
        let capacity = self.capacity.max(tuples.len() as u64);
        let mut population = self.population();
        population.tuples = tuples.len() as u64;
        let rows = tuple_rows(&stream, &tuples)?;
        let mut fresh = Vec::new();
        for shape in options
            .shapes_for(self.attribute_count(), capacity, &population)?
            .into_iter()
            .skip(1)
        {
            let space = Space::new(
                self.device(),
                shape,
                options.seed,
                self.attribute_count(),
                capacity,
                options.variant,
            )?;
            space.build(&stream, &tuples, &rows)?;
            fresh.push(space);
        }
        stream.synchronize()?;
        *self.subspaces.write() = Arc::new(fresh);
        *self.options.write() = options;
        // Writes are held out: the export counted the tuples exactly.
        self.observations.lock().set_tuples(tuples.len() as u64);
        Ok(())
    }
}

/// `write()`, with a sketch of each of the `n`-long columns of `attributes` made
/// meanwhile: each column cut into [`sketch_pieces`] pieces, a thread a piece, the pieces'
/// sketches merged (a merge keeps the smallest hashes of both, so it equals the sketch of
/// the whole column). A column of 2^24 values of 10^4 distinct took one thread about as
/// long as a bulk build's whole device work.
pub(crate) fn sketched_beside<T>(
    attributes: &[u32],
    n: usize,
    write: impl FnOnce() -> T,
) -> (T, Vec<DistinctSketch>) {
    let columns = attributes.len() / n.max(1);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let piece = n.div_ceil(sketch_pieces(n, columns, threads)).max(1);
    std::thread::scope(|scope| {
        let sketchers: Vec<Vec<_>> = attributes
            .chunks(n.max(1))
            .map(|column| {
                column
                    .chunks(piece)
                    .map(|part| scope.spawn(move || sketch_column(part)))
                    .collect()
            })
            .collect();
        let answer = write();
        let sketches = sketchers
            .into_iter()
            .map(|pieces| {
                let mut sketch = DistinctSketch::new(SKETCH_HASHES);
                for piece in pieces {
                    let part = piece
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    sketch.merge(&part);
                }
                sketch
            })
            .collect();
        (answer, sketches)
    })
}

/// Whether two lists of subspaces are the same spaces, in any order.
fn same_spaces(left: &[SpaceShape], right: &[SpaceShape]) -> bool {
    let sorted = |spaces: &[SpaceShape]| {
        let mut dimensions: Vec<_> = spaces.iter().map(|s| s.dimensions().to_vec()).collect();
        dimensions.sort();
        dimensions
    };
    sorted(left) == sorted(right)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Field;

    fn shape(dimensions: &[(Field, u8)]) -> SpaceShape {
        SpaceShape::new(dimensions.to_vec()).expect("a shape")
    }

    #[test]
    fn spaces_compare_whatever_their_order() {
        let a = shape(&[(Field::Attribute(0), 4), (Field::Attribute(2), 4)]);
        let b = shape(&[(Field::Attribute(1), 8)]);
        let b_wider = shape(&[(Field::Attribute(1), 9)]);
        let a_swapped = shape(&[(Field::Attribute(2), 4), (Field::Attribute(0), 4)]);
        assert!(same_spaces(
            &[a.clone(), b.clone()],
            &[b.clone(), a.clone()]
        ));
        assert!(!same_spaces(&[a.clone(), b.clone()], &[a.clone(), b_wider]));
        assert!(!same_spaces(&[a.clone(), b.clone()], &[a_swapped, b]));
        let twice = [a.clone(), a.clone()];
        assert!(!same_spaces(std::slice::from_ref(&a), &twice));
    }

    #[test]
    fn columns_sketched_beside_a_write_are_the_columns_sketched_alone() {
        let n = 5000;
        let attributes: Vec<u32> = (0..3 * n as u32).map(|i| i % 777).collect();
        let (answer, sketches) = sketched_beside(&attributes, n, || 42);
        assert_eq!(answer, 42);
        assert_eq!(sketches, sketch_columns(&attributes, n));
        assert_eq!(sketches.len(), 3);
    }
}
