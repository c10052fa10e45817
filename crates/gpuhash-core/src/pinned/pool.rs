//! A pool of pinned buffers by size class, so repeated batches do not pin anew.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::CudaContext;
use parking_lot::Mutex;

use super::PinnedBuffer;
use super::memory::Allocation;
use crate::{Device, Error, Result};

/// The smallest size class: one page.
const MIN_CLASS_BYTES: usize = 4096;

/// Reusable pinned buffers of one device, by size class (powers of two from 4 KiB up).
///
/// [`PinnedPool::take`] hands out a [`PooledPinned`] buffer from the class that fits,
/// pinning a new one only when the class has none idle; dropping it returns it to the pool
/// once its queued copies have run. A cap bounds the bytes the pool keeps pinned (lent and
/// idle together): past it, idle buffers of other classes are unpinned to make room, and
/// when that is not enough, `take` returns [`Error::OutOfPinnedMemory`].
///
/// A buffer of `n` bytes takes the class of the next power of two, so up to twice its size
/// stays pinned; a reused buffer holds what its last user left (newly pinned ones hold
/// zeros). Cheap to clone; clones share the buffers. [`Device::pinned_pool`] is the
/// device's shared pool, with no cap unless one is set.
///
/// ```no_run
/// use gpuhash_core::{Device, PinnedPool};
///
/// # fn main() -> gpuhash_core::Result<()> {
/// let device = Device::default()?;
/// let pool = PinnedPool::new(&device, Some(1 << 30)); // at most 1 GiB pinned
/// let first = pool.take::<u64>(1000)?; // pins 8 KiB
/// drop(first);
/// let second = pool.take::<u32>(2000)?; // the same 8 KiB again
/// assert_eq!(pool.pinned_bytes(), 8192);
/// # drop(second); Ok(()) }
/// ```
#[derive(Clone)]
pub struct PinnedPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    /// The context buffers are pinned in. Not the `Device`: the device holds its shared
    /// pool, and a pool holding the device would keep both alive for ever.
    context: Arc<CudaContext>,
    /// Every buffer is also mapped into the device's address space.
    mapped: bool,
    shelves: Mutex<Shelves<Allocation>>,
}

impl fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shelves = self.inner.shelves.lock();
        f.debug_struct("PinnedPool")
            .field("cap", &shelves.cap)
            .field("pinned_bytes", &shelves.pinned)
            .field("idle_bytes", &shelves.idle)
            .finish_non_exhaustive()
    }
}

impl PinnedPool {
    /// An empty pool for `device` that pins at most `cap` bytes (`None`: as much as the host
    /// gives).
    pub fn new(device: &Device, cap: Option<usize>) -> Self {
        Self::with_mapping(device.context().clone(), cap, false)
    }

    /// Like [`PinnedPool::new`], but every buffer it pins is also mapped into the device's
    /// address space, so kernels may read and write it in place
    /// ([`PinnedBuffer::mapped_address`]).
    pub fn new_mapped(device: &Device, cap: Option<usize>) -> Self {
        Self::with_mapping(device.context().clone(), cap, true)
    }

    /// The device's shared pool: mapped, so that small readbacks into its buffers are made
    /// by a kernel (`small_copy`), and uncapped.
    pub(crate) fn for_context_mapped(context: Arc<CudaContext>) -> Self {
        Self::with_mapping(context, None, true)
    }

    fn with_mapping(context: Arc<CudaContext>, cap: Option<usize>, mapped: bool) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                context,
                mapped,
                shelves: Mutex::new(Shelves::new(cap)),
            }),
        }
    }

    /// True when the pool's buffers are mapped into the device's address space.
    pub fn is_mapped(&self) -> bool {
        self.inner.mapped
    }

    /// The size class of a buffer of `bytes` bytes: the bytes a pool pins for it, the next
    /// power of two and at least 4 KiB; `None` past the largest power of two.
    pub fn class_bytes(bytes: usize) -> Option<usize> {
        bytes.max(MIN_CLASS_BYTES).checked_next_power_of_two()
    }

    /// A buffer of `len` values, idle in the pool or newly pinned. Its values are what its
    /// last user left, or zeros when newly pinned. Zero-length buffers pin nothing.
    ///
    /// Returns [`Error::OutOfPinnedMemory`] when the cap leaves no room for the buffer's
    /// class, or when the host will not pin more (after unpinning the pool's idle buffers).
    pub fn take<T: Pod>(&self, len: usize) -> Result<PooledPinned<T>> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            Error::InvalidInput(format!(
                "{len} values of {} bytes overflow usize",
                size_of::<T>()
            ))
        })?;
        if bytes == 0 {
            return Ok(PooledPinned {
                buffer: PinnedBuffer::from_memory(None, len, self.inner.mapped)?,
                class: 0,
                pool: self.clone(),
            });
        }
        let class = Self::class_bytes(bytes).ok_or(Error::OutOfPinnedMemory)?;
        let memory = self.class_memory(class)?;
        let buffer = match PinnedBuffer::from_memory(Some(memory), len, self.inner.mapped) {
            Ok(buffer) => buffer,
            Err(error) => {
                // Cannot happen with page-aligned memory and a `Pod` type; keep the
                // accounting right all the same.
                self.inner.shelves.lock().unreserve(class);
                return Err(error);
            }
        };
        Ok(PooledPinned {
            buffer,
            class,
            pool: self.clone(),
        })
    }

    /// Memory of `class` bytes, reserved in the accounting.
    fn class_memory(&self, class: usize) -> Result<Allocation> {
        let evicted = match self.inner.shelves.lock().take(class) {
            Take::Reuse(memory) => return Ok(memory),
            Take::Full => return Err(Error::OutOfPinnedMemory),
            Take::Pin { evicted } => evicted,
        };
        // Unpin outside the lock: freeing pinned memory is slow.
        drop(evicted);
        let mut pinned = Allocation::new(&self.inner.context, class, self.inner.mapped);
        if matches!(pinned, Err(Error::OutOfPinnedMemory)) {
            // The host is short of pinnable memory: give back what the pool keeps idle and
            // try once more.
            let idle = self.inner.shelves.lock().drain();
            if !idle.is_empty() {
                drop(idle);
                pinned = Allocation::new(&self.inner.context, class, self.inner.mapped);
            }
        }
        if pinned.is_err() {
            self.inner.shelves.lock().unreserve(class);
        }
        pinned
    }

    /// The cap on pinned bytes, if any.
    pub fn cap(&self) -> Option<usize> {
        self.inner.shelves.lock().cap
    }

    /// Sets the cap on pinned bytes (`None`: no cap). Idle buffers past a lower cap are
    /// unpinned at once; lent ones stay until they come back, and are unpinned then.
    pub fn set_cap(&self, cap: Option<usize>) {
        let evicted = self.inner.shelves.lock().set_cap(cap);
        drop(evicted);
    }

    /// Bytes the pool keeps pinned: lent and idle buffers together.
    pub fn pinned_bytes(&self) -> usize {
        self.inner.shelves.lock().pinned
    }

    /// Bytes of idle buffers, pinned and waiting for the next `take`.
    pub fn idle_bytes(&self) -> usize {
        self.inner.shelves.lock().idle
    }

    /// Unpins every idle buffer.
    pub fn trim(&self) {
        let idle = self.inner.shelves.lock().drain();
        drop(idle);
    }

    /// Forgets a lent buffer of `class` bytes that will not come back.
    fn forget(&self, class: usize) {
        self.inner.shelves.lock().unreserve(class);
    }

    fn give_back(&self, class: usize, memory: Allocation) {
        let evicted = self.inner.shelves.lock().put(class, memory);
        drop(evicted);
    }
}

/// A [`PinnedBuffer`] lent by a [`PinnedPool`]; used through `Deref` as the buffer itself
/// (copies take `&pooled` and `&mut pooled` where they take a pinned buffer), returned to the
/// pool on drop once its queued copies have run.
pub struct PooledPinned<T> {
    buffer: PinnedBuffer<T>,
    /// The size class, 0 for a buffer of zero bytes.
    class: usize,
    pool: PinnedPool,
}

impl<T> Deref for PooledPinned<T> {
    type Target = PinnedBuffer<T>;

    fn deref(&self) -> &PinnedBuffer<T> {
        &self.buffer
    }
}

impl<T> DerefMut for PooledPinned<T> {
    fn deref_mut(&mut self) -> &mut PinnedBuffer<T> {
        &mut self.buffer
    }
}

impl<T> Drop for PooledPinned<T> {
    fn drop(&mut self) {
        // Memory swapped in through `DerefMut` (`std::mem::swap` with another buffer) is not
        // this class's: it is unpinned, and the class's own is forgotten (its new owner
        // frees it).
        let own = self
            .buffer
            .memory
            .as_ref()
            .is_some_and(|memory| memory.bytes() == self.class);
        // `take_memory` waits for queued copies; memory that cannot be waited for is never
        // returned (it leaks, and stays counted as pinned, which it is).
        let memory = self.buffer.take_memory();
        match memory {
            Some(memory) if own => self.pool.give_back(self.class, memory),
            None if own => {}
            other => {
                drop(other);
                if self.class > 0 {
                    self.pool.forget(self.class);
                }
            }
        }
    }
}

impl<T> fmt::Debug for PooledPinned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledPinned")
            .field("buffer", &self.buffer)
            .field("class", &self.class)
            .finish_non_exhaustive()
    }
}

/// What the pool does for a `take`.
#[derive(Debug)]
enum Take<A> {
    /// Hand out this idle allocation.
    Reuse(A),
    /// Pin a new one (reserved already), after unpinning these idle ones.
    Pin { evicted: Vec<A> },
    /// The cap leaves no room.
    Full,
}

/// The pool's bookkeeping, apart from the driver: idle allocations by class, and the bytes
/// pinned against the cap. Generic so that it is tested on the CPU.
#[derive(Debug)]
struct Shelves<A> {
    idle_by_class: BTreeMap<usize, Vec<A>>,
    /// Bytes pinned: lent, idle, and reserved for allocations being pinned.
    pinned: usize,
    /// Bytes idle on the shelves.
    idle: usize,
    cap: Option<usize>,
}

impl<A> Shelves<A> {
    fn new(cap: Option<usize>) -> Self {
        Self {
            idle_by_class: BTreeMap::new(),
            pinned: 0,
            idle: 0,
            cap,
        }
    }

    fn take(&mut self, class: usize) -> Take<A> {
        if let Some(found) = self.idle_by_class.get_mut(&class).and_then(Vec::pop) {
            self.idle -= class;
            return Take::Reuse(found);
        }
        let mut evicted = Vec::new();
        if let Some(cap) = self.cap {
            // Unpinning every idle buffer must make room, or nothing is unpinned.
            let lent = self.pinned - self.idle;
            if lent.checked_add(class).is_none_or(|needed| needed > cap) {
                return Take::Full;
            }
            while self.pinned + class > cap {
                evicted.push(self.evict_largest());
            }
        }
        match self.pinned.checked_add(class) {
            Some(pinned) => self.pinned = pinned,
            None => return Take::Full,
        }
        Take::Pin { evicted }
    }

    /// Takes an idle allocation of the largest class off the shelves (there must be one).
    fn evict_largest(&mut self) -> A {
        let mut shelf = self
            .idle_by_class
            .last_entry()
            .expect("an idle allocation to evict");
        let class = *shelf.key();
        let found = shelf.get_mut().pop().expect("shelves are never empty");
        if shelf.get().is_empty() {
            shelf.remove();
        }
        self.idle -= class;
        self.pinned -= class;
        found
    }

    /// Forgets a reservation whose pinning failed.
    fn unreserve(&mut self, class: usize) {
        self.pinned -= class;
    }

    /// Puts a returned allocation on its shelf; returns what must be unpinned instead
    /// because the pool is over its cap (it, or idle ones of larger classes).
    fn put(&mut self, class: usize, found: A) -> Vec<A> {
        self.idle_by_class.entry(class).or_default().push(found);
        self.idle += class;
        self.shrink_to_cap()
    }

    fn set_cap(&mut self, cap: Option<usize>) -> Vec<A> {
        self.cap = cap;
        self.shrink_to_cap()
    }

    fn shrink_to_cap(&mut self) -> Vec<A> {
        let mut evicted = Vec::new();
        if let Some(cap) = self.cap {
            while self.pinned > cap && self.idle > 0 {
                evicted.push(self.evict_largest());
            }
        }
        evicted
    }

    /// Takes every idle allocation off the shelves.
    fn drain(&mut self) -> Vec<A> {
        let drained: Vec<A> = std::mem::take(&mut self.idle_by_class)
            .into_values()
            .flatten()
            .collect();
        self.pinned -= self.idle;
        self.idle = 0;
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_from_a_page() {
        assert_eq!(PinnedPool::class_bytes(0), Some(4096));
        assert_eq!(PinnedPool::class_bytes(1), Some(4096));
        assert_eq!(PinnedPool::class_bytes(4096), Some(4096));
        assert_eq!(PinnedPool::class_bytes(4097), Some(8192));
        assert_eq!(PinnedPool::class_bytes(3 << 20), Some(4 << 20));
        assert_eq!(PinnedPool::class_bytes(1 << 40), Some(1 << 40));
        assert_eq!(PinnedPool::class_bytes(usize::MAX), None);
        assert_eq!(PinnedPool::class_bytes((1 << 63) + 1), None);
    }

    fn pin(shelves: &mut Shelves<&'static str>, class: usize) -> Vec<&'static str> {
        match shelves.take(class) {
            Take::Pin { evicted } => evicted,
            other => panic!("expected to pin {class} bytes, got {other:?}"),
        }
    }

    #[test]
    fn returned_buffers_are_reused_by_class() {
        let mut shelves = Shelves::new(None);
        assert!(pin(&mut shelves, 4096).is_empty());
        assert!(shelves.put(4096, "a").is_empty());
        assert_eq!((shelves.pinned, shelves.idle), (4096, 4096));
        // Another class pins anew; the same class reuses.
        assert!(pin(&mut shelves, 8192).is_empty());
        assert!(matches!(shelves.take(4096), Take::Reuse("a")));
        assert_eq!((shelves.pinned, shelves.idle), (4096 + 8192, 0));
    }

    #[test]
    fn the_cap_unpins_idle_buffers_before_refusing() {
        let mut shelves = Shelves::new(Some(16384));
        pin(&mut shelves, 8192);
        pin(&mut shelves, 4096);
        assert!(shelves.put(4096, "small").is_empty());
        assert_eq!((shelves.pinned, shelves.idle), (12288, 4096));
        // 8192 lent + 4096 idle + 8192 new > cap: the idle 4096 goes.
        assert_eq!(pin(&mut shelves, 8192), vec!["small"]);
        assert_eq!((shelves.pinned, shelves.idle), (16384, 0));
        // Lent buffers cannot be unpinned: 16384 + 4096 > cap.
        assert!(matches!(shelves.take(4096), Take::Full));
        assert_eq!(shelves.pinned, 16384, "a refusal reserves nothing");
        // Once one comes back, its class is reused and others fit after unpinning it.
        assert!(shelves.put(8192, "big").is_empty());
        assert!(matches!(shelves.take(8192), Take::Reuse("big")));
        assert!(shelves.put(8192, "big").is_empty());
        assert_eq!(pin(&mut shelves, 4096), vec!["big"]);
        assert_eq!((shelves.pinned, shelves.idle), (12288, 0));
        // Larger than the cap itself.
        assert!(matches!(shelves.take(1 << 20), Take::Full));
    }

    #[test]
    fn a_refusal_unpins_nothing() {
        let mut shelves = Shelves::new(Some(16384));
        pin(&mut shelves, 8192);
        pin(&mut shelves, 4096);
        assert!(shelves.put(4096, "small").is_empty());
        // 8192 lent + 16384 > cap even with every idle buffer gone: keep the idle one.
        assert!(matches!(shelves.take(16384), Take::Full));
        assert_eq!((shelves.pinned, shelves.idle), (12288, 4096));
        assert!(matches!(shelves.take(4096), Take::Reuse("small")));
    }

    #[test]
    fn failed_pins_are_unreserved() {
        let mut shelves: Shelves<&str> = Shelves::new(Some(8192));
        pin(&mut shelves, 8192);
        shelves.unreserve(8192);
        assert_eq!(shelves.pinned, 0);
        assert!(pin(&mut shelves, 8192).is_empty());
    }

    #[test]
    fn lowering_the_cap_unpins_idle_buffers_and_returns_past_it() {
        let mut shelves = Shelves::new(None);
        pin(&mut shelves, 4096);
        pin(&mut shelves, 8192);
        pin(&mut shelves, 16384);
        assert!(shelves.put(4096, "a").is_empty());
        assert!(shelves.put(8192, "b").is_empty());
        // Down to 20480 bytes: the largest idle buffer goes first.
        assert_eq!(shelves.set_cap(Some(20480)), vec!["b"]);
        assert_eq!((shelves.pinned, shelves.idle), (20480, 4096));
        // Down to 8192: the other idle one goes too; the lent 16384 stays for now ...
        assert_eq!(shelves.set_cap(Some(8192)), vec!["a"]);
        assert_eq!((shelves.pinned, shelves.idle), (16384, 0));
        // ... and is unpinned when it comes back.
        assert_eq!(shelves.put(16384, "c"), vec!["c"]);
        assert_eq!((shelves.pinned, shelves.idle), (0, 0));
    }

    #[test]
    fn trimming_unpins_every_idle_buffer() {
        let mut shelves = Shelves::new(None);
        for class in [4096, 4096, 8192] {
            pin(&mut shelves, class);
        }
        assert!(shelves.put(4096, "a").is_empty());
        assert!(shelves.put(8192, "b").is_empty());
        let mut drained = shelves.drain();
        drained.sort_unstable();
        assert_eq!(drained, vec!["a", "b"]);
        assert_eq!((shelves.pinned, shelves.idle), (4096, 0));
        assert!(shelves.drain().is_empty());
    }
}
