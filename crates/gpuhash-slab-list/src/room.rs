//! Room for batches that link slabs, reserved against a bound kept on the host: the
//! scheme [`SlabLists`](crate::SlabLists) runs its appends on, and that the slab hash
//! tables run their inserts on.
//!
//! Every batch that may link slabs first reserves the most it may link. The host keeps an
//! upper bound of the allocator's slabs in use ([`InUseBound`]: measured at the last
//! device-wide wait, plus every reservation since) and lets a batch go with no wait while
//! that bound stays within [`safe_share`] of the slabs reserved. Only a batch that would
//! pass it takes the structure for writing, where its owner waits for the device,
//! measures the real use, and makes room (growing the allocator, or whatever else it can
//! do) before setting the bound anew ([`with_room`]).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The share of the reserved slabs that may be in use, 3/4: the device allocator reports
/// exhaustion after 64 full memory blocks in a row, and with a quarter of all slabs free
/// at least a quarter of the blocks have room.
pub fn safe_share(reserved: u64) -> u64 {
    reserved / 4 * 3
}

/// An upper bound of an allocator's slabs in use, kept on the host without waiting for
/// the device: the slabs measured at the last device-wide wait, plus every reservation
/// since.
#[derive(Debug, Default)]
pub struct InUseBound(AtomicU64);

impl InUseBound {
    /// A bound of `slabs` in use.
    pub fn new(slabs: u64) -> Self {
        Self(AtomicU64::new(slabs))
    }

    /// Sets the bound to `slabs`: after measuring (and the reservation of the batch that
    /// measured), or after emptying.
    pub fn set(&self, slabs: u64) {
        self.0.store(slabs, Ordering::Release);
    }

    /// Reserves `needed` slabs more if the bound then stays within the safe share of the
    /// `reserved` slabs; whether it did.
    pub fn try_reserve(&self, needed: u64, reserved: u64) -> bool {
        let limit = safe_share(reserved);
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(needed).filter(|&total| total <= limit)
            })
            .is_ok()
    }
}

/// The structure behind `lock`, held for reading, with room for `needed` more slabs in
/// use: at once when `without_waiting` allows it and `bound` reserves them against the
/// slabs that `reserved` reads, else after `make_room` has held it for writing (it waits
/// for the device, measures, makes room and sets `bound`). An error of `make_room` is
/// returned as it is.
pub fn with_room<'a, S, E>(
    lock: &'a RwLock<S>,
    bound: &InUseBound,
    needed: u64,
    without_waiting: bool,
    reserved: impl Fn(&S) -> u64,
    make_room: impl FnOnce(&mut S) -> Result<(), E>,
) -> Result<RwLockReadGuard<'a, S>, E> {
    if without_waiting {
        let held = lock.read();
        if bound.try_reserve(needed, reserved(&held)) {
            return Ok(held);
        }
    }
    let mut held = lock.write();
    make_room(&mut held)?;
    Ok(RwLockWriteGuard::downgrade(held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_safe_share_is_three_quarters_rounded_down_to_whole_quarters() {
        assert_eq!(safe_share(1024), 768);
        assert_eq!(safe_share(1027), 768);
        assert_eq!(safe_share(0), 0);
    }

    #[test]
    fn reservations_stop_at_the_safe_share() {
        let bound = InUseBound::new(700);
        assert!(bound.try_reserve(68, 1024));
        assert!(!bound.try_reserve(1, 1024));
        assert!(!bound.try_reserve(u64::MAX, 1024));
        bound.set(0);
        assert!(bound.try_reserve(768, 1024));
    }

    #[test]
    fn room_is_made_only_past_the_bound_or_when_asked() {
        let lock = RwLock::new(1024u64);
        let bound = InUseBound::new(0);
        let made = std::cell::Cell::new(0);
        let make = |reserved: &mut u64| {
            made.set(made.get() + 1);
            *reserved *= 2;
            bound.set(0);
            Ok::<(), ()>(())
        };
        drop(with_room(&lock, &bound, 500, true, |r| *r, make).unwrap());
        assert_eq!((made.get(), *lock.read()), (0, 1024));
        drop(with_room(&lock, &bound, 500, true, |r| *r, make).unwrap());
        assert_eq!((made.get(), *lock.read()), (1, 2048));
        drop(with_room(&lock, &bound, 1, false, |r| *r, make).unwrap());
        assert_eq!((made.get(), *lock.read()), (2, 4096));
        let failed = with_room(&lock, &bound, 1, false, |r| *r, |_| Err("no room"));
        assert_eq!(failed.err(), Some("no room"));
    }
}
