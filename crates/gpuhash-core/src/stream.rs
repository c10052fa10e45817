//! Streams: ordered queues of device work, one per host thread that issues batches.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream};

use crate::{Device, Result};

/// A CUDA stream of one [`Device`]. Work queued on one stream runs in order; work on
/// different streams may overlap. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Stream {
    pub(crate) inner: Arc<CudaStream>,
    device: Device,
}

impl Stream {
    pub(crate) fn new(inner: Arc<CudaStream>, device: Device) -> Self {
        Self { inner, device }
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Blocks until all work queued so far has finished; reports any error the work raised.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.inner.synchronize()?)
    }

    /// An event recorded after the work queued so far, for another stream to wait on.
    pub(crate) fn record(&self) -> Result<CudaEvent> {
        Ok(self.inner.record_event(None)?)
    }

    /// Makes the work queued from now on wait for `event` (on the device; the host goes on).
    pub(crate) fn wait_for(&self, event: &CudaEvent) -> Result<()> {
        Ok(self.inner.wait(event)?)
    }

    /// The cudarc stream, for code that calls cudarc directly. The device's context keeps
    /// no cudarc events: a cudarc allocation used on several streams must be ordered by
    /// its user (gpuhash's own buffers order themselves).
    pub fn cuda_stream(&self) -> &Arc<CudaStream> {
        &self.inner
    }
}
