//! Typed device memory.
//!
//! A buffer orders its uses across streams itself. It remembers the stream that wrote it
//! last and the streams that read it since; a read waits for the writer's work, a write
//! for the writer's and every reader's, and work on one of those streams needs nothing
//! (a stream runs in order). Waiting means recording one event on the other stream and
//! making this one wait for it, at the first use that needs it. Taking an address on a
//! stream already in order is then a lock and a compare, and copies and fills are one
//! driver call each, where recording and waiting for events at every use (as cudarc does
//! for its allocations unless told not to; `Device` tells it not to) cost the host a
//! microsecond or two an address, which a small batch's launches, each passing a dozen
//! buffers, add up.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, DriverError};
use parking_lot::Mutex;

use crate::{Error, Result, Stream};

/// `len` values of a plain-old-data type `T` in device memory, freed on drop.
///
/// Every copy names the stream it runs on. Copies from host memory return once the host
/// data has been consumed; copies to host memory return once the data has arrived.
#[derive(Debug)]
pub struct DeviceBuffer<T> {
    bytes: CudaSlice<u8>,
    /// The allocation's device address.
    base: u64,
    order: Mutex<Uses>,
    len: usize,
    values: PhantomData<T>,
}

/// The streams whose queued work a buffer's next uses must come after.
#[derive(Debug)]
struct Uses {
    /// The stream of the last write (at first, of the allocation).
    writer: Arc<CudaStream>,
    /// Streams other than the writer that read the buffer since.
    readers: Vec<Arc<CudaStream>>,
    /// Recorded on a stream that another must wait for; made at the first such wait.
    event: Option<CudaEvent>,
}

impl Uses {
    /// Makes `stream` wait for the work queued on `other` so far (nothing if they are one).
    fn wait(
        event: &mut Option<CudaEvent>,
        stream: &Arc<CudaStream>,
        other: &Arc<CudaStream>,
    ) -> std::result::Result<(), DriverError> {
        if Arc::ptr_eq(stream, other) || is_idle(other)? {
            return Ok(());
        }
        let event = match event {
            Some(event) => event,
            None => event.insert(stream.context().new_event(None)?),
        };
        // The wait takes the event as just recorded: recording it again later is safe.
        event.record(other)?;
        stream.wait(event)
    }

    /// Orders a read on `stream` after the last write.
    fn read(&mut self, stream: &Arc<CudaStream>) -> std::result::Result<(), DriverError> {
        if Arc::ptr_eq(&self.writer, stream) || self.readers.iter().any(|r| Arc::ptr_eq(r, stream))
        {
            return Ok(());
        }
        Self::wait(&mut self.event, stream, &self.writer)?;
        self.readers.push(stream.clone());
        Ok(())
    }

    /// Orders a write on `stream` after the last write and every read since.
    fn write(&mut self, stream: &Arc<CudaStream>) -> std::result::Result<(), DriverError> {
        for reader in &self.readers {
            Self::wait(&mut self.event, stream, reader)?;
        }
        self.readers.clear();
        Self::wait(&mut self.event, stream, &self.writer)?;
        self.writer = stream.clone();
        Ok(())
    }
}

/// Whether every piece of work queued on `stream` so far has finished: then work queued
/// on another stream from now on needs no waiting for it. (After a table's host call
/// waited for its stream, as most do, the next batch's stream finds it idle and skips an
/// event record and wait a buffer.)
fn is_idle(stream: &Arc<CudaStream>) -> std::result::Result<bool, DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: the stream is live (held by the Arc) and of the context just made current;
    // the query only reads its state.
    let status = unsafe { cudarc::driver::sys::cuStreamQuery(stream.cu_stream()) };
    // Not ready, or an error of earlier work, which the wait then reports: not idle.
    Ok(status == cudarc::driver::sys::cudaError_enum::CUDA_SUCCESS)
}

/// A raw device address of a buffer, ordered after the buffer's earlier work on other
/// streams; it borrows the buffer for as long as a kernel's parameters are being built.
#[derive(Debug)]
pub struct DeviceAddress<'a> {
    /// The address, to put in a kernel's parameter struct.
    pub address: u64,
    _buffer: PhantomData<&'a ()>,
}

impl<T: Pod> DeviceBuffer<T> {
    /// A buffer of `len` zero values.
    pub fn zeroed(stream: &Stream, len: usize) -> Result<Self> {
        let bytes = stream
            .inner
            .alloc_zeros::<u8>(allocation_bytes::<T>(len)?)?;
        Ok(Self::owning(stream, bytes, len))
    }

    /// A buffer of `len` values for work that writes all of them before anything reads
    /// them: no memset is queued, so its bytes are whatever the allocator left there (still
    /// valid values, since any bit pattern is a valid `T: Pod`).
    pub fn unfilled(stream: &Stream, len: usize) -> Result<Self> {
        // SAFETY: the bytes are device memory, never Rust values; whatever reads them before
        // they are written (a kernel, a copy to the host) gets some bit pattern, which is a
        // valid `T` because `T: Pod`.
        let bytes = unsafe { stream.inner.alloc::<u8>(allocation_bytes::<T>(len)?) }?;
        Ok(Self::owning(stream, bytes, len))
    }

    /// A buffer of `len` values over `bytes`, just allocated on `stream`.
    fn owning(stream: &Stream, bytes: CudaSlice<u8>, len: usize) -> Self {
        let base = bytes.device_ptr(&stream.inner).0;
        Self {
            bytes,
            base,
            order: Mutex::new(Uses {
                writer: stream.inner.clone(),
                readers: Vec::new(),
                event: None,
            }),
            len,
            values: PhantomData,
        }
    }

    /// A buffer holding a copy of `values`.
    pub fn from_host(stream: &Stream, values: &[T]) -> Result<Self> {
        let mut buffer = Self::zeroed(stream, values.len())?;
        buffer.copy_from_host(stream, values)?;
        Ok(buffer)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the values take (the allocation may be a little larger).
    pub fn size_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// Overwrites the buffer with `values`, which must have the buffer's length.
    ///
    /// From pageable memory the copy returns once the driver has staged the values; from
    /// memory registered with [`Device::register`](crate::Device::register) it runs as one
    /// DMA at the bus's speed, and the call waits for it, so that either way the caller may
    /// change `values` as soon as it returns.
    pub fn copy_from_host(&mut self, stream: &Stream, values: &[T]) -> Result<()> {
        self.check_len("copy_from_host: buffer and host slice", values.len())?;
        if !values.is_empty() {
            self.order.lock().write(&stream.inner)?;
            let size = self.size_bytes();
            let mut view = self.bytes.slice_mut(..size);
            stream
                .inner
                .memcpy_htod(bytemuck::cast_slice(values), &mut view)?;
            if stream.device().is_registered(values) {
                stream.synchronize()?;
            }
        }
        Ok(())
    }

    /// Copies the buffer into `out`, which must have the buffer's length, and waits for it;
    /// into memory registered with [`Device::register`](crate::Device::register), as one DMA
    /// at the bus's speed. A buffer of a few words comes through the device's pinned pool,
    /// written there by a kernel, so that it does not wait behind large copies to the host
    /// on other streams.
    pub fn copy_to_host(&self, stream: &Stream, out: &mut [T]) -> Result<()> {
        self.check_len("copy_to_host: buffer and host slice", out.len())?;
        if !out.is_empty() && self.size_bytes() <= crate::pinned::SMALL_COPY_BYTES {
            let mut pinned = stream.device().pinned_pool().take::<T>(self.len)?;
            self.copy_to_pinned_range_async(stream, 0..self.len, &mut pinned, 0)?;
            // Reading the pinned buffer waits for the copy into it.
            out.copy_from_slice(&pinned[..self.len]);
        } else if !out.is_empty() {
            self.order.lock().read(&stream.inner)?;
            let view = self.bytes.slice(..self.size_bytes());
            stream
                .inner
                .memcpy_dtoh(&view, bytemuck::cast_slice_mut(out))?;
        }
        stream.synchronize()
    }

    /// The values, copied to a new vector; waits for the copy.
    pub fn to_host(&self, stream: &Stream) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        self.copy_to_host(stream, &mut out)?;
        Ok(out)
    }

    /// Queues a copy of `source`, which must have this buffer's length, on `stream`.
    pub fn copy_from(&mut self, stream: &Stream, source: &DeviceBuffer<T>) -> Result<()> {
        self.check_len("copy_from: destination and source buffers", source.len)?;
        self.copy_from_at(stream, 0, source)
    }

    /// Queues a copy of all of `source` into this buffer from value `offset` on; the
    /// values past the copy keep what they held. Lets a larger buffer take over a smaller
    /// one's contents when a structure grows.
    pub fn copy_from_at(
        &mut self,
        stream: &Stream,
        offset: usize,
        source: &DeviceBuffer<T>,
    ) -> Result<()> {
        let fits = offset
            .checked_add(source.len)
            .is_some_and(|end| end <= self.len);
        if !fits {
            return Err(Error::InvalidInput(format!(
                "copy_from_at: {} values at offset {offset} overrun a buffer of {}",
                source.len, self.len
            )));
        }
        self.copy_range_from(stream, offset, source, 0..source.len)
    }

    /// Queues a copy of `source[range]` into this buffer from value `at` on; the values
    /// outside the copy keep what they held. Ranges past either buffer are an error.
    pub fn copy_range_from(
        &mut self,
        stream: &Stream,
        at: usize,
        source: &DeviceBuffer<T>,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        let fits = |start: usize, len: usize, within: usize| {
            start.checked_add(len).is_some_and(|end| end <= within)
        };
        if range.start > range.end
            || !fits(range.start, range.len(), source.len)
            || !fits(at, range.len(), self.len)
        {
            return Err(Error::InvalidInput(format!(
                "copy_range_from: {range:?} of a buffer of {} to offset {at} of one of {}",
                source.len, self.len
            )));
        }
        if !range.is_empty() {
            self.order.get_mut().write(&stream.inner)?;
            source.order.lock().read(&stream.inner)?;
            let bytes = |i: usize| i * size_of::<T>();
            let from = source.bytes.slice(bytes(range.start)..bytes(range.end));
            let mut to = self.bytes.slice_mut(bytes(at)..bytes(at + range.len()));
            stream.inner.memcpy_dtod(&from, &mut to)?;
        }
        Ok(())
    }

    /// Queues setting every byte of the buffer to zero.
    pub fn fill_zero(&mut self, stream: &Stream) -> Result<()> {
        self.order.get_mut().write(&stream.inner)?;
        Ok(stream.inner.memset_zeros(&mut self.bytes)?)
    }

    /// The buffer's address for a kernel that only reads it. An error ordering the stream
    /// after other streams' work surfaces at the stream's next call that reports errors.
    pub fn address<'a>(&'a self, stream: &'a Stream) -> DeviceAddress<'a> {
        let ordered = self.order.lock().read(&stream.inner);
        self.address_after(stream, ordered)
    }

    /// The buffer's address for a kernel that writes it.
    pub fn address_mut<'a>(&'a mut self, stream: &'a Stream) -> DeviceAddress<'a> {
        let ordered = self.order.get_mut().write(&stream.inner);
        self.address_after(stream, ordered)
    }

    fn address_after<'a>(
        &'a self,
        stream: &'a Stream,
        ordered: std::result::Result<(), DriverError>,
    ) -> DeviceAddress<'a> {
        stream.inner.context().record_err(ordered);
        DeviceAddress {
            address: self.base,
            _buffer: PhantomData,
        }
    }

    /// Forgets the streams that used the buffer, so that its next write, or its free, waits
    /// for nothing queued on them: for an owner that keeps the order of its own uses (as a
    /// table keeps its batches' events) and knows that all of them have run. A buffer
    /// freed while another stream is busy otherwise waits for everything queued there so
    /// far, and memory freed that way is reused by a new allocation only after it.
    ///
    /// # Safety
    ///
    /// Every piece of work queued so far that reads or writes the buffer, on any stream,
    /// has finished running: a write or the free may otherwise overtake it.
    pub unsafe fn forget_finished_uses(&self) {
        let mut uses = self.order.lock();
        uses.readers.clear();
        uses.writer = self.bytes.stream().clone();
    }

    fn check_len(&self, what: &'static str, other: usize) -> Result<()> {
        if self.len == other {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                what,
                left: self.len,
                right: other,
            })
        }
    }
}

impl<T> Drop for DeviceBuffer<T> {
    /// The allocation is freed on the stream it was made on once that stream's work is
    /// done: as for a write, that stream first waits for the other streams' uses.
    fn drop(&mut self) {
        let allocated_on = self.bytes.stream().clone();
        let ordered = self.order.get_mut().write(&allocated_on);
        allocated_on.context().record_err(ordered);
    }
}

/// Bytes to allocate for `len` values: never zero, since the driver rejects empty
/// allocations, and an error rather than an overflow for absurd lengths.
fn allocation_bytes<T>(len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .map(|bytes| bytes.max(1))
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "{len} values of {} bytes overflow usize",
                size_of::<T>()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_never_empty_and_never_overflows() {
        assert_eq!(allocation_bytes::<u32>(0).unwrap(), 1);
        assert_eq!(allocation_bytes::<u64>(3).unwrap(), 24);
        assert!(matches!(
            allocation_bytes::<u64>(usize::MAX / 4),
            Err(Error::InvalidInput(_))
        ));
    }
}
