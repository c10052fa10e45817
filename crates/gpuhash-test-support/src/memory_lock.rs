//! The lock that keeps a test that fills the device's memory apart from the others, made
//! so that misuse fails at once and a stuck holder fails the waiters, instead of a test
//! binary that never finishes.
//!
//! A plain reader-writer lock hangs in two ways that tests fall into: a thread that holds
//! the shared guard and asks for the whole device waits for itself (say, a test that takes
//! [`shared_memory`](crate::shared_memory) and then runs a suite that takes
//! [`all_memory`](crate::all_memory)), and once a writer waits, a second shared guard on a
//! thread that holds one waits behind the writer, which waits for that thread. So each
//! thread counts the guards it holds: asking for the whole device while holding a guard
//! panics at once, a shared guard inside another one never waits, a shared guard inside the
//! whole device is free, and every other wait is bounded, panicking with the lock's name
//! when a holder has not let go in time.

use std::cell::Cell;
use std::time::Duration;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A reader-writer lock over the device's memory that fails loudly where a plain one hangs
/// (see the module docs). One per process: the guards a thread holds are counted per
/// thread, not per lock.
pub(crate) struct MemoryLock {
    lock: RwLock<()>,
    /// The longest a thread waits for the lock before it panics.
    wait: Duration,
}

/// The guards of a [`MemoryLock`] the current thread holds.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    shared: u32,
    all: u32,
}

thread_local! {
    static HELD: Cell<Held> = const { Cell::new(Held { shared: 0, all: 0 }) };
}

/// A guard of the device-memory lock, from [`shared_memory`](crate::shared_memory) or
/// [`all_memory`](crate::all_memory): the lock is let go when it is dropped.
#[must_use = "the lock is let go as soon as the guard is dropped"]
pub struct MemoryGuard {
    _hold: Hold,
    all: bool,
}

enum Hold {
    Shared {
        _guard: RwLockReadGuard<'static, ()>,
    },
    All {
        _guard: RwLockWriteGuard<'static, ()>,
    },
    /// A shared guard taken on a thread that holds the whole device: nothing to hold.
    Within,
}

impl Drop for MemoryGuard {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut now = held.get();
            if self.all {
                now.all -= 1;
            } else {
                now.shared -= 1;
            }
            held.set(now);
        });
    }
}

impl MemoryLock {
    /// A lock whose waits panic after `wait`.
    pub(crate) const fn new(wait: Duration) -> Self {
        Self {
            lock: RwLock::new(()),
            wait,
        }
    }

    /// A shared guard: many threads at once, none while a thread holds [`MemoryLock::all`].
    /// Never waits on a thread that holds a guard already.
    pub(crate) fn shared(&'static self) -> MemoryGuard {
        let held = HELD.with(Cell::get);
        let hold = if held.all > 0 {
            Hold::Within
        } else if held.shared > 0 {
            // This thread's guard keeps writers out, so this does not wait; a plain read
            // would queue behind a waiting writer, which waits for this thread.
            Hold::Shared {
                _guard: self.lock.read_recursive(),
            }
        } else {
            Hold::Shared {
                _guard: self
                    .lock
                    .try_read_for(self.wait)
                    .unwrap_or_else(|| self.timed_out("shared_memory")),
            }
        };
        HELD.with(|h| {
            h.set(Held {
                shared: held.shared + 1,
                ..held
            });
        });
        MemoryGuard {
            _hold: hold,
            all: false,
        }
    }

    /// The whole device: no other guard meanwhile. Panics at once on a thread that holds a
    /// guard already (it would wait for itself).
    pub(crate) fn all(&'static self) -> MemoryGuard {
        let held = HELD.with(Cell::get);
        assert!(
            held.shared == 0 && held.all == 0,
            "all_memory() on a thread that holds {} shared and {} whole device-memory guards: \
             it would wait for itself for ever (drop them first; the conformance suites take \
             their own guards)",
            held.shared,
            held.all
        );
        let guard = self
            .lock
            .try_write_for(self.wait)
            .unwrap_or_else(|| self.timed_out("all_memory"));
        HELD.with(|h| h.set(Held { all: 1, ..held }));
        MemoryGuard {
            _hold: Hold::All { _guard: guard },
            all: true,
        }
    }

    fn timed_out(&self, what: &str) -> ! {
        panic!(
            "{what}(): waited {} s for the device-memory lock; a test that holds it has not \
             finished (hung?)",
            self.wait.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn lock(wait: Duration) -> &'static MemoryLock {
        Box::leak(Box::new(MemoryLock::new(wait)))
    }

    /// Runs `f` on a thread of its own, whose guard counts start at zero.
    fn on_thread<R: Send + 'static>(
        f: impl FnOnce() -> R + Send + 'static,
    ) -> std::thread::Result<R> {
        std::thread::spawn(f).join()
    }

    #[test]
    fn the_whole_device_under_a_shared_guard_panics_at_once() {
        let lock = lock(Duration::from_secs(60));
        let started = Instant::now();
        let outcome = on_thread(move || {
            let _shared = lock.shared();
            let _all = lock.all();
        });
        assert!(outcome.is_err());
        assert!(started.elapsed() < Duration::from_secs(10));
        // The panic let the shared guard go: the whole device is free again.
        on_thread(move || drop(lock.all())).unwrap();
    }

    #[test]
    fn a_nested_shared_guard_does_not_queue_behind_a_waiting_writer() {
        let lock = lock(Duration::from_secs(60));
        let outer = lock.shared();
        let writer = std::thread::spawn(move || drop(lock.all()));
        // Let the writer start waiting for this thread's guard.
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let inner = lock.shared();
        assert!(started.elapsed() < Duration::from_secs(10));
        drop((inner, outer));
        writer.join().unwrap();
    }

    #[test]
    fn a_shared_guard_within_the_whole_device_is_free() {
        let lock = lock(Duration::from_secs(60));
        on_thread(move || {
            let all = lock.all();
            let shared = lock.shared();
            drop((shared, all));
            drop(lock.all());
        })
        .unwrap();
    }

    #[test]
    fn a_holder_that_never_lets_go_fails_the_waiter() {
        let lock = lock(Duration::from_millis(100));
        let _held = lock.shared();
        let waiter = on_thread(move || drop(lock.all()));
        let why = waiter.unwrap_err();
        let message = why.downcast_ref::<String>().expect("a formatted panic");
        assert!(message.contains("device-memory lock"), "{message}");
    }
}
