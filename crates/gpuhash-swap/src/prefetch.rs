//! The next paging pass's children paged in while this pass's segments run.
//!
//! A batch's paging passes ([`crate::passes`]) each take a group of children that the batch
//! pages in once. The groups fill half the slots ([`crate::policy::page_group`]), so that
//! the next group pages in, into the other half, while this one's segments run: after a
//! segment, the children of the next group that are not resident start moving in, one
//! after another on a thread of their own, as a visit's look-ahead does (`crate::batch`):
//! for each, first out goes the least recently used child that neither group needs (written
//! back if changed, dropped if not), then its image comes in, on streams the device lends,
//! so the bus moves the group while the SMs run the segments. The moves run in turn, each
//! making its own room, so the budget holds; a segment whose visits would page a child in
//! themselves lands them first, so that nothing else pages beside them.

use std::thread::{Scope, ScopedJoinHandle};

use gpuhash_core::Device;
use gpuhash_core::image::ProbeInPlace;

use crate::policy::Ahead;
use crate::residency::{Move, Moved, Residency};

/// The moves of the next group's children under way, if any.
pub(crate) struct Prefetch<'scope, T: ProbeInPlace> {
    under_way: Option<ScopedJoinHandle<'scope, Vec<Moved<T>>>>,
}

impl<'scope, T: ProbeInPlace + Send + 'scope> Prefetch<'scope, T> {
    /// No move under way.
    pub(crate) fn new() -> Self {
        Self { under_way: None }
    }

    /// Takes the moves under way back, waiting for them to end; the first error, once all
    /// are back.
    pub(crate) fn land(&mut self, residency: &mut Residency<T>) -> Result<(), T::Error> {
        let Some(moving) = self.under_way.take() else {
            return Ok(());
        };
        // Every move lands, whatever the one before it gave: each holds a child.
        let mut outcome = Ok(());
        for moved in joined(moving) {
            let landed = residency.land(moved);
            outcome = outcome.and(landed);
        }
        outcome
    }

    /// Takes the move back if it has ended; otherwise leaves it under way.
    fn land_if_done(&mut self, residency: &mut Residency<T>) -> Result<(), T::Error> {
        match &self.under_way {
            Some(moving) if moving.is_finished() => self.land(residency),
            _ => Ok(()),
        }
    }

    /// Lands moves that have ended, then, with none under way, starts paging in, one after
    /// another, the children of `wanted` not resident, each into a slot that no child of
    /// `busy` (nor a child moving in) holds; as many as there are such slots.
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
        let mut moves = Vec::new();
        // A victim stays on the LRU's list until its move lands: it must not be picked twice.
        let mut taken: Vec<usize> = busy.to_vec();
        let incoming: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|&c| !residency.is_resident(c))
            .collect();
        for incoming in incoming {
            let Some(ahead) = residency.ahead(|c| taken.contains(&c)) else {
                break;
            };
            if let Ahead::Evict(victim) = ahead {
                taken.push(victim);
            }
            moves.push(residency.start_move(device, ahead, incoming));
        }
        if !moves.is_empty() {
            self.under_way = Some(scope.spawn(move || moves.into_iter().map(Move::run).collect()));
        }
        Ok(())
    }
}

/// A move's outcome (or several moves'), once its thread is done. A move owns what it
/// touches and takes no lock this thread holds: it ends once its own copies and kernels
/// have run and the victim's work has (a wait bounded by
/// [`crate::SwapOptions::page_out_wait`]).
pub(crate) fn joined<R>(moving: ScopedJoinHandle<'_, R>) -> R {
    moving
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
