//! Device-side `malloc` of 128-byte blocks, one per thread: the baseline SlabAlloc's
//! benchmark compares against, as the SlabHash paper does.

use gpuhash_core::{Device, DeviceBuffer, Stream};

use crate::Result;
use crate::launch;

/// `count` pointers from device-side `malloc(128)`, freed by [`DeviceMallocBaseline::free`].
#[derive(Debug)]
pub struct DeviceMallocBaseline {
    pointers: DeviceBuffer<u64>,
    allocated: bool,
}

impl DeviceMallocBaseline {
    /// Sets the device-malloc heap to `bytes`; only before any kernel that uses `malloc`
    /// has run on this device (the default heap is 8 MiB).
    pub fn reserve_heap(device: &Device, bytes: usize) -> Result<()> {
        Ok(device.set_malloc_heap_bytes(bytes)?)
    }

    /// Room for `count` pointers, none allocated yet.
    pub fn new(stream: &Stream, count: usize) -> Result<Self> {
        Ok(Self {
            pointers: DeviceBuffer::zeroed(stream, count)?,
            allocated: false,
        })
    }

    /// Queues one `malloc(128)` per pointer; frees the previous round first if needed.
    pub fn allocate(&mut self, stream: &Stream) -> Result<()> {
        self.free(stream)?;
        launch::device_malloc(stream, &mut self.pointers, false)?;
        self.allocated = true;
        Ok(())
    }

    /// How many `malloc` calls of the last round returned null (the heap was too small).
    pub fn failures(&self, stream: &Stream) -> Result<usize> {
        Ok(self
            .pointers
            .to_host(stream)?
            .iter()
            .filter(|&&p| p == 0)
            .count())
    }

    /// Queues `free` of every pointer of the last round.
    pub fn free(&mut self, stream: &Stream) -> Result<()> {
        if self.allocated {
            launch::device_malloc(stream, &mut self.pointers, true)?;
            self.allocated = false;
        }
        Ok(())
    }
}
