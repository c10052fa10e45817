//! The grace period between a modify's insert of new copies and its delete of the old
//! ones (the GHSH paper's temporary repeated read, across host threads): the delete waits
//! for every search that began before the new copies were all in, so that such a search,
//! which may have passed the new copy's place already, still finds the old one.

use std::collections::BTreeSet;

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

    /// Waits until every search that began before this call has ended.
    pub(crate) fn wait_for_earlier_searches(&self) {
        let mut searches = self.open.lock();
        let horizon = searches.next_ticket;
        while searches.open.range(..horizon).next().is_some() {
            self.finished.wait(&mut searches);
        }
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
                grace.wait_for_earlier_searches();
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
        grace.wait_for_earlier_searches();
    }
}
