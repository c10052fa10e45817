//! The order of a table's batches on the device: events recorded on the streams that
//! queued them, which later batches' streams wait on.
//!
//! The table's gate orders batches on the host (a writer alone, readers together); this
//! carries that order to the device, where batches come on different streams and a call
//! returns before its work has run. A writer's stream waits for the last writer and for
//! every reader since, a reader's stream for the last writer. Readers do not wait for one
//! another.

use cudarc::driver::CudaEvent;
use gpuhash_core::{Error, Stream};
use parking_lot::Mutex;

use crate::Result;

/// The events of the batches a new batch may have to wait for.
#[derive(Debug, Default)]
pub(super) struct Order {
    events: Mutex<Events>,
}

#[derive(Debug, Default)]
struct Events {
    /// Recorded after the last writing batch's work.
    last_write: Option<CudaEvent>,
    /// Recorded after each reading batch's work since the last writing batch, the ones
    /// known to be complete pruned.
    reads: Vec<CudaEvent>,
}

impl Order {
    /// Before a reading batch queues its work on `stream`.
    pub(super) fn before_read(&self, stream: &Stream) -> Result<()> {
        let events = self.events.lock();
        if let Some(write) = &events.last_write {
            stream.cuda_stream().wait(write).map_err(Error::from)?;
        }
        Ok(())
    }

    /// After a reading batch queued its work on `stream`. An event known to be complete
    /// is recorded again (a wait takes an event as last recorded when it is queued), which
    /// spares creating and destroying one a batch.
    pub(super) fn after_read(&self, stream: &Stream) -> Result<()> {
        let mut events = self.events.lock();
        let done = events.reads.iter().position(CudaEvent::is_complete);
        let read = match done {
            Some(at) => {
                let event = events.reads.swap_remove(at);
                events.reads.retain(|e| !e.is_complete());
                event
            }
            None => new_event(stream)?,
        };
        read.record(stream.cuda_stream()).map_err(Error::from)?;
        events.reads.push(read);
        Ok(())
    }

    /// Before a writing batch queues its work on `stream` (the gate held for writing, so
    /// no batch queues work meanwhile).
    pub(super) fn before_write(&self, stream: &Stream) -> Result<()> {
        let mut events = self.events.lock();
        for event in events.last_write.iter().chain(&events.reads) {
            stream.cuda_stream().wait(event).map_err(Error::from)?;
        }
        // The writer's own event, recorded after its work, now stands for them all.
        events.reads.clear();
        Ok(())
    }

    /// After a writing batch queued its work on `stream`, whether or not it succeeded. The
    /// last writer's event is recorded again (waits already queued keep the work they
    /// were queued for).
    pub(super) fn after_write(&self, stream: &Stream) -> Result<()> {
        let mut events = self.events.lock();
        let write = match events.last_write.take() {
            Some(event) => event,
            None => new_event(stream)?,
        };
        let recorded = write.record(stream.cuda_stream()).map_err(Error::from);
        events.last_write = Some(write);
        Ok(recorded?)
    }

    /// Whether every batch queued so far has run (an event that cannot be queried counts
    /// as not run).
    pub(super) fn all_run(&self) -> bool {
        let events = self.events.lock();
        events
            .last_write
            .iter()
            .chain(&events.reads)
            .all(CudaEvent::is_complete)
    }
}

/// A fresh event of `stream`'s context, for a batch's order when no recorded one is free.
fn new_event(stream: &Stream) -> Result<CudaEvent> {
    Ok(stream
        .cuda_stream()
        .context()
        .new_event(None)
        .map_err(Error::from)?)
}
