//! Pinned (page-locked) host memory, and copies between it and the device that run at the
//! bus's speed without holding up the host.
//!
//! Copies from ordinary (pageable) host memory go through a staging buffer of the driver and
//! reach a fraction of the bus's bandwidth; copies from page-locked memory run as DMA at
//! full speed and can overlap kernels and copies on other streams. Pinning is slow (the
//! host must lock every page), so memory that is copied again and again is pinned once and
//! reused: the [`PinnedPool`] keeps released buffers for the next batch.
//!
//! ## Structure
//!
//! - [`PinnedBuffer<T>`]: `len` values of a `T: Pod` in page-locked host memory, read and
//!   written through `Deref<Target = [T]>` like a slice, freed on drop. Made with
//!   `cuMemHostAlloc` (portable, never write-combined, so the CPU reads it at full speed);
//!   [`PinnedBuffer::zeroed_mapped`] also maps it into the device's address space for
//!   kernels that read or write host memory directly ([`PinnedBuffer::mapped_address`]).
//! - Copies on a [`Stream`] that return at once:
//!   [`DeviceBuffer::copy_from_pinned_async`] and [`DeviceBuffer::copy_to_pinned_async`],
//!   and their `_range_` forms for chunks (an offset and a length on both sides).
//! - [`PinnedPool`] and [`PooledPinned<T>`]: buffers by size class (powers of two), returned
//!   to the pool on drop, with an optional cap on the bytes the pool pins;
//!   [`Device::pinned_pool`](crate::Device::pinned_pool) is one shared pool per device.
//! - [`PinnedImage`]: a table's [image](crate::image) in one pinned buffer from a pool,
//!   copied between the table's device arrays and the host one DMA a section, and read in
//!   place by kernels when the pool is mapped ([`PinnedPool::new_mapped`]).
//! - [`HostRegistered`]: the caller's own slice, page-locked in place by
//!   [`Device::register`](crate::Device::register) and unpinned on drop; gpuhash's copies
//!   from and to it run as one DMA each, with no staging (see [`registered`]'s docs).
//!
//! ## How queued copies borrow a buffer
//!
//! A copy queued on a stream uses the host memory after the call has returned, so the
//! buffer keeps track of it: each copy records an event on its stream (one event per
//! stream and direction, recorded again by later copies on that stream), and every host
//! access that could race with a queued copy first waits for those events:
//!
//! | host access | waits for |
//! | --- | --- |
//! | `Deref` (`&[T]`) | queued copies into the buffer (device to host) |
//! | `DerefMut` (`&mut [T]`), [`PinnedBuffer::wait`] | all queued copies |
//! | drop (or return to a pool) | all queued copies |
//!
//! Kernels given a mapped buffer's address count as copies: into the buffer for
//! [`PinnedBuffer::mapped_address_mut`], out of it for [`PinnedBuffer::mapped_address`].
//!
//! Copies out of the buffer (host to device) take `&PinnedBuffer`, so several may be queued
//! on several streams at once while the host reads the buffer too; copies into it take
//! `&mut PinnedBuffer`. A copy on one stream is ordered after conflicting copies that other
//! streams queued on the same buffer (a copy into it after everything; a copy out of it after
//! copies into it), on the device, without blocking the host. Waiting costs nothing when no
//! copy is queued (one atomic load), so indexing a buffer in a loop stays cheap.
//!
//! `Deref` cannot return an error: should the driver fail while waiting (a device that has
//! failed earlier work), it panics. Call [`PinnedBuffer::wait`] first to get that error as a
//! value. A buffer whose copies cannot be waited for is never freed (its memory leaks), so
//! the device never writes memory that Rust has given back.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::{Device, DeviceBuffer};
//!
//! # fn main() -> gpuhash_core::Result<()> {
//! let device = Device::default()?;
//! let stream = device.new_stream()?;
//! let pool = device.pinned_pool();
//!
//! // Stage a batch through pinned memory: fill it on the host, copy it in two chunks.
//! let mut staging = pool.take::<u32>(1 << 20)?;
//! for (i, value) in staging.iter_mut().enumerate() {
//!     *value = i as u32;
//! }
//! let mut keys = DeviceBuffer::<u32>::unfilled(&stream, 1 << 20)?;
//! keys.copy_from_pinned_range_async(&stream, 0, &staging, 0..1 << 19)?;
//! keys.copy_from_pinned_range_async(&stream, 1 << 19, &staging, 1 << 19..1 << 20)?;
//!
//! // ... kernels on `stream` ...
//!
//! // Copy back; reading the buffer waits for the copy.
//! keys.copy_to_pinned_async(&stream, &mut staging)?;
//! assert_eq!(staging[12345], 12345);
//! drop(staging); // back to the pool, for the next batch
//! # Ok(()) }
//! ```

mod image;
mod memory;
mod pending;
mod pool;
pub mod registered;
mod small_copy;

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};
use std::ptr::NonNull;

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::{Device, DeviceBuffer, Error, Result, Stream};
pub use image::{PinnedImage, SECTION_ALIGN};
use memory::Allocation;
use pending::{Access, Pending};
pub use pool::{PinnedPool, PooledPinned};
pub(crate) use registered::RegisteredRanges;
pub use registered::{HostRegistered, Registrable, RegistrableMut};
pub(crate) use small_copy::MAX_BYTES as SMALL_COPY_BYTES;

/// `len` values of a plain-old-data type `T` in page-locked host memory, freed on drop.
///
/// Read and written like a slice (`Deref<Target = [T]>`); a copy queued on a stream borrows
/// the buffer until it has run, and host access waits for it (see the [module
/// documentation](self)). Zero-length buffers hold no memory and never call the driver.
///
/// ```no_run
/// use gpuhash_core::{Device, DeviceBuffer, PinnedBuffer};
///
/// # fn main() -> gpuhash_core::Result<()> {
/// let device = Device::default()?;
/// let stream = device.new_stream()?;
/// let input = PinnedBuffer::from_slice(&device, &[1u64, 2, 3])?;
/// let on_device = {
///     let mut buffer = DeviceBuffer::<u64>::unfilled(&stream, 3)?;
///     buffer.copy_from_pinned_async(&stream, &input)?;
///     buffer
/// };
/// let mut output = PinnedBuffer::<u64>::zeroed(&device, 3)?;
/// on_device.copy_to_pinned_async(&stream, &mut output)?;
/// assert_eq!(&output[..], &[1, 2, 3]); // waits for the copy
/// # Ok(()) }
/// ```
pub struct PinnedBuffer<T> {
    /// `None` for a buffer of zero bytes.
    memory: Option<Allocation>,
    len: usize,
    /// Made with `zeroed_mapped`.
    mapped: bool,
    pending: Pending,
    values: PhantomData<T>,
}

/// The device address of a mapped [`PinnedBuffer`], for a kernel, with the ordering that
/// makes it safe to use: the stream it was taken on waits for conflicting copies queued on
/// other streams, and host access waits for what the stream queues until this guard is
/// dropped. Launch the kernel while the guard lives. (A guard that is forgotten rather than
/// dropped leaves the kernel untracked: [`Kernel::launch`](crate::Kernel::launch)'s safety
/// contract, which any use of the address comes under, then rests on the caller alone.)
#[derive(Debug)]
pub struct MappedAddress<'a> {
    /// The address, to put in a kernel's parameter struct.
    pub address: u64,
    pending: &'a Pending,
    stream: &'a Stream,
    access: Access,
}

impl Drop for MappedAddress<'_> {
    fn drop(&mut self) {
        self.pending.finish(&self.stream.inner, self.access);
    }
}

impl<T: Pod> PinnedBuffer<T> {
    /// A buffer of `len` zero values, pinned portable (every context may copy from and to
    /// it). Returns [`Error::OutOfPinnedMemory`] when the host will not pin that much.
    pub fn zeroed(device: &Device, len: usize) -> Result<Self> {
        Self::allocate(device, len, false)
    }

    /// Like [`PinnedBuffer::zeroed`], and also mapped into the device's address space, so a
    /// kernel can read and write it in place through [`PinnedBuffer::mapped_address`].
    pub fn zeroed_mapped(device: &Device, len: usize) -> Result<Self> {
        Self::allocate(device, len, true)
    }

    /// A buffer holding a copy of `values`.
    pub fn from_slice(device: &Device, values: &[T]) -> Result<Self> {
        let mut buffer = Self::zeroed(device, values.len())?;
        buffer.copy_from_slice(values);
        Ok(buffer)
    }

    fn allocate(device: &Device, len: usize, mapped: bool) -> Result<Self> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            Error::InvalidInput(format!(
                "{len} values of {} bytes overflow usize",
                size_of::<T>()
            ))
        })?;
        let memory = if bytes == 0 {
            None
        } else {
            Some(Allocation::new(device.context(), bytes, mapped)?)
        };
        Self::from_memory(memory, len, mapped)
    }

    /// A buffer of `len` values over `memory` (at least that large, or `None` for zero
    /// bytes), mapped as `mapped` says.
    fn from_memory(memory: Option<Allocation>, len: usize, mapped: bool) -> Result<Self> {
        if let Some(memory) = &memory {
            assert!(memory.bytes() >= len * size_of::<T>());
            if !memory.ptr().cast::<T>().is_aligned() {
                return Err(Error::InvalidInput(format!(
                    "pinned memory is not aligned to {} bytes",
                    align_of::<T>()
                )));
            }
        }
        Ok(Self {
            memory,
            len,
            mapped,
            pending: Pending::default(),
            values: PhantomData,
        })
    }
}

impl<T> PinnedBuffer<T> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the values take.
    pub fn size_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// Bytes pinned for the buffer: its size, or for a pooled buffer its size class.
    pub fn capacity_bytes(&self) -> usize {
        self.memory.as_ref().map_or(0, Allocation::bytes)
    }

    /// True when the buffer was made mapped into the device's address space.
    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    /// Blocks until every copy queued on the buffer has finished, and reports an error the
    /// driver gives while waiting (where `Deref` would panic).
    pub fn wait(&self) -> Result<()> {
        self.pending.wait_for(Access::Write)
    }

    /// The device address of a mapped buffer for a kernel that only reads it; `stream` is
    /// the stream the kernel is launched on. [`Error::InvalidInput`] for a buffer that is not
    /// mapped; an empty mapped buffer has address 0.
    pub fn mapped_address<'a>(&'a self, stream: &'a Stream) -> Result<MappedAddress<'a>> {
        self.mapped_guard(stream, Access::Read)
    }

    /// The device address of a mapped buffer for a kernel that writes it, as
    /// [`PinnedBuffer::mapped_address`].
    pub fn mapped_address_mut<'a>(&'a mut self, stream: &'a Stream) -> Result<MappedAddress<'a>> {
        self.mapped_guard(stream, Access::Write)
    }

    /// The device address of value `offset`, for a mapped buffer that holds memory.
    fn mapped_at(&self, offset: usize) -> Option<u64> {
        let base = self.memory.as_ref().and_then(Allocation::mapped)?;
        self.mapped.then(|| base + (offset * size_of::<T>()) as u64)
    }

    fn mapped_guard<'a>(&'a self, stream: &'a Stream, access: Access) -> Result<MappedAddress<'a>> {
        if !self.mapped {
            return Err(Error::InvalidInput(
                "mapped_address: the pinned buffer is not mapped (make it with zeroed_mapped)"
                    .into(),
            ));
        }
        let address = self.mapped_at(0).unwrap_or(0);
        self.pending.start(&stream.inner, access)?;
        Ok(MappedAddress {
            address,
            pending: &self.pending,
            stream,
            access,
        })
    }

    /// The first value; dangling (but aligned) for a buffer of zero bytes.
    fn ptr(&self) -> NonNull<T> {
        self.memory
            .as_ref()
            .map_or(NonNull::dangling(), |m| m.ptr().cast())
    }

    /// Waits for all queued copies and takes the memory out, leaving an empty buffer; `None`
    /// when there was none, or when the copies cannot be waited for (the memory then leaks,
    /// since the device may still use it).
    fn take_memory(&mut self) -> Option<Allocation> {
        let memory = self.memory.take()?;
        self.len = 0;
        if self.pending.any_pending() && self.pending.wait_for(Access::Write).is_err() {
            std::mem::forget(memory);
            return None;
        }
        Some(memory)
    }

    /// Checks that `range` lies within the buffer, and returns the address of its first
    /// value.
    fn range_ptr(&self, range: &Range<usize>, what: &'static str) -> Result<NonNull<T>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidInput(format!(
                "{what}: values {range:?} of a pinned buffer of {}",
                self.len
            )));
        }
        // SAFETY: `range.start <= len`, so the offset stays within the allocation (or is 0
        // for a buffer of zero bytes).
        Ok(unsafe { self.ptr().add(range.start) })
    }
}

impl<T> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // Dropping the allocation frees it; `take_memory` waits for the copies first.
        drop(self.take_memory());
    }
}

impl<T: Pod> Deref for PinnedBuffer<T> {
    type Target = [T];

    /// The values, once every queued copy into the buffer has finished.
    ///
    /// # Panics
    /// When the driver fails while waiting for a queued copy; [`PinnedBuffer::wait`] gives
    /// that error as a value instead.
    fn deref(&self) -> &[T] {
        if self.pending.writes_pending()
            && let Err(error) = self.pending.wait_for(Access::Read)
        {
            panic!("waiting for a copy into a pinned buffer failed: {error}");
        }
        // SAFETY: the memory holds `len` initialized values of `T` (zeroed when pinned,
        // written since only with `T` values or by the device; any bit pattern is a valid
        // `T: Pod`), or is a dangling aligned pointer for `len == 0`. No queued copy writes
        // it any more (waited for above; new ones need `&mut self`), and copies that read it
        // do not conflict with a shared borrow.
        unsafe { std::slice::from_raw_parts(self.ptr().as_ptr(), self.len) }
    }
}

impl<T: Pod> DerefMut for PinnedBuffer<T> {
    /// The values, once every queued copy has finished.
    ///
    /// # Panics
    /// As `Deref`.
    fn deref_mut(&mut self) -> &mut [T] {
        if self.pending.any_pending()
            && let Err(error) = self.pending.wait_for(Access::Write)
        {
            panic!("waiting for a copy on a pinned buffer failed: {error}");
        }
        // SAFETY: as in `deref`; in addition no queued copy reads or writes the memory any
        // more (all waited for above), and `&mut self` rules out every other borrow and any
        // new copy while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.ptr().as_ptr(), self.len) }
    }
}

impl<T> fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .field("capacity_bytes", &self.capacity_bytes())
            .field("mapped", &self.is_mapped())
            .finish_non_exhaustive()
    }
}

/// Copies between device buffers and pinned buffers, queued on a stream.
impl<T: Pod> DeviceBuffer<T> {
    /// Queues a copy of all of `source`, which must have this buffer's length, into this
    /// buffer on `stream`, and returns without waiting. `source` stays borrowed by the copy
    /// until it has run: writing to it or dropping it waits for the copy.
    pub fn copy_from_pinned_async(
        &mut self,
        stream: &Stream,
        source: &PinnedBuffer<T>,
    ) -> Result<()> {
        if source.len() != self.len() {
            return Err(Error::LengthMismatch {
                what: "copy_from_pinned_async: device buffer and pinned buffer",
                left: self.len(),
                right: source.len(),
            });
        }
        self.copy_from_pinned_range_async(stream, 0, source, 0..source.len())
    }

    /// Queues a copy of the values `range` of `source` into this buffer from value `offset`
    /// on, and returns without waiting; values outside keep what they held. Both sides must
    /// lie within their buffers ([`Error::InvalidInput`] otherwise).
    pub fn copy_from_pinned_range_async(
        &mut self,
        stream: &Stream,
        offset: usize,
        source: &PinnedBuffer<T>,
        range: Range<usize>,
    ) -> Result<()> {
        let host = source.range_ptr(&range, "copy_from_pinned_range_async")?;
        let len = range.len();
        self.check_device_range(offset, len, "copy_from_pinned_range_async")?;
        if len == 0 {
            return Ok(());
        }
        let bytes = len * size_of::<T>();
        source.pending.queue(&stream.inner, Access::Read, || {
            let target = self.address_mut(stream);
            let device = target.address + (offset * size_of::<T>()) as u64;
            // SAFETY: `device` addresses `bytes` bytes within this buffer (checked above),
            // which stays allocated until the copy has run (stream-ordered free) and which
            // other streams wait for (`address_mut`); `host` addresses `bytes` bytes of the
            // pinned buffer, which waits for this copy before it is written or freed.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    device,
                    host.as_ptr().cast(),
                    bytes,
                    stream.inner.cu_stream(),
                )
            }
            .result()?;
            Ok(())
        })
    }

    /// Queues a copy of this buffer into `target`, which must have this buffer's length, on
    /// `stream`, and returns without waiting. `target` stays borrowed by the copy until it
    /// has run: reading it, writing it or dropping it waits for the copy.
    pub fn copy_to_pinned_async(
        &self,
        stream: &Stream,
        target: &mut PinnedBuffer<T>,
    ) -> Result<()> {
        if target.len() != self.len() {
            return Err(Error::LengthMismatch {
                what: "copy_to_pinned_async: device buffer and pinned buffer",
                left: self.len(),
                right: target.len(),
            });
        }
        self.copy_to_pinned_range_async(stream, 0..self.len(), target, 0)
    }

    /// Queues a copy of the values `range` of this buffer into `target` from value `offset`
    /// on, and returns without waiting; values of `target` outside keep what they held. Both
    /// sides must lie within their buffers ([`Error::InvalidInput`] otherwise).
    pub fn copy_to_pinned_range_async(
        &self,
        stream: &Stream,
        range: Range<usize>,
        target: &mut PinnedBuffer<T>,
        offset: usize,
    ) -> Result<()> {
        let len = range.len();
        if range.start > range.end {
            return Err(Error::InvalidInput(format!(
                "copy_to_pinned_range_async: values {range:?} of a device buffer"
            )));
        }
        self.check_device_range(range.start, len, "copy_to_pinned_range_async")?;
        let end = offset.saturating_add(len);
        let host = target.range_ptr(&(offset..end), "copy_to_pinned_range_async")?;
        if len == 0 {
            return Ok(());
        }
        let bytes = len * size_of::<T>();
        let mapped = target.mapped_at(offset);
        target.pending.queue(&stream.inner, Access::Write, || {
            let source = self.address(stream);
            let device = source.address + (range.start * size_of::<T>()) as u64;
            if let Some(to) = mapped.filter(|&to| small_copy::by_kernel(device, to, bytes)) {
                // SAFETY: as for the copy below; `to` is the device address of the same
                // `bytes` bytes of the pinned buffer, which is mapped.
                return unsafe { small_copy::copy_words(stream, device, to, bytes) };
            }
            // SAFETY: `device` addresses `bytes` bytes within this buffer (checked above),
            // allocated until the copy has run and ordered after other streams' writes
            // (`address`); `host` addresses `bytes` bytes of the pinned buffer, which waits
            // for this copy before it is read, written or freed.
            unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    host.as_ptr().cast(),
                    device,
                    bytes,
                    stream.inner.cu_stream(),
                )
            }
            .result()?;
            Ok(())
        })
    }

    fn check_device_range(&self, offset: usize, len: usize, what: &'static str) -> Result<()> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len()) {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "{what}: {len} values at offset {offset} overrun a device buffer of {}",
                self.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_buffers_need_no_driver() {
        let mut empty = PinnedBuffer::<u64>::from_memory(None, 0, false).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.capacity_bytes(), 0);
        assert_eq!(&empty[..], &[] as &[u64]);
        assert_eq!(empty.iter_mut().count(), 0);
        empty.wait().unwrap();
        assert!(!empty.is_mapped());
    }

    #[test]
    fn ranges_are_checked() {
        let empty = PinnedBuffer::<u32>::from_memory(None, 0, false).unwrap();
        assert!(empty.range_ptr(&(0..0), "test").is_ok());
        assert!(matches!(
            empty.range_ptr(&(0..1), "test"),
            Err(Error::InvalidInput(_))
        ));
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 1..0;
        assert!(matches!(
            empty.range_ptr(&backwards, "test"),
            Err(Error::InvalidInput(_))
        ));
    }
}
