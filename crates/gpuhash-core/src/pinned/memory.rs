//! One page-locked host allocation: the driver calls that pin and unpin memory.

use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::sys::{self, cudaError_enum};
use cudarc::driver::{CudaContext, DriverError, result};

use crate::{Error, Result};

/// `bytes` bytes of page-locked host memory from `cuMemHostAlloc`, allocated portable (every
/// context may copy from and to it) and never write-combined (so the CPU reads it at full
/// speed), zeroed when made; freed with `cuMemFreeHost` on drop.
///
/// Whoever owns an allocation must make sure no device work uses it when it is dropped
/// ([`PinnedBuffer`](super::PinnedBuffer) waits for its queued copies first).
#[derive(Debug)]
pub(crate) struct Allocation {
    ptr: NonNull<u8>,
    bytes: usize,
    /// The device address of a mapped allocation.
    mapped: Option<u64>,
    /// The context it was made in, kept alive until the memory is freed.
    context: Arc<CudaContext>,
}

// SAFETY: an allocation is plain host memory that it owns alone (like a `Box<[u8]>`); the
// pointer is never shared outside the borrows that `PinnedBuffer` hands out, which follow
// Rust's rules. The context is `Send + Sync`.
unsafe impl Send for Allocation {}
// SAFETY: as above; `&Allocation` gives only shared reads of the memory.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// Pins `bytes` (more than zero) bytes of host memory in `context`, mapped into the
    /// device's address space when `mapped`. Failure to get the memory is
    /// [`Error::OutOfPinnedMemory`].
    pub(crate) fn new(context: &Arc<CudaContext>, bytes: usize, mapped: bool) -> Result<Self> {
        assert!(bytes > 0, "pinned allocations are never empty");
        if bytes > isize::MAX as usize {
            return Err(Error::OutOfPinnedMemory);
        }
        context.bind_to_thread()?;
        let mut flags = sys::CU_MEMHOSTALLOC_PORTABLE;
        if mapped {
            flags |= sys::CU_MEMHOSTALLOC_DEVICEMAP;
        }
        // SAFETY: the context is current on this thread; the call only returns a pointer to
        // fresh memory, which is zeroed below before anything reads it.
        let raw = unsafe { result::malloc_host(bytes, flags) }.map_err(host_allocation_error)?;
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or(Error::OutOfPinnedMemory)?;
        let mut allocation = Self {
            ptr,
            bytes,
            mapped: None,
            context: context.clone(),
        };
        // SAFETY: `ptr` points to `bytes` writable bytes that nothing else knows of yet.
        // Zeroing makes every byte initialized, so any `T: Pod` may be read from them.
        unsafe { ptr.as_ptr().write_bytes(0, bytes) };
        if mapped {
            let mut address: sys::CUdeviceptr = 0;
            // SAFETY: the memory was allocated with DEVICEMAP in the current context; the
            // call writes one device address (flags must be 0).
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut address, raw, 0) }.result()?;
            allocation.mapped = Some(address);
        }
        Ok(allocation)
    }

    /// The first byte.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Bytes allocated.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The device address of a mapped allocation.
    pub(crate) fn mapped(&self) -> Option<u64> {
        self.mapped
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // Errors are kept in the context, as cudarc does for its own drops; where binding
        // fails the free is still tried (a portable allocation may be freed from any
        // context), and where that fails the memory stays pinned: a leak, nothing worse.
        self.context.record_err(self.context.bind_to_thread());
        // SAFETY: the pointer came from `cuMemHostAlloc` and is freed once, here; the owner
        // guarantees no device work uses it any more and no borrow of it outlives `self`.
        let freed = unsafe { result::free_host(self.ptr.as_ptr().cast()) };
        self.context.record_err(freed);
    }
}

/// The error of a failed `cuMemHostAlloc`: the driver's out-of-memory means the host
/// refused to pin more (device memory is not involved), everything else stays a driver error.
pub(crate) fn host_allocation_error(error: DriverError) -> Error {
    match error.0 {
        cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfPinnedMemory,
        _ => Error::Driver(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_drivers_out_of_memory_means_out_of_pinned_memory() {
        assert!(matches!(
            host_allocation_error(DriverError(cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY)),
            Error::OutOfPinnedMemory
        ));
        assert!(matches!(
            host_allocation_error(DriverError(cudaError_enum::CUDA_ERROR_INVALID_VALUE)),
            Error::Driver(_)
        ));
    }
}
