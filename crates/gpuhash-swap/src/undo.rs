//! The undo log of an insert or a removal, and the undo of one that fails: after an error
//! the table holds exactly what it held before the batch.
//!
//! ## The log
//!
//! Before a changing visit runs its child's device form, the child's keys of the segment
//! are looked up with the child's own `get_async` (the child is resident then): a found
//! flag a key and the value it held, kept in the order of the segment's partition, beside
//! the partition's places of its elements in the segment ([`Before`]): with the caller's
//! keys, which stay in input order for as long as the batch runs, that names every key's
//! old state. A visit counts as logged once its lookup is queued: its form runs only after
//! that, and a visit that never ran (its copy, lookup or page-in failed) is not logged and
//! not undone.
//!
//! A batch of several segments may take several passes over them (`crate::passes`), each
//! partitioning only its own children's keys: there is one log for each pass over each
//! segment that logged a visit. A child is in one pass, so each key's visits are all in
//! one pass, once a segment, and each element of the batch is in at most one log.
//!
//! The log of the segment that runs stays on the device (the scratch budget counts it:
//! [`crate::policy::change_scratch_per_element`]). When the next segment starts, it goes
//! to pinned host memory from the device's pool, a copy queued on the batch's stream that
//! the next segment's one wait (its partition's counts) covers, and its device memory is
//! freed: a batch larger than the device budget keeps its whole log off the device. A
//! batch that succeeds drops its log with no wait of its own; the last segment's never
//! leaves the device.
//!
//! **Bus bytes.** A batch that succeeds moves one flag, one value and one place (4 bytes)
//! an element, device to host, for every logged segment of a pass but the last to run: the keys
//! are not copied, since the caller's buffer holds them for as long as the batch runs. A
//! batch that fails moves its keys (up to the end of the furthest logged segment) to the
//! host once, then the undo's keys and values back, a key for each key it removes and a
//! pair for each it puts back. Device time: a lookup a key before its insert or removal,
//! and two copies.
//!
//! ## The undo
//!
//! On an error the log is read back and every logged visit is taken back with
//! [`UndoPlan`] (shared with the contract's chunked inserts): after an insert, keys that
//! were not there are removed and keys that were get their old values back; after a
//! removal, keys that were there go back in with their old values. The failed visit is
//! undone too, since a form that fails may have changed part of its keys (a `NotInserted`
//! error). A key lives in one child, so the undo goes child by child, the resident ones
//! first, each paged in once through the residency's usual path, and takes back each
//! child's visits the last segment first ([`crate::policy::undo_steps`]), which leaves a
//! key repeated across segments with what it held before the batch. A failure in any pass
//! takes back the visits of every pass before it as well as its own. Then the batch's own
//! error is returned; [`crate::SwapStats`] counts the batches undone.
//!
//! Children keep the room they grew by during the failed batch (a resize is not taken
//! back), and an undone child counts as changed: it is written back when it next leaves
//! the device.
//!
//! What cannot be undone: an error that no form returns but that shows when the stream is
//! waited on (a kernel that faults leaves the context unusable), and an undo that fails in
//! turn (the device lost, device memory or the host budget too short for a page-in or
//! page-out it needs). The undo then stops, the batch's own error is still the one
//! returned, [`crate::SwapStats::undo_failures`] counts it, and the table may hold part of
//! the batch.

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::image::ProbeInPlace;
use gpuhash_core::staging::{CHUNK, downloaded};
use gpuhash_core::table::{Key, Map, UndoPlan, Value};
use gpuhash_core::{DeviceBuffer, PooledPinned, Result, Stream};

use crate::policy::{child_of, resident_first, undo_steps};
use crate::residency::Residency;
use crate::table::SwapTable;

/// What the keys of one pass over the segment that runs held before their visits, on the
/// device, in the order of the pass's partition of the segment, and the children whose
/// visits were logged. The flags and values of children not logged are left unwritten:
/// the undo reads only the logged ones'.
pub(crate) struct Before<V> {
    found: DeviceBuffer<u8>,
    held: DeviceBuffer<V>,
    logged: Vec<usize>,
}

impl<V: Value> Before<V> {
    /// An empty log for a partition of `len` elements.
    pub(crate) fn new(stream: &Stream, len: usize) -> Result<Self> {
        Ok(Self {
            found: DeviceBuffer::unfilled(stream, len)?,
            held: DeviceBuffer::unfilled(stream, len)?,
            logged: Vec::new(),
        })
    }

    /// Looks `keys`, child `child`'s part of the partition (from `at` on), up in `table`
    /// and keeps the answers at the same places. The child counts as logged once this has
    /// returned `Ok`: run its form only then.
    pub(crate) fn record<T: Map<Value = V>>(
        &mut self,
        stream: &Stream,
        table: &T,
        child: usize,
        keys: &DeviceBuffer<T::Key>,
        at: usize,
    ) -> std::result::Result<(), T::Error> {
        let mut found = DeviceBuffer::unfilled(stream, keys.len())?;
        let mut held = DeviceBuffer::unfilled(stream, keys.len())?;
        table.get_async(stream, keys, &mut found, &mut held)?;
        self.found.copy_from_at(stream, at, &found)?;
        self.held.copy_from_at(stream, at, &held)?;
        self.logged.push(child);
        Ok(())
    }
}

/// Where part of a segment's log lies.
enum Lies<T> {
    /// On the device: the segment that runs, or one whose move to the host failed.
    Device(DeviceBuffer<T>),
    /// In pinned host memory, once its copy has run.
    Host(PooledPinned<T>),
}

impl<T: Pod + Send + Sync> Lies<T> {
    /// Queues the move of a log on the device to pinned memory from the device's pool; the
    /// device buffer is freed after the copy, in stream order. On an error it stays where
    /// it was.
    fn move_to_host(&mut self, stream: &Stream) -> Result<()> {
        let Lies::Device(buffer) = self else {
            return Ok(());
        };
        let mut pinned = stream.device().pinned_pool().take(buffer.len())?;
        buffer.copy_to_pinned_async(stream, &mut pinned)?;
        *self = Lies::Host(pinned);
        Ok(())
    }

    /// The values, on the host.
    fn read(&self, stream: &Stream) -> Result<Vec<T>> {
        match self {
            Lies::Device(buffer) => downloaded(stream, buffer),
            Lies::Host(pinned) => {
                pinned.wait()?;
                Ok(pinned.to_vec())
            }
        }
    }
}

/// The log of one pass over one segment.
struct Logged<V> {
    /// The segment's range of the batch.
    segment: Range<usize>,
    /// The children whose visits were logged, in visit order.
    logged: Vec<usize>,
    /// Each partitioned element's place in the segment.
    places: Lies<u32>,
    /// What each partitioned element held before its visit, where its child was logged.
    found: Lies<u8>,
    held: Lies<V>,
}

/// The log of a changing batch: each pass's over each segment that reached its visits,
/// in the order they ran.
pub(crate) struct UndoLog<V> {
    segments: Vec<Logged<V>>,
}

impl<V: Value> UndoLog<V> {
    pub(crate) fn new() -> Self {
        Self {
            segments: Vec::new(),
        }
    }

    /// Keeps the log of a pass over the segment `segment`, whose partition put its
    /// elements at `places` in the segment, on the device for now; nothing when no visit
    /// was logged.
    pub(crate) fn push(
        &mut self,
        segment: Range<usize>,
        before: Before<V>,
        places: DeviceBuffer<u32>,
    ) {
        if before.logged.is_empty() {
            return;
        }
        self.segments.push(Logged {
            segment,
            logged: before.logged,
            places: Lies::Device(places),
            found: Lies::Device(before.found),
            held: Lies::Device(before.held),
        });
    }

    /// Moves the logs on the device to pinned host memory, queued on `stream`: called as
    /// each segment starts, so that at most one segment's log takes device memory. An
    /// error fails the batch, with the log where it was, still whole.
    pub(crate) fn move_to_host(&mut self, stream: &Stream) -> Result<()> {
        self.segments.iter_mut().try_for_each(|logged| {
            logged.places.move_to_host(stream)?;
            logged.found.move_to_host(stream)?;
            logged.held.move_to_host(stream)
        })
    }

    /// The log on the host, each element's at its place in the batch. A key lives in one
    /// child and a child in one pass, so each element is in one pass's partition of its
    /// segment: no two logs write the same place.
    fn read(&self, stream: &Stream) -> Result<ReadBack<V>> {
        let end = self.end();
        let mut read = ReadBack {
            segments: Vec::with_capacity(self.segments.len()),
            found: vec![0; end],
            held: vec![V::zeroed(); end],
        };
        for logged in &self.segments {
            read.segments
                .push((logged.segment.clone(), logged.logged.clone()));
            let places = logged.places.read(stream)?;
            let found = logged.found.read(stream)?;
            let held = logged.held.read(stream)?;
            for ((place, found), held) in places.into_iter().zip(found).zip(held) {
                let element = logged.segment.start + place as usize;
                read.found[element] = found;
                read.held[element] = held;
            }
        }
        Ok(read)
    }

    /// The end of the furthest logged segment: the segments start at the batch's first
    /// element and follow one another, and each pass starts again from the first.
    fn end(&self) -> usize {
        self.segments
            .iter()
            .map(|logged| logged.segment.end)
            .max()
            .unwrap_or(0)
    }
}

/// A log read back to the host.
struct ReadBack<V> {
    /// Each pass's segment's range and the children it logged, in the order they ran.
    segments: Vec<(Range<usize>, Vec<usize>)>,
    /// The flags and values of every element up to the end of the furthest segment
    /// (those of elements no visit logged are left zero).
    found: Vec<u8>,
    held: Vec<V>,
}

/// How a failed batch changed its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Insert,
    Remove,
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// Takes back every visit `log` holds, after a failed batch of `change` on `keys`
    /// (module docs), and counts the undo. Whatever happens, the caller returns the batch's
    /// own error.
    pub(crate) fn undo(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        change: Change,
        log: UndoLog<T::Value>,
    ) {
        if log.segments.is_empty() {
            // Nothing ran: the table is as it was.
            return;
        }
        let undone = self
            .take_back(residency, stream, keys, change, &log)
            .and_then(|()| Ok(stream.synchronize()?));
        residency.count_undo(undone.is_ok());
    }

    fn take_back(
        &self,
        residency: &mut Residency<T>,
        stream: &Stream,
        keys: &DeviceBuffer<T::Key>,
        change: Change,
        log: &UndoLog<T::Value>,
    ) -> std::result::Result<(), T::Error> {
        let keys = keys_to_host(stream, keys, log.end())?;
        let read = log.read(stream)?;
        let children = residency.count();
        let child_of: Vec<u32> = keys
            .iter()
            .map(|key| child_of(key.widen(), children as u32))
            .collect();
        let steps = undo_steps(&child_of, &read.segments, children);
        for (child, parts) in resident_first(steps, |child| residency.is_resident(child)) {
            let plans: Vec<_> = parts
                .iter()
                .map(|elements| plan(change, elements, &keys, &read))
                .filter(|plan| !plan.is_empty())
                .collect();
            if plans.is_empty() {
                continue;
            }
            residency.on_resident(&self.device, (child, true), stream, |table| {
                plans.iter().try_for_each(|plan| apply(table, stream, plan))
            })?;
        }
        Ok(())
    }
}

/// The undo of one visit: its `elements` of the batch, with what they held.
fn plan<K: Key, V: Value>(
    change: Change,
    elements: &[usize],
    keys: &[K],
    read: &ReadBack<V>,
) -> UndoPlan<K, V> {
    let keys: Vec<K> = elements.iter().map(|&i| keys[i]).collect();
    let found: Vec<u8> = elements.iter().map(|&i| read.found[i]).collect();
    let held: Vec<V> = elements.iter().map(|&i| read.held[i]).collect();
    match change {
        Change::Insert => UndoPlan::after_insert(&keys, &found, Some(&held)),
        Change::Remove => UndoPlan::after_remove(&keys, &found, &held),
    }
}

/// Queues `plan` on a resident child with its own verbs.
fn apply<T: Map>(
    table: &T,
    stream: &Stream,
    plan: &UndoPlan<T::Key, T::Value>,
) -> std::result::Result<(), T::Error> {
    plan.apply(
        stream,
        |added| {
            let mut removed = DeviceBuffer::unfilled(stream, added.len())?;
            table.remove_async(stream, added, &mut removed)
        },
        |keys, values| table.insert_async(stream, keys, values),
    )
}

/// The first `len` of the caller's keys, on the host: copied straight into pinned memory,
/// a chunk of [`CHUNK`] at a time through one buffer of the device's pool, with no device
/// memory of their own (an undo may follow a device that ran out).
fn keys_to_host<K: Key>(stream: &Stream, keys: &DeviceBuffer<K>, len: usize) -> Result<Vec<K>> {
    let mut host = Vec::with_capacity(len);
    let mut pinned = stream.device().pinned_pool().take(len.min(CHUNK))?;
    for start in (0..len).step_by(CHUNK) {
        let range = start..len.min(start + CHUNK);
        keys.copy_to_pinned_range_async(stream, range.clone(), &mut pinned, 0)?;
        pinned.wait()?;
        host.extend_from_slice(&pinned[..range.len()]);
    }
    Ok(host)
}
