//! A DyHash child whose insert or removal form fails once, at a call a test picks, after
//! changing the first half of its keys: a form that fails part way, as DyHash's own
//! `NotInserted` does, wherever in a batch the test wants a failure.
//!
//! The fault is armed per thread: a swap table runs a batch's visits on the thread that
//! called it, so tests that run at once do not set off each other's faults. A page-in
//! fault ([`fail_page_in_after`]) is armed for every thread, since a prefetch pages
//! children in on threads of its own: only a test that holds all the device's memory
//! (no other test runs meanwhile) arms it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gpuhash_core::image::{Image, PinnedImage, ProbeInPlace, TableImage};
use gpuhash_core::table::{DevicePairs, Key, Map, MemoryUsage, Table, Value};
use gpuhash_core::{Device, DeviceBuffer, Error, PinnedPool, Stream};
use gpuhash_cuckoo::{CuckooError, CuckooTable};

/// The form a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Insert,
    Remove,
}

thread_local! {
    /// The armed form, and how many of its calls on this thread pass before one fails.
    static FAULT: Cell<Option<(Form, usize)>> = const { Cell::new(None) };
    /// Calls of each form on this thread since [`calls_since`] last read them.
    static CALLS: Cell<[usize; 2]> = const { Cell::new([0; 2]) };
}

/// Calls of `form` on any [`Faulty`] child on this thread since the last reading (of
/// either form), which starts the count again.
pub fn calls_since(form: Form) -> usize {
    CALLS.with(|calls| calls.take()[form as usize])
}

/// Arms a fault on this thread: the call of `form` on any [`Faulty`] child after `passing`
/// calls that pass (0: the next one) changes half of its keys and fails, once.
pub fn fail_after(form: Form, passing: usize) {
    FAULT.with(|fault| fault.set(Some((form, passing))));
}

/// Disarms the fault on this thread; true when it had struck.
pub fn struck() -> bool {
    FAULT.with(|fault| fault.take().is_none())
}

/// Page-ins of faulty children, on any thread, that pass before one fails (`usize::MAX`:
/// none armed), and whether one failed since [`fail_page_in_after`] armed it.
static PAGE_IN_FAULT: AtomicUsize = AtomicUsize::new(usize::MAX);
static PAGE_IN_STRUCK: AtomicBool = AtomicBool::new(false);

/// Arms a page-in fault: after `passing` page-ins of faulty children, on any thread, one
/// fails with `OutOfDeviceMemory`, once. Hold [`gpuhash_test_support::all_memory`].
pub fn fail_page_in_after(passing: usize) {
    PAGE_IN_STRUCK.store(false, Ordering::SeqCst);
    PAGE_IN_FAULT.store(passing, Ordering::SeqCst);
}

/// Disarms the page-in fault; true when it had struck.
pub fn page_in_struck() -> bool {
    PAGE_IN_FAULT.store(usize::MAX, Ordering::SeqCst);
    PAGE_IN_STRUCK.swap(false, Ordering::SeqCst)
}

/// Whether this page-in is the one that fails (and disarms the fault if so).
fn page_in_strikes() -> bool {
    let counted = PAGE_IN_FAULT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
        (left != usize::MAX).then(|| left.checked_sub(1).unwrap_or(usize::MAX))
    });
    let strikes = counted == Ok(0);
    if strikes {
        PAGE_IN_STRUCK.store(true, Ordering::SeqCst);
    }
    strikes
}

/// Whether this call of `form` is the one that fails (and disarms the fault if so).
fn strikes(form: Form) -> bool {
    CALLS.with(|calls| {
        let mut counts = calls.get();
        counts[form as usize] += 1;
        calls.set(counts);
    });
    FAULT.with(|fault| match fault.get() {
        Some((armed, 0)) if armed == form => {
            fault.set(None);
            true
        }
        Some((armed, passing)) if armed == form => {
            fault.set(Some((armed, passing - 1)));
            false
        }
        _ => false,
    })
}

/// A DyHash table whose insert and removal forms fail when a fault strikes them.
pub struct Faulty<K: Key, V: Value>(pub CuckooTable<K, V>);

impl<K: Key, V: Value> Table for Faulty<K, V> {
    type Key = K;
    type Error = CuckooError;

    fn device(&self) -> &Device {
        self.0.device()
    }

    fn len_on(&self, stream: &Stream) -> Result<usize, CuckooError> {
        self.0.len_on(stream)
    }

    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, CuckooError> {
        self.0.memory_on(stream)
    }

    fn clear_on(&self, stream: &Stream) -> Result<(), CuckooError> {
        self.0.clear_on(stream)
    }
}

impl<K: Key, V: Value> Map for Faulty<K, V> {
    type Value = V;

    /// When the fault strikes: inserts the first half of the pairs, then fails with
    /// `NotInserted` naming the other half.
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<(), CuckooError> {
        if !strikes(Form::Insert) {
            return self.0.insert_async(stream, keys, values);
        }
        let (keys, values) = (keys.to_host(stream)?, values.to_host(stream)?);
        let half = keys.len() / 2;
        self.0.insert_async(
            stream,
            &DeviceBuffer::from_host(stream, &keys[..half])?,
            &DeviceBuffer::from_host(stream, &values[..half])?,
        )?;
        Err(CuckooError::NotInserted {
            keys: keys[half..].iter().map(|k| k.widen()).collect(),
        })
    }

    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<(), CuckooError> {
        self.0.get_async(stream, keys, found, values)
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), CuckooError> {
        self.0.contains_async(stream, keys, found)
    }

    /// When the fault strikes: removes the first half of the keys, then fails with
    /// `OutOfDeviceMemory`.
    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), CuckooError> {
        if !strikes(Form::Remove) {
            return self.0.remove_async(stream, keys, removed);
        }
        let keys = keys.to_host(stream)?;
        let half = DeviceBuffer::from_host(stream, &keys[..keys.len() / 2])?;
        let mut half_removed = DeviceBuffer::zeroed(stream, half.len())?;
        self.0.remove_async(stream, &half, &mut half_removed)?;
        Err(Error::OutOfDeviceMemory.into())
    }

    fn export_on(&self, stream: &Stream) -> Result<DevicePairs<K, V>, CuckooError> {
        self.0.export_on(stream)
    }
}

impl<K: Key, V: Value> Image for Faulty<K, V> {
    fn to_image(&self) -> Result<TableImage, CuckooError> {
        self.0.to_image()
    }

    fn from_image(device: &Device, image: &TableImage) -> Result<Self, CuckooError> {
        Ok(Self(CuckooTable::from_image(device, image)?))
    }

    fn to_pinned_image(&self, pool: &PinnedPool) -> Result<PinnedImage, CuckooError> {
        self.0.to_pinned_image(pool)
    }

    /// Fails with `OutOfDeviceMemory` when the page-in fault strikes.
    fn from_pinned_image(device: &Device, image: &PinnedImage) -> Result<Self, CuckooError> {
        if page_in_strikes() {
            return Err(Error::OutOfDeviceMemory.into());
        }
        Ok(Self(CuckooTable::from_pinned_image(device, image)?))
    }
}

impl<K: Key, V: Value> ProbeInPlace for Faulty<K, V> {
    const PROBES_IN_PLACE: bool = <CuckooTable<K, V> as ProbeInPlace>::PROBES_IN_PLACE;
    const PROBE_BYTES: u64 = <CuckooTable<K, V> as ProbeInPlace>::PROBE_BYTES;

    fn get_in_place(
        stream: &Stream,
        image: &PinnedImage,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<(), CuckooError> {
        CuckooTable::<K, V>::get_in_place(stream, image, keys, found, values)
    }
}
