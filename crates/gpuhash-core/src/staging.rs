//! Host slices at the bus's speed: the engine under the contract's host forms.
//!
//! A batch from host slices is cut into chunks. Each chunk goes through a *lane* (a stream
//! lent by the device, device buffers, and pinned buffers from the device's pool): its
//! inputs are copied by several host threads into pinned memory, then by DMA to the device;
//! the table's device form runs on the lane's stream; its answers come back by DMA into
//! pinned memory and from there, by several host threads, into the caller's slices. With
//! [`LANES`] lanes taking chunks in turn, the copies in, the kernels and the copies out of
//! neighbouring chunks overlap, and no copy touches pageable memory, which the driver would
//! stage through a small buffer of its own at a fraction of the bus's speed.
//!
//! Lookups run this way ([`run_staged`]): their chunks need no order and run side by side.
//! Batches that change the table go to their device form whole, so that they take effect,
//! or fail and leave the table as it was, as one batch: their inputs are staged to the
//! device a chunk at a time ([`upload`], host threads filling one pinned buffer while the
//! DMA of the one before runs) and their answers come back the same way ([`download`]).
//! A batch with `ordered` set keeps its chunks' device forms in order (an event between
//! them) while their copies still overlap.
//!
//! A batch no larger than one chunk takes one lane and costs one pass of each step.

use std::ops::Range;

use bytemuck::Pod;
use cudarc::driver::CudaEvent;

use crate::pinned::PooledPinned;
use crate::{Device, DeviceBuffer, Error, LentStream, Stream};

/// Elements of one chunk: 4M keys (16 MiB of u32 keys), large enough that a chunk's kernel
/// fills the GPU and its copies run at full speed, small enough that a few chunks in flight
/// keep every step busy.
pub const CHUNK: usize = 1 << 22;

/// Chunks in flight at once, each on a stream of its own.
pub const LANES: usize = 3;

/// Bytes below which a host copy is done by one thread (spawning costs more).
const PARALLEL_COPY_BYTES: usize = 1 << 20;

/// One column of a staged batch on one lane: a device buffer and its pinned staging buffer.
struct Column<T> {
    device: DeviceBuffer<T>,
    pinned: PooledPinned<T>,
}

impl<T: Pod + Send + Sync> Column<T> {
    fn new(stream: &Stream, len: usize) -> Result<Self, Error> {
        Ok(Self {
            device: DeviceBuffer::unfilled(stream, len)?,
            pinned: stream.device().pinned_pool().take(len)?,
        })
    }

    /// Host slice -> pinned (host threads) -> device (DMA, queued).
    fn send(&mut self, stream: &Stream, source: &[T]) -> Result<(), Error> {
        parallel_copy(&mut self.pinned[..source.len()], source);
        let len = source.len();
        self.device
            .copy_from_pinned_range_async(stream, 0, &self.pinned, 0..len)
    }

    /// Device -> pinned (DMA, queued).
    fn fetch(&mut self, stream: &Stream) -> Result<(), Error> {
        let len = self.device.len();
        self.device
            .copy_to_pinned_range_async(stream, 0..len, &mut self.pinned, 0)
    }

    /// Pinned -> host slice (host threads), once the fetch has run.
    fn land(&self, target: &mut [T]) -> Result<(), Error> {
        self.pinned.wait()?;
        parallel_copy(target, &self.pinned[..target.len()]);
        Ok(())
    }
}

/// The device buffers of one chunk, as a table's device form takes them.
pub struct ChunkBuffers<'a, K, V, A, B> {
    /// The chunk's keys.
    pub keys: &'a DeviceBuffer<K>,
    /// The chunk's values, for batches that carry them.
    pub values: Option<&'a DeviceBuffer<V>>,
    /// The first answer column, for batches that have one.
    pub first: Option<&'a mut DeviceBuffer<A>>,
    /// The second answer column.
    pub second: Option<&'a mut DeviceBuffer<B>>,
}

/// A batch from host slices: keys and optional values in, up to two answer columns out.
pub struct HostBatch<'a, K, V, A, B> {
    /// Keys of the batch.
    pub keys: &'a [K],
    /// Values, one a key, for batches that carry them.
    pub values: Option<&'a [V]>,
    /// First answer column, one a key.
    pub first: Option<&'a mut [A]>,
    /// Second answer column, one a key.
    pub second: Option<&'a mut [B]>,
    /// Whether chunks must take effect in order (batches that change the table).
    pub ordered: bool,
}

/// The buffers of one lane for chunks of one length.
struct Lane<K, V, A, B> {
    len: usize,
    keys: Column<K>,
    values: Option<Column<V>>,
    first: Option<Column<A>>,
    second: Option<Column<B>>,
}

impl<K, V, A, B> Lane<K, V, A, B>
where
    K: Pod + Send + Sync,
    V: Pod + Send + Sync,
    A: Pod + Send + Sync,
    B: Pod + Send + Sync,
{
    fn new(stream: &Stream, len: usize, batch: &HostBatch<'_, K, V, A, B>) -> Result<Self, Error> {
        Ok(Self {
            len,
            keys: Column::new(stream, len)?,
            values: batch.values.map(|_| Column::new(stream, len)).transpose()?,
            first: batch
                .first
                .as_ref()
                .map(|_| Column::new(stream, len))
                .transpose()?,
            second: batch
                .second
                .as_ref()
                .map(|_| Column::new(stream, len))
                .transpose()?,
        })
    }

    fn send(
        &mut self,
        stream: &Stream,
        batch: &HostBatch<'_, K, V, A, B>,
        range: &Range<usize>,
    ) -> Result<(), Error> {
        self.keys.send(stream, &batch.keys[range.clone()])?;
        if let (Some(column), Some(values)) = (&mut self.values, batch.values) {
            column.send(stream, &values[range.clone()])?;
        }
        Ok(())
    }

    fn buffers(&mut self) -> ChunkBuffers<'_, K, V, A, B> {
        ChunkBuffers {
            keys: &self.keys.device,
            values: self.values.as_ref().map(|c| &c.device),
            first: self.first.as_mut().map(|c| &mut c.device),
            second: self.second.as_mut().map(|c| &mut c.device),
        }
    }

    fn fetch(&mut self, stream: &Stream) -> Result<(), Error> {
        if let Some(column) = &mut self.first {
            column.fetch(stream)?;
        }
        if let Some(column) = &mut self.second {
            column.fetch(stream)?;
        }
        Ok(())
    }

    fn land(
        &self,
        batch: &mut HostBatch<'_, K, V, A, B>,
        range: &Range<usize>,
    ) -> Result<(), Error> {
        if let (Some(column), Some(target)) = (&self.first, batch.first.as_deref_mut()) {
            column.land(&mut target[range.clone()])?;
        }
        if let (Some(column), Some(target)) = (&self.second, batch.second.as_deref_mut()) {
            column.land(&mut target[range.clone()])?;
        }
        Ok(())
    }
}

/// Runs `batch` through `device_form` chunk by chunk on [`LANES`] lanes (see the module
/// docs) and returns once every answer has landed in the batch's answer slices.
pub fn run_staged<K, V, A, B, E>(
    device: &Device,
    mut batch: HostBatch<'_, K, V, A, B>,
    mut device_form: impl FnMut(&Stream, ChunkBuffers<'_, K, V, A, B>) -> Result<(), E>,
) -> Result<(), E>
where
    K: Pod + Send + Sync,
    V: Pod + Send + Sync,
    A: Pod + Send + Sync,
    B: Pod + Send + Sync,
    E: From<Error>,
{
    check_batch(&batch)?;
    let n = batch.keys.len();
    let chunks: Vec<Range<usize>> = (0..n).step_by(CHUNK).map(|s| s..n.min(s + CHUNK)).collect();
    let lane_count = chunks.len().clamp(1, LANES);
    let streams = (0..lane_count)
        .map(|_| device.lend_stream())
        .collect::<Result<Vec<LentStream>, Error>>()?;
    let mut lanes: Vec<Option<Lane<K, V, A, B>>> = (0..lane_count).map(|_| None).collect();
    let mut in_flight: Vec<Option<Range<usize>>> = vec![None; lane_count];
    let mut previous_form: Option<CudaEvent> = None;
    for (i, range) in chunks.iter().enumerate() {
        let (slot, stream) = (i % lane_count, &*streams[i % lane_count]);
        if let (Some(lane), Some(done)) = (&lanes[slot], in_flight[slot].take()) {
            lane.land(&mut batch, &done)?;
        }
        if lanes[slot]
            .as_ref()
            .is_none_or(|lane| lane.len != range.len())
        {
            lanes[slot] = Some(Lane::new(stream, range.len(), &batch)?);
        }
        let lane = lanes[slot].as_mut().expect("made above");
        lane.send(stream, &batch, range)?;
        if batch.ordered
            && let Some(event) = &previous_form
        {
            stream.cuda_stream().wait(event).map_err(Error::from)?;
        }
        device_form(stream, lane.buffers())?;
        if batch.ordered {
            previous_form = Some(
                stream
                    .cuda_stream()
                    .record_event(None)
                    .map_err(Error::from)?,
            );
        }
        lane.fetch(stream)?;
        in_flight[slot] = Some(range.clone());
    }
    // The chunks still in flight land oldest first, as the ones before them did.
    let first_slot = chunks.len() % lane_count;
    for slot in (first_slot..lane_count).chain(0..first_slot) {
        if let (Some(lane), Some(done)) = (&lanes[slot], in_flight[slot].take()) {
            lane.land(&mut batch, &done)?;
        }
    }
    for stream in &streams {
        stream.synchronize()?;
    }
    Ok(())
}

fn check_batch<K, V, A, B>(batch: &HostBatch<'_, K, V, A, B>) -> Result<(), Error> {
    let n = batch.keys.len();
    let columns = [
        ("keys and values", batch.values.map(<[V]>::len)),
        ("keys and answers", batch.first.as_deref().map(<[A]>::len)),
        ("keys and answers", batch.second.as_deref().map(<[B]>::len)),
    ];
    for (what, len) in columns {
        if let Some(len) = len
            && len != n
        {
            return Err(Error::LengthMismatch {
                what,
                left: n,
                right: len,
            });
        }
    }
    Ok(())
}

/// Threads for one large host copy: as many as the host offers, at most 8 (memory
/// bandwidth, not cores, bounds a copy).
fn copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// `target.copy_from_slice(source)`, split over several threads when large.
pub fn parallel_copy<T: Pod + Send + Sync>(target: &mut [T], source: &[T]) {
    let bytes = std::mem::size_of_val(source);
    let threads = copy_threads();
    if bytes < PARALLEL_COPY_BYTES || threads == 1 {
        target.copy_from_slice(source);
        return;
    }
    let piece = source.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (t, s) in target.chunks_mut(piece).zip(source.chunks(piece)) {
            scope.spawn(move || t.copy_from_slice(s));
        }
    });
}

/// Copies `host` to a new device buffer through pinned buffers of the device's pool, a
/// chunk at a time: host threads fill one pinned buffer while the DMA of the one before
/// runs. Queued on `stream`; returns once the last chunk's copy is queued.
pub fn upload<T: Pod + Send + Sync>(stream: &Stream, host: &[T]) -> Result<DeviceBuffer<T>, Error> {
    let mut device = DeviceBuffer::unfilled(stream, host.len())?;
    let chunk = host.len().clamp(1, CHUNK);
    let lanes = LANES.min(host.len().div_ceil(chunk));
    let mut pinned = (0..lanes)
        .map(|_| stream.device().pinned_pool().take::<T>(chunk))
        .collect::<Result<Vec<_>, Error>>()?;
    for (i, part) in host.chunks(chunk).enumerate() {
        let buffer = &mut pinned[i % lanes];
        parallel_copy(&mut buffer[..part.len()], part);
        device.copy_from_pinned_range_async(stream, i * chunk, buffer, 0..part.len())?;
    }
    Ok(device)
}

/// Copies `device` into `host` (of its length) through pinned buffers of the device's
/// pool, a chunk at a time: host threads empty one pinned buffer while the DMA of the next
/// runs. Waits for the copies.
pub fn download<T: Pod + Send + Sync>(
    stream: &Stream,
    device: &DeviceBuffer<T>,
    host: &mut [T],
) -> Result<(), Error> {
    if host.len() != device.len() {
        return Err(Error::LengthMismatch {
            what: "download: device buffer and host slice",
            left: device.len(),
            right: host.len(),
        });
    }
    let chunk = host.len().clamp(1, CHUNK);
    let lanes = LANES.min(host.len().div_ceil(chunk));
    let mut pinned = (0..lanes)
        .map(|_| stream.device().pinned_pool().take::<T>(chunk))
        .collect::<Result<Vec<_>, Error>>()?;
    let ranges: Vec<Range<usize>> = (0..host.len())
        .step_by(chunk)
        .map(|s| s..host.len().min(s + chunk))
        .collect();
    for (i, range) in ranges.iter().enumerate() {
        if i >= lanes {
            let landed = &ranges[i - lanes];
            let buffer = &pinned[i % lanes];
            buffer.wait()?;
            parallel_copy(&mut host[landed.clone()], &buffer[..landed.len()]);
        }
        device.copy_to_pinned_range_async(stream, range.clone(), &mut pinned[i % lanes], 0)?;
    }
    for (i, range) in ranges
        .iter()
        .enumerate()
        .skip(ranges.len().saturating_sub(lanes))
    {
        let buffer = &pinned[i % lanes];
        buffer.wait()?;
        parallel_copy(&mut host[range.clone()], &buffer[..range.len()]);
    }
    Ok(())
}

/// `(0..n).map(f).collect()`, with the values made by several threads when there are many:
/// each thread writes its own part of the vector's spare capacity, so the output is written
/// (and its pages first touched) once, in parallel.
pub fn parallel_collect<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    let threads = copy_threads();
    if n * size_of::<T>().max(1) < PARALLEL_COPY_BYTES || threads == 1 {
        out.extend((0..n).map(f));
        return out;
    }
    let piece = n.div_ceil(threads);
    std::thread::scope(|scope| {
        for (c, part) in out.spare_capacity_mut()[..n].chunks_mut(piece).enumerate() {
            let f = &f;
            scope.spawn(move || {
                for (j, slot) in part.iter_mut().enumerate() {
                    slot.write(f(c * piece + j));
                }
            });
        }
    });
    // SAFETY: the scope has joined every thread, and together their parts cover the first
    // `n` slots of the spare capacity, each written once above; a thread that panicked
    // would have propagated its panic out of the scope before this line.
    unsafe { out.set_len(n) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_copy_and_fill_match_the_plain_loops() {
        let source: Vec<u64> = (0..3_000_001).map(|i| i * 7).collect();
        let mut target = vec![0u64; source.len()];
        parallel_copy(&mut target, &source);
        assert_eq!(target, source);
        let mut small = [0u32; 5];
        parallel_copy(&mut small, &[1, 2, 3, 4, 5]);
        assert_eq!(small, [1, 2, 3, 4, 5]);
        let collected = parallel_collect(1_000_003, |i| i as u64 * 3);
        assert_eq!(collected.len(), 1_000_003);
        assert!(
            collected
                .iter()
                .enumerate()
                .all(|(i, &v)| v == i as u64 * 3)
        );
        assert_eq!(parallel_collect(3, |i| i), vec![0, 1, 2]);
    }

    #[test]
    fn a_batch_whose_columns_differ_in_length_is_refused() {
        let keys = [1u32, 2, 3];
        let mut answers = [0u8; 2];
        let batch = HostBatch::<u32, u32, u8, u8> {
            keys: &keys,
            values: None,
            first: Some(&mut answers),
            second: None,
            ordered: false,
        };
        assert!(matches!(
            check_batch(&batch),
            Err(Error::LengthMismatch { .. })
        ));
    }
}
