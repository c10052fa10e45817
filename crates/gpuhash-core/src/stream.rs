//! Streams: ordered queues of device work, one per host thread that issues batches.

use std::sync::Arc;

use cudarc::driver::CudaStream;

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

    /// The cudarc stream, for code that calls cudarc directly.
    pub fn cuda_stream(&self) -> &Arc<CudaStream> {
        &self.inner
    }
}
