//! The next paging pass's children paged in while this pass's segments run.
//!
//! A batch's paging passes ([`crate::passes`]) each take a group of children that the batch
//! pages in once. The groups fill half the slots ([`crate::policy::page_group`]), so that
//! the next group pages in, into the other half, while this one's segments run: after a
//! segment, with no move under way, the next group's children that are not resident start
//! moving in, one after the other on a thread of their own, as a visit's look-ahead does
//! (`crate::batch`): before each comes in, the least recently used child that neither group
//! needs goes out (written back if changed, dropped if not); the images come in on streams
//! the device lends, so the bus moves them while the SMs run the segments. Each victim
//! leaves before its successor comes in, so the budget holds one child more than the
//! groups at every step ([`crate::policy::Lru::moves_ahead`]). A segment whose visits
//! would page a child in themselves lands the moves first, so that no two pages overlap.

use std::thread::{Scope, ScopedJoinHandle};

use gpuhash_core::Device;
use gpuhash_core::image::ProbeInPlace;

use crate::residency::{Move, Moved, Residency};

/// The moves of the next group's children under way, if any.
pub(crate) struct Prefetch<'scope, T: ProbeInPlace> {
    under_way: Option<ScopedJoinHandle<'scope, InTurn<T>>>,
}

/// Moves run one after the other: those that ran, and those left unrun after one failed.
struct InTurn<T: ProbeInPlace> {
    moved: Vec<Moved<T>>,
    unrun: Vec<Move<T>>,
}

impl<T: ProbeInPlace> InTurn<T> {
    /// Runs `moves` in order, stopping at the first that fails.
    fn run(moves: Vec<Move<T>>) -> Self {
        let mut moved = Vec::with_capacity(moves.len());
        let mut moves = moves.into_iter();
        for next in moves.by_ref() {
            let done = next.run();
            let failed = done.failed();
            moved.push(done);
            if failed {
                break;
            }
        }
        Self {
            moved,
            unrun: moves.collect(),
        }
    }
}

impl<'scope, T: ProbeInPlace + Send + 'scope> Prefetch<'scope, T> {
    /// No move under way.
    pub(crate) fn new() -> Self {
        Self { under_way: None }
    }

    /// Takes the moves under way back, waiting for them to end: every one that ran lands
    /// (the first error is returned once all have), those left unrun leave their victims
    /// resident.
    pub(crate) fn land(&mut self, residency: &mut Residency<T>) -> Result<(), T::Error> {
        let Some(moving) = self.under_way.take() else {
            return Ok(());
        };
        let InTurn { moved, unrun } = joined(moving);
        let mut outcome = Ok(());
        for done in moved {
            let landed = residency.land(done);
            outcome = outcome.and(landed);
        }
        for move_ in unrun {
            residency.unmove(move_);
        }
        outcome
    }

    /// Takes the moves back if they have ended; otherwise leaves them under way.
    fn land_if_done(&mut self, residency: &mut Residency<T>) -> Result<(), T::Error> {
        match &self.under_way {
            Some(moving) if moving.is_finished() => self.land(residency),
            _ => Ok(()),
        }
    }

    /// Lands moves that have ended, then, with none under way, starts paging in the
    /// children of `wanted` not resident, one after the other, each into a slot that no
    /// child of `busy` or `wanted` holds; nothing when none is wanted or every slot is
    /// busy.
    pub(crate) fn next<'env>(
        &mut self,
        scope: &'scope Scope<'scope, 'env>,
        residency: &mut Residency<T>,
        device: &Device,
        wanted: &[usize],
        busy: &[usize],
    ) -> Result<(), T::Error> {
        self.land_if_done(residency)?;
        if self.under_way.is_some() {
            return Ok(());
        }
        let moves: Vec<Move<T>> = residency
            .moves_ahead(wanted, |c| busy.contains(&c))
            .into_iter()
            .map(|(incoming, ahead)| residency.start_move(device, ahead, incoming))
            .collect();
        if !moves.is_empty() {
            self.under_way = Some(scope.spawn(move || InTurn::run(moves)));
        }
        Ok(())
    }
}

/// A thread's outcome, once it is done (its panic, should it have panicked, resumed
/// here). A move owns what it touches and takes no lock this thread holds: it ends once
/// its own copies and kernels have run and the victim's work has (a wait bounded by
/// [`crate::SwapOptions::page_out_wait`]).
pub(crate) fn joined<R>(moving: ScopedJoinHandle<'_, R>) -> R {
    moving
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
