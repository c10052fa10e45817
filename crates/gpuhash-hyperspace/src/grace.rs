//! The grace period between a modify's insert of new copies and its delete of the old
//! ones (the GHSH paper's temporary repeated read, across host threads): the delete waits
//! for every search that began before the new copies were all in, so that such a search,
//! which may have passed the new copy's place already, still finds the old one. A search
//! that returns before its kernels have run (an async search) leaves an event behind, and
//! the wait waits for that event too.

use std::collections::BTreeSet;
use std::sync::Arc;

use cudarc::driver::CudaEvent;
use cudarc::driver::sys::CUevent_flags;
use gpuhash_core::Stream;
use parking_lot::{Condvar, Mutex};

/// The searches in flight, by ticket, in the order they began.
#[derive(Debug, Default)]
pub(crate) struct GracePeriod {
    open: Mutex<Searches>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct Searches {
    next_ticket: u64,
    open: BTreeSet<u64>,
    /// Searches whose host side has ended, by ticket, with an event after their last
    /// kernel (those found complete are dropped as new ones come).
    queued: Vec<(u64, Arc<CudaEvent>)>,
}

/// A search in flight; it ends when dropped.
#[derive(Debug)]
pub(crate) struct SearchTicket<'a> {
    grace: &'a GracePeriod,
    ticket: u64,
}

impl GracePeriod {
    /// Registers a search before its first kernel is queued.
    pub(crate) fn begin_search(&self) -> SearchTicket<'_> {
        let mut searches = self.open.lock();
        let ticket = searches.next_ticket;
        searches.next_ticket += 1;
        searches.open.insert(ticket);
        SearchTicket {
            grace: self,
            ticket,
        }
    }

    /// Waits until every search that began before this call has ended, kernels included.
    pub(crate) fn wait_for_earlier_searches(&self) -> gpuhash_core::Result<()> {
        let mut searches = self.open.lock();
        let horizon = searches.next_ticket;
        while searches.open.range(..horizon).next().is_some() {
            self.finished.wait(&mut searches);
        }
        let queued: Vec<Arc<CudaEvent>> = searches
            .queued
            .iter()
            .filter(|(ticket, _)| *ticket < horizon)
            .map(|(_, event)| Arc::clone(event))
            .collect();
        drop(searches);
        for event in queued {
            event.synchronize()?;
        }
        Ok(())
    }
}

impl SearchTicket<'_> {
    /// Ends the search once the work queued on `stream` so far has run: a modify's wait
    /// waits for it on the device.
    pub(crate) fn end_after(self, stream: &Stream) -> gpuhash_core::Result<()> {
        let event = stream
            .cuda_stream()
            .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))?;
        let mut searches = self.grace.open.lock();
        searches.queued.retain(|(_, event)| !event.is_complete());
        searches.queued.push((self.ticket, Arc::new(event)));
        // The ticket, dropped on return, ends the host side.
        Ok(())
    }
}

impl Drop for SearchTicket<'_> {
    fn drop(&mut self) {
        self.grace.open.lock().open.remove(&self.ticket);
        self.grace.finished.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_wait_outlasts_earlier_searches_and_ignores_later_ones() {
        let grace = GracePeriod::default();
        let earlier_ended = AtomicBool::new(false);
        let waiting = AtomicBool::new(false);
        let earlier = grace.begin_search();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                waiting.store(true, Ordering::SeqCst);
                grace
                    .wait_for_earlier_searches()
                    .expect("no events to wait for");
                assert!(earlier_ended.load(Ordering::SeqCst));
            });
            while !waiting.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(50));
            // Begins after the wait did: the wait must not hold on for it.
            let _later = grace.begin_search();
            std::thread::sleep(Duration::from_millis(20));
            earlier_ended.store(true, Ordering::SeqCst);
            drop(earlier);
            waiter
                .join()
                .expect("the waiter returns while the later search runs");
        });
        grace
            .wait_for_earlier_searches()
            .expect("no events to wait for");
    }
}
