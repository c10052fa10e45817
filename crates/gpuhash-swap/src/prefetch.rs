//! The next paging pass's children paged in while this pass's segments run.
//!
//! A batch's paging passes ([`crate::passes`]) each take a group of children that the batch
//! pages in once. The groups fill half the slots ([`crate::policy::page_group`]), so that
//! the next group pages in, into the other half, while this one's segments run: after each
//! segment, a child of the next group that is not resident starts moving in, on a thread
//! of its own, as a visit's look-ahead does (`crate::batch`): first out goes the least
//! recently used child that neither group needs (written back if changed, dropped if
//! not), then the image comes in, on streams the device lends, so the bus moves it while
//! the SMs run the segments. One move at a time, as the budget holds one child more than
//! the groups; a segment whose visits would page a child in themselves lands the move
//! first, so that no two moves overlap and the budget holds.

use std::thread::{Scope, ScopedJoinHandle};

use gpuhash_core::Device;
use gpuhash_core::image::ProbeInPlace;

use crate::residency::{Moved, Residency};

/// The move of the next group's child under way, if any.
pub(crate) struct Prefetch<'scope, T: ProbeInPlace> {
    under_way: Option<ScopedJoinHandle<'scope, Moved<T>>>,
}

impl<'scope, T: ProbeInPlace + Send + 'scope> Prefetch<'scope, T> {
    /// No move under way.
    pub(crate) fn new() -> Self {
        Self { under_way: None }
    }

    /// Takes the move under way back, waiting for it to end.
    pub(crate) fn land(&mut self, residency: &mut Residency<T>) -> Result<(), T::Error> {
        match self.under_way.take() {
            Some(moving) => residency.land(joined(moving)),
            None => Ok(()),
        }
    }

    /// Takes the move back if it has ended; otherwise leaves it under way.
    fn land_if_done(&mut self, residency: &mut Residency<T>) -> Result<(), T::Error> {
        match &self.under_way {
            Some(moving) if moving.is_finished() => self.land(residency),
            _ => Ok(()),
        }
    }

    /// Lands a move that has ended, then, with none under way, starts paging in the first
    /// child of `wanted` not resident, into a slot that no child of `busy` holds; nothing
    /// when none is wanted or every slot is busy.
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
        let Some(&incoming) = wanted.iter().find(|&&c| !residency.is_resident(c)) else {
            return Ok(());
        };
        if let Some(ahead) = residency.ahead(|c| busy.contains(&c)) {
            let moving = residency.start_move(device, ahead, incoming);
            self.under_way = Some(scope.spawn(move || moving.run()));
        }
        Ok(())
    }
}

/// A move's outcome, once its thread is done. The move owns what it touches and takes no
/// lock this thread holds: it ends once its own copies and kernels have run and the
/// victim's work has (a wait bounded by [`crate::SwapOptions::page_out_wait`]).
pub(crate) fn joined<T: ProbeInPlace>(moving: ScopedJoinHandle<'_, Moved<T>>) -> Moved<T> {
    moving
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
