//! Reuse of removed slots. A delete, and a modify for the old copy of its tuple, writes
//! the removed word into a key slot; the slot's other words stay as they were, and a
//! search that read the key live a moment before may still be copying them. So a removed
//! slot is not free at once: [`HyperspaceIndex::reclaim`] frees them all together, after a
//! grace period, and later inserts take them as they take the empty slots of a chain's
//! tail (an insert of a new key still reads the whole chain first, so a freed hole before
//! a live copy of its key is never taken; see `gh_hs_insert`).
//!
//! The grace period: the reclaim holds every write off (the `writes` lock for writing),
//! waits for all work queued on the device (every removed word of a write that returned
//! early has landed), then for every search that began before (host or async, the
//! modify's [`crate::grace`] period), and only then turns removed key words into empty
//! ones, one warp a bucket in every space. A search that began after the wait never saw
//! those keys live: they were removed before it started. One that began before has
//! ended. So no search holds words of a slot that an insert may now rewrite.
//!
//! The index reclaims by itself once the deletes and modifies since the last reclaim
//! reach [`crate::HyperspaceOptions::reclaim_after`] tuples, in the batch that reaches
//! the count, after its own writes. Super nodes are never given back: a chain keeps its
//! length, and its holes take the next inserts of its bucket, so under steady churn
//! the memory stays near what the largest population needed.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Result;
use crate::index::HyperspaceIndex;

/// Reclaims below this many removed tuples would cost more than they give back.
const MIN_RECLAIM_AFTER: u64 = 4096;

/// The tuples removed since the last reclaim, and how many make the next one due.
#[derive(Debug)]
pub(crate) struct ReclaimCounter {
    removed: AtomicU64,
    after: u64,
}

impl ReclaimCounter {
    /// A counter for an index made for `capacity` tuples with the option `after`.
    pub(crate) fn new(after: Option<u64>, capacity: u64) -> Self {
        Self {
            removed: AtomicU64::new(0),
            after: reclaim_threshold(after, capacity),
        }
    }

    /// Counts `tuples` more removed; whether a reclaim is due.
    pub(crate) fn add(&self, tuples: u64) -> bool {
        if self.after == 0 || tuples == 0 {
            return false;
        }
        self.removed.fetch_add(tuples, Ordering::Relaxed) + tuples >= self.after
    }

    /// Starts counting again after a reclaim.
    pub(crate) fn reset(&self) {
        self.removed.store(0, Ordering::Relaxed);
    }
}

/// Removed tuples after which the index reclaims by itself (0: never): `after` as given,
/// else a quarter of `capacity`, at least [`MIN_RECLAIM_AFTER`].
pub(crate) fn reclaim_threshold(after: Option<u64>, capacity: u64) -> u64 {
    after.unwrap_or((capacity / 4).max(MIN_RECLAIM_AFTER))
}

impl HyperspaceIndex {
    /// Frees every removed slot (of deleted tuples, and of the old copies modifies left)
    /// for later inserts, after a grace period (see the module docs of `reclaim.rs` in
    /// the crate docs' Structure): waits for the writes under way, holds new ones off,
    /// and waits for every search that began before. Returns the slots freed, over all
    /// spaces. Searches go on meanwhile and see every live tuple as before.
    pub fn reclaim(&self) -> Result<u64> {
        let _writes = self.writes.write();
        // Every removed word queued by a write that returned early has landed.
        self.device().synchronize()?;
        self.grace.wait_for_earlier_searches()?;
        let stream = self.device().lend_stream()?;
        let mut freed = 0;
        for space in self.spaces().all() {
            freed += space.reclaim(&stream)?;
        }
        stream.synchronize()?;
        self.reclaim_counter.reset();
        Ok(freed)
    }

    /// Counts `tuples` removed by a batch that holds no lock any more, and reclaims when
    /// that makes a reclaim due.
    pub(crate) fn removed_tuples(&self, tuples: u64) -> Result<()> {
        if self.reclaim_counter.add(tuples) {
            self.reclaim()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_follows_the_option_or_the_capacity() {
        assert_eq!(reclaim_threshold(None, 1 << 24), 1 << 22);
        assert_eq!(reclaim_threshold(None, 100), MIN_RECLAIM_AFTER);
        assert_eq!(reclaim_threshold(Some(10), 1 << 24), 10);
        assert_eq!(reclaim_threshold(Some(0), 1 << 24), 0);
    }

    #[test]
    fn a_reclaim_is_due_once_the_count_is_reached_and_again_after_a_reset() {
        let counter = ReclaimCounter::new(Some(100), 0);
        assert!(!counter.add(60));
        assert!(!counter.add(0));
        assert!(counter.add(40));
        assert!(counter.add(1));
        counter.reset();
        assert!(!counter.add(99));
        assert!(counter.add(1));
    }

    #[test]
    fn zero_never_reclaims() {
        let counter = ReclaimCounter::new(Some(0), 1 << 20);
        assert!(!counter.add(u64::MAX / 2));
        assert!(!counter.add(u64::MAX / 2));
    }
}
