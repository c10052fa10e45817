//! What a pinned buffer waits for: the device work queued on it that may still run.
//!
//! Each stream that queued work on a buffer gets one mark per kind of access: an event
//! recorded on that stream after the work. A later record on the same stream covers all
//! earlier work of that stream, so one event a stream and kind is enough however many
//! chunks are copied. Marks stay (inactive) after they are waited for, so that the next
//! copy on that stream records the same event again instead of making a new one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::{CudaEvent, CudaStream, DriverError};
use parking_lot::Mutex;

use crate::{Error, Result};

/// What queued device work does to a pinned buffer's host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The work reads it (a copy to the device, a kernel reading mapped memory).
    Read,
    /// The work writes it (a copy from the device, a kernel writing mapped memory).
    Write,
}

impl Access {
    /// Whether work of kind `self` must wait for earlier work of kind `earlier`: only two
    /// reads may overlap.
    fn conflicts_with(self, earlier: Access) -> bool {
        self == Access::Write || earlier == Access::Write
    }
}

/// An event recorded on `stream` after the last work of kind `access` it queued.
#[derive(Debug)]
struct Mark {
    /// Held so that the stream, and with it its handle, lives as long as the mark: a new
    /// stream can then never reuse the handle and be taken for this one.
    stream: Arc<CudaStream>,
    access: Access,
    event: CudaEvent,
    /// Recorded since the last time it was waited for.
    active: bool,
}

#[derive(Debug, Default)]
struct State {
    marks: Vec<Mark>,
    /// Set when work was queued but could be neither tracked nor waited for (the driver
    /// failed to record an event and then to synchronize the stream). The memory may be in
    /// use by the device for an unknown time: it is never touched or freed again.
    untracked: Option<DriverError>,
}

/// The device work queued on one pinned buffer that has not been waited for yet.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    state: Mutex<State>,
    /// True while some mark is active (or work is untracked); read without the lock.
    busy: AtomicBool,
    /// True while some write mark is active (or work is untracked); read without the lock.
    writes: AtomicBool,
}

impl Pending {
    /// Queues work of kind `access` on `stream` by calling `enqueue`, ordered after any
    /// conflicting work that other streams queued on the same memory, and marks it so that
    /// host access waits for it.
    pub(crate) fn queue(
        &self,
        stream: &Arc<CudaStream>,
        access: Access,
        enqueue: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut state = self.state.lock();
        let index = self.prepare(&mut state, stream, access)?;
        enqueue()?;
        self.record(&mut state, index, stream);
        Ok(())
    }

    /// The first half of [`Pending::queue`], for work that the caller queues later:
    /// orders `stream` after conflicting work of other streams and makes sure a mark for
    /// (`stream`, `access`) exists, so that [`Pending::finish`] cannot fail to find one.
    pub(crate) fn start(&self, stream: &Arc<CudaStream>, access: Access) -> Result<()> {
        let mut state = self.state.lock();
        self.prepare(&mut state, stream, access).map(|_| ())
    }

    /// The second half: marks the work of kind `access` queued on `stream` since
    /// [`Pending::start`].
    pub(crate) fn finish(&self, stream: &Arc<CudaStream>, access: Access) {
        let mut state = self.state.lock();
        match find(&state.marks, stream, access) {
            Some(index) => self.record(&mut state, index, stream),
            // `start` made the mark, and only `wait_for` removes marks, and only those
            // whose stream nobody else holds; the caller holds this one. Should it be gone
            // all the same, waiting for the stream keeps the promise.
            None => {
                if let Err(error) = stream.synchronize() {
                    self.poison(&mut state, error);
                }
            }
        }
    }

    fn prepare(
        &self,
        state: &mut State,
        stream: &Arc<CudaStream>,
        access: Access,
    ) -> Result<usize> {
        if let Some(error) = state.untracked {
            return Err(Error::Driver(error));
        }
        stream.context().bind_to_thread()?;
        for mark in &state.marks {
            if mark.active
                && mark.stream.cu_stream() != stream.cu_stream()
                && access.conflicts_with(mark.access)
            {
                stream.wait(&mark.event)?;
            }
        }
        match find(&state.marks, stream, access) {
            Some(index) => Ok(index),
            None => {
                // Made before the work is queued, so that after it only the record itself
                // can fail.
                let event = stream.context().new_event(None)?;
                state.marks.push(Mark {
                    stream: stream.clone(),
                    access,
                    event,
                    active: false,
                });
                Ok(state.marks.len() - 1)
            }
        }
    }

    /// Records mark `index` on `stream` after the work just queued. Should the driver
    /// refuse, waits for the stream instead; should that fail too, poisons the buffer.
    fn record(&self, state: &mut State, index: usize, stream: &Arc<CudaStream>) {
        let mark = &mut state.marks[index];
        match mark.event.record(stream) {
            Ok(()) => {
                mark.active = true;
                if mark.access == Access::Write {
                    self.writes.store(true, Ordering::Release);
                }
                self.busy.store(true, Ordering::Release);
            }
            Err(_) => {
                if let Err(error) = stream.synchronize() {
                    self.poison(state, error);
                }
            }
        }
    }

    fn poison(&self, state: &mut State, error: DriverError) {
        state.untracked = Some(error);
        self.writes.store(true, Ordering::Release);
        self.busy.store(true, Ordering::Release);
    }

    /// True when the host may have to wait before it reads the memory.
    pub(crate) fn writes_pending(&self) -> bool {
        self.writes.load(Ordering::Acquire)
    }

    /// True when the host may have to wait before it writes or frees the memory. Through
    /// `&mut` no other thread can queue work meanwhile, so a plain read is enough.
    pub(crate) fn any_pending(&mut self) -> bool {
        *self.busy.get_mut()
    }

    /// Blocks until the queued work that conflicts with host access of kind `host` has
    /// finished: for a host read, the device's writes; for a host write (or freeing), all.
    pub(crate) fn wait_for(&self, host: Access) -> Result<()> {
        let mut state = self.state.lock();
        if let Some(error) = state.untracked {
            return Err(Error::Driver(error));
        }
        for mark in &mut state.marks {
            if mark.active && host.conflicts_with(mark.access) {
                mark.event.synchronize()?;
                mark.active = false;
            }
        }
        // Streams that nobody else holds any more can queue nothing new: drop their marks
        // (and the streams with them).
        state
            .marks
            .retain(|mark| mark.active || Arc::strong_count(&mark.stream) > 1);
        let busy = state.marks.iter().any(|mark| mark.active);
        let writes = state
            .marks
            .iter()
            .any(|mark| mark.active && mark.access == Access::Write);
        self.writes.store(writes, Ordering::Release);
        self.busy.store(busy, Ordering::Release);
        Ok(())
    }
}

fn find(marks: &[Mark], stream: &Arc<CudaStream>, access: Access) -> Option<usize> {
    marks
        .iter()
        .position(|mark| mark.access == access && mark.stream.cu_stream() == stream.cu_stream())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_reads_may_overlap() {
        assert!(!Access::Read.conflicts_with(Access::Read));
        assert!(Access::Read.conflicts_with(Access::Write));
        assert!(Access::Write.conflicts_with(Access::Read));
        assert!(Access::Write.conflicts_with(Access::Write));
    }

    #[test]
    fn nothing_pending_waits_for_nothing() {
        let mut pending = Pending::default();
        assert!(!pending.writes_pending());
        assert!(!pending.any_pending());
        pending.wait_for(Access::Write).unwrap();
        pending.wait_for(Access::Read).unwrap();
        assert!(!pending.any_pending());
    }
}
