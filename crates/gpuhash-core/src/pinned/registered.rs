//! The caller's own memory, page-locked in place: copies to and from it run as DMA at the
//! bus's speed with no staging copy through a pinned buffer.
//!
//! [`Device::register`] pins a slice the caller already has (with `cuMemHostRegister`) and
//! returns a [`HostRegistered`] that keeps the slice borrowed (or owned) while it is pinned
//! and unpins it on drop. The registered slice is used as a slice (`Deref`, and `DerefMut`
//! for a mutable one): pass it to the host forms of the [`table`](crate::table) contract
//! (`insert`, `get_into`, ...) or to [`DeviceBuffer::copy_from_host`](crate::DeviceBuffer::copy_from_host) and
//! [`DeviceBuffer::copy_to_host`](crate::DeviceBuffer::copy_to_host), and they copy straight from and to it.
//!
//! ## How a copy finds out that memory is registered
//!
//! The device keeps the address ranges registered through it. A copy from or to a host
//! slice that lies within one of them is queued as one copy and waited for before the call
//! returns; any other slice is staged as before. The ranges only choose the path: a copy
//! that waits before returning is correct for any host memory, pinned or not, so a stale
//! answer could only cost speed, never safety.
//!
//! Every gpuhash copy from or to caller memory has finished when its call returns, so the
//! caller may write, read or drop the slice right after. Dropping a registration also waits
//! for the device to finish its queued work before unpinning.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut, Range};

use bytemuck::Pod;
use cudarc::driver::DriverError;
use cudarc::driver::sys::{self, cudaError_enum};

use crate::{Device, Error, Result};

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for &[T] {}
    impl<T> Sealed for &mut [T] {}
    impl<T> Sealed for Vec<T> {}
    impl<T> Sealed for Box<[T]> {}
}

/// Host memory that [`Device::register`] can pin in place: a slice borrowed shared
/// (`&[T]`, read only) or mutably (`&mut [T]`), or owned (`Vec<T>`, `Box<[T]>`). Each keeps
/// its values at one address for as long as it lives, which registration relies on.
pub trait Registrable: sealed::Sealed {
    /// The values' type.
    type Value: Pod;
    /// The values.
    fn values(&self) -> &[Self::Value];
}

/// [`Registrable`] memory the caller may also write through the registration.
pub trait RegistrableMut: Registrable {
    /// The values, to write.
    fn values_mut(&mut self) -> &mut [Self::Value];
}

impl<T: Pod> Registrable for &[T] {
    type Value = T;
    fn values(&self) -> &[T] {
        self
    }
}

impl<T: Pod> Registrable for &mut [T] {
    type Value = T;
    fn values(&self) -> &[T] {
        self
    }
}

impl<T: Pod> RegistrableMut for &mut [T] {
    fn values_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<T: Pod> Registrable for Vec<T> {
    type Value = T;
    fn values(&self) -> &[T] {
        self
    }
}

impl<T: Pod> RegistrableMut for Vec<T> {
    fn values_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<T: Pod> Registrable for Box<[T]> {
    type Value = T;
    fn values(&self) -> &[T] {
        self
    }
}

impl<T: Pod> RegistrableMut for Box<[T]> {
    fn values_mut(&mut self) -> &mut [T] {
        self
    }
}

/// Caller memory page-locked in place by [`Device::register`]; used as the slice itself
/// (`Deref<Target = [T]>`, and `DerefMut` for `&mut [T]`, `Vec<T>` and `Box<[T]>`).
/// Copies through gpuhash from and to it go straight over the bus. Unpinned on drop, after
/// the device has finished its queued work.
///
/// ```no_run
/// use gpuhash_core::{Device, DeviceBuffer};
///
/// # fn main() -> gpuhash_core::Result<()> {
/// let device = Device::default()?;
/// let stream = device.new_stream()?;
/// let mut answers = vec![0u32; 1 << 20];
/// let mut answers = device.register(&mut answers[..])?;
/// let on_device = DeviceBuffer::<u32>::zeroed(&stream, 1 << 20)?;
/// on_device.copy_to_host(&stream, &mut answers)?; // one DMA into the caller's memory
/// assert_eq!(answers[7], 0);
/// # Ok(()) }
/// ```
pub struct HostRegistered<S: Registrable> {
    memory: S,
    /// The addresses pinned; empty (and never passed to the driver) for zero bytes.
    addresses: Range<usize>,
    device: Device,
}

impl Device {
    /// Page-locks `memory` in place, so that copies from and to it run at the bus's speed,
    /// until the returned registration is dropped.
    ///
    /// Returns [`Error::OutOfPinnedMemory`] when the host will not lock that much memory, and
    /// [`Error::InvalidInput`] when some of it is registered already (a range registered
    /// twice, or one that shares a page with memory registered before). Empty memory pins
    /// nothing.
    pub fn register<S: Registrable>(&self, memory: S) -> Result<HostRegistered<S>> {
        let values = memory.values();
        let start = values.as_ptr() as usize;
        let addresses = start..start + size_of_val(values);
        if !addresses.is_empty() {
            self.context().bind_to_thread()?;
            // SAFETY: the range is the memory of a live slice, which `memory` keeps at this
            // address until the registration drops (the `Registrable` types never move
            // their values); registering only locks its pages and does not write it.
            unsafe {
                sys::cuMemHostRegister_v2(
                    values.as_ptr().cast_mut().cast(),
                    addresses.len(),
                    sys::CU_MEMHOSTREGISTER_PORTABLE,
                )
            }
            .result()
            .map_err(registration_error)?;
            self.registered_ranges().insert(addresses.clone());
        }
        Ok(HostRegistered {
            memory,
            addresses,
            device: self.clone(),
        })
    }

    /// True when all of `host` lies in memory registered through this device, so a copy
    /// from or to it runs straight over the bus.
    pub fn is_registered<T>(&self, host: &[T]) -> bool {
        let start = host.as_ptr() as usize;
        self.registered_ranges()
            .covers(&(start..start + size_of_val(host)))
    }
}

impl<S: Registrable> Drop for HostRegistered<S> {
    fn drop(&mut self) {
        if self.addresses.is_empty() {
            return;
        }
        self.device.registered_ranges().remove(self.addresses.start);
        let context = self.device.context();
        // Errors are kept in the context, as cudarc does for its own drops. Waiting first
        // makes sure no queued copy still uses the memory once it is unpinned.
        context.record_err(context.bind_to_thread());
        context.record_err(context.synchronize());
        // SAFETY: the address is the one registered in `Device::register`, unregistered
        // once, here; `memory` still holds the values there (fields drop after this).
        let unpinned = unsafe { sys::cuMemHostUnregister(self.addresses.start as *mut _) };
        context.record_err(unpinned.result());
    }
}

impl<S: Registrable> Deref for HostRegistered<S> {
    type Target = [S::Value];

    fn deref(&self) -> &[S::Value] {
        self.memory.values()
    }
}

impl<S: RegistrableMut> DerefMut for HostRegistered<S> {
    fn deref_mut(&mut self) -> &mut [S::Value] {
        self.memory.values_mut()
    }
}

impl<S: Registrable> fmt::Debug for HostRegistered<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegistered")
            .field("len", &self.memory.values().len())
            .field("bytes", &self.addresses.len())
            .finish_non_exhaustive()
    }
}

/// The error of a failed `cuMemHostRegister`.
fn registration_error(error: DriverError) -> Error {
    match error.0 {
        cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfPinnedMemory,
        cudaError_enum::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED => Error::InvalidInput(
            "register: the memory, or a page it shares, is registered already".into(),
        ),
        _ => Error::Driver(error),
    }
}

/// The host address ranges registered through one device, disjoint (the driver refuses
/// overlaps), by first address.
#[derive(Debug, Default)]
pub(crate) struct RegisteredRanges {
    ends_by_start: BTreeMap<usize, usize>,
}

impl RegisteredRanges {
    pub(crate) fn insert(&mut self, range: Range<usize>) {
        self.ends_by_start.insert(range.start, range.end);
    }

    pub(crate) fn remove(&mut self, start: usize) {
        self.ends_by_start.remove(&start);
    }

    /// True when one registered range holds all of `range`, which is not empty.
    pub(crate) fn covers(&self, range: &Range<usize>) -> bool {
        !range.is_empty()
            && self
                .ends_by_start
                .range(..=range.start)
                .next_back()
                .is_some_and(|(_, &end)| range.end <= end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ranges_inside_one_registration_are_covered() {
        let mut ranges = RegisteredRanges::default();
        ranges.insert(100..200);
        ranges.insert(300..400);
        assert!(ranges.covers(&(100..200)));
        assert!(ranges.covers(&(150..160)));
        assert!(ranges.covers(&(300..301)));
        assert!(!ranges.covers(&(99..150)), "starts before");
        assert!(!ranges.covers(&(150..201)), "ends after");
        assert!(!ranges.covers(&(150..350)), "spans the gap");
        assert!(!ranges.covers(&(200..250)), "in the gap");
        assert!(!ranges.covers(&(0..10)), "before all");
        assert!(!ranges.covers(&(150..150)), "empty");
        ranges.remove(100);
        assert!(!ranges.covers(&(150..160)));
        assert!(ranges.covers(&(300..400)));
    }

    #[test]
    fn only_the_drivers_out_of_memory_means_out_of_pinned_memory() {
        assert!(matches!(
            registration_error(DriverError(cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY)),
            Error::OutOfPinnedMemory
        ));
        assert!(matches!(
            registration_error(DriverError(
                cudaError_enum::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
            )),
            Error::InvalidInput(_)
        ));
        assert!(matches!(
            registration_error(DriverError(cudaError_enum::CUDA_ERROR_INVALID_VALUE)),
            Error::Driver(_)
        ));
    }
}
