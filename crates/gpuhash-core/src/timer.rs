//! Timing device work with CUDA events, the only clock that sees when kernels really run.

use cudarc::driver::CudaEvent;
use cudarc::driver::sys::CUevent_flags;

use crate::{Result, Stream};

/// Measures the device time between two points of a stream.
///
/// ```no_run
/// # fn main() -> gpuhash_core::Result<()> {
/// use gpuhash_core::{Device, EventTimer};
/// let device = Device::default()?;
/// let stream = device.new_stream()?;
/// let timer = EventTimer::start(&stream)?;
/// // ... queue work on `stream` ...
/// let milliseconds = timer.stop()?;
/// # let _ = milliseconds; Ok(()) }
/// ```
#[derive(Debug)]
pub struct EventTimer {
    start: CudaEvent,
    stream: Stream,
}

impl EventTimer {
    /// Records the start event on `stream`.
    pub fn start(stream: &Stream) -> Result<Self> {
        let start = timing_event(stream)?;
        start.record(&stream.inner)?;
        Ok(Self {
            start,
            stream: stream.clone(),
        })
    }

    /// Records the stop event, waits for it, and returns the elapsed device time in
    /// milliseconds.
    pub fn stop(self) -> Result<f32> {
        let stop = timing_event(&self.stream)?;
        stop.record(&self.stream.inner)?;
        stop.synchronize()?;
        Ok(self.start.elapsed_ms(&stop)?)
    }
}

fn timing_event(stream: &Stream) -> Result<CudaEvent> {
    Ok(stream
        .inner
        .context()
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
}
