//! Host slices through pinned memory: the engine under the contract's host forms.
//!
//! Copies between pageable host memory (a caller's slice) and the device go through a small
//! buffer of the driver and reach a fraction of the bus's speed; the bus itself runs at its
//! full speed only from and to pinned memory. So a batch from host slices is staged:
//! [`upload`] cuts the slice into chunks, and host threads, one pinned buffer (from the
//! device's pool) each, copy chunks into pinned memory while the DMA of the chunks they
//! copied before runs; [`download`] does the same the other way. The threads are started
//! once a call and each copies its own chunks: starting threads for every chunk cost more
//! than the copies on the hosts we measured (docs/benchmarks/contract.md).
//!
//! A slice the caller registered ([`Device::register`](crate::Device::register)) is not
//! staged: it is copied straight, in one DMA, at the bus's speed.
//!
//! A host form then runs its table's device form on the batch, whole or in chunks
//! (`gpuhash_core::table`'s host forms say which), so that the batch takes effect, or
//! fails and leaves the table as it was, as one.

use std::ops::Range;
use std::sync::mpsc;

use bytemuck::Pod;

use crate::pinned::PooledPinned;
use crate::{DeviceBuffer, Error, Stream};

/// Elements of one chunk: 4M (16 MiB of u32 keys): a thread copies one in a few
/// milliseconds, and the DMA of one runs at the bus's full speed.
pub const CHUNK: usize = 1 << 22;

/// Bytes up to which a copy goes straight between the caller's slice and the device: for
/// a small batch the driver's own staging costs less than taking pinned buffers and
/// waiting on their events.
const DIRECT_BYTES: usize = 64 << 10;

/// Host threads that copy chunks of one call: as many as the host offers, at most 8 (the
/// host's memory bandwidth, not its cores, bounds the copies: 8 reached 30 GB/s on the
/// host we measured, 16 no more).
pub(crate) fn copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// The chunks of `chunk` elements (at least 1) over `len` elements, the last one short.
pub(crate) fn chunks(len: usize, chunk: usize) -> Vec<Range<usize>> {
    let chunk = chunk.max(1);
    (0..len)
        .step_by(chunk)
        .map(|start| start..len.min(start.saturating_add(chunk)))
        .collect()
}

/// Copies `host` to a new device buffer through pinned memory; queued on `stream`, returns
/// once the last chunk's copy is queued.
pub fn upload<T: Pod + Send + Sync>(stream: &Stream, host: &[T]) -> Result<DeviceBuffer<T>, Error> {
    let mut device = DeviceBuffer::unfilled(stream, host.len())?;
    upload_into(stream, host, &mut device)?;
    Ok(device)
}

/// [`upload`] into the caller's `device` buffer, which must have the slice's length.
pub fn upload_into<T: Pod + Send + Sync>(
    stream: &Stream,
    host: &[T],
    device: &mut DeviceBuffer<T>,
) -> Result<(), Error> {
    if size_of_val(host) <= DIRECT_BYTES || stream.device().is_registered(host) {
        // Small, or registered: one copy, which waits for itself when registered.
        return device.copy_from_host(stream, host);
    }
    if host.len() != device.len() {
        return Err(Error::LengthMismatch {
            what: "upload_into: host slice and device buffer",
            left: host.len(),
            right: device.len(),
        });
    }
    let ranges = chunks(host.len(), CHUNK);
    let workers = copy_threads().min(ranges.len());
    let mut buffers = pinned_buffers(stream, workers, host.len())?;
    if let [buffer] = &mut buffers[..] {
        // One chunk (or one thread): the calling thread copies, with no thread to start.
        for range in ranges {
            buffer[..range.len()].copy_from_slice(&host[range.clone()]);
            device.copy_from_pinned_range_async(stream, range.start, buffer, 0..range.len())?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let (filled_tx, filled_rx) = mpsc::channel::<(usize, PooledPinned<T>)>();
        let mut give_back = Vec::new();
        for (worker, mut buffer) in buffers.into_iter().enumerate() {
            let (back_tx, back_rx) = mpsc::channel::<PooledPinned<T>>();
            give_back.push(back_tx);
            let (filled_tx, ranges) = (filled_tx.clone(), &ranges);
            scope.spawn(move || {
                for i in (worker..ranges.len()).step_by(workers) {
                    let range = ranges[i].clone();
                    // Writing waits for the DMA of the chunk this buffer held before.
                    buffer[..range.len()].copy_from_slice(&host[range]);
                    if filled_tx.send((i, buffer)).is_err() {
                        return;
                    }
                    match back_rx.recv() {
                        Ok(returned) => buffer = returned,
                        Err(_) => return,
                    }
                }
            });
        }
        drop(filled_tx);
        for (i, buffer) in filled_rx {
            let range = ranges[i].clone();
            device.copy_from_pinned_range_async(stream, range.start, &buffer, 0..range.len())?;
            // A worker with no chunk left has gone: its buffer goes back to the pool.
            let _ = give_back[i % workers].send(buffer);
        }
        Ok::<(), Error>(())
    })
}

/// Copies `device` into `host`, of its length, through pinned memory; waits for the copies.
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
    if size_of_val(host) <= DIRECT_BYTES || stream.device().is_registered(host) {
        return device.copy_to_host(stream, host);
    }
    let ranges = chunks(host.len(), CHUNK);
    let workers = copy_threads().min(ranges.len());
    let mut buffers = pinned_buffers(stream, workers, host.len())?;
    if let [buffer] = &mut buffers[..] {
        // One chunk (or one thread): the calling thread copies, with no thread to start.
        for range in ranges {
            device.copy_to_pinned_range_async(stream, range.clone(), buffer, 0)?;
            host[range.clone()].copy_from_slice(&buffer[..range.len()]);
        }
        return Ok(());
    }
    // Each worker empties its own chunks: chunk i goes to worker i % workers.
    let mut parts: Vec<Vec<&mut [T]>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, part) in host.chunks_mut(CHUNK).enumerate() {
        parts[i % workers].push(part);
    }
    std::thread::scope(|scope| {
        let mut to_workers = Vec::new();
        let mut from_workers = Vec::new();
        for part in parts {
            let (to_tx, to_rx) = mpsc::channel::<PooledPinned<T>>();
            let (from_tx, from_rx) = mpsc::channel::<PooledPinned<T>>();
            to_workers.push(to_tx);
            from_workers.push(from_rx);
            scope.spawn(move || {
                for target in part {
                    let Ok(buffer) = to_rx.recv() else { return };
                    // Reading waits for the DMA into the buffer.
                    target.copy_from_slice(&buffer[..target.len()]);
                    if from_tx.send(buffer).is_err() {
                        return;
                    }
                }
            });
        }
        for (i, range) in ranges.iter().enumerate() {
            let worker = i % workers;
            let mut buffer = if i < workers {
                buffers.pop().expect("one buffer a worker")
            } else {
                from_workers[worker].recv().map_err(|_| worker_gone())?
            };
            device.copy_to_pinned_range_async(stream, range.clone(), &mut buffer, 0)?;
            to_workers[worker].send(buffer).map_err(|_| worker_gone())?;
        }
        drop(to_workers);
        // Every chunk has landed once each worker has given its last buffer back.
        for from_worker in from_workers {
            while from_worker.recv().is_ok() {}
        }
        Ok::<(), Error>(())
    })
}

/// The values of a device buffer, copied to the host through pinned memory; waits.
pub fn downloaded<T: Pod + Send + Sync>(
    stream: &Stream,
    device: &DeviceBuffer<T>,
) -> Result<Vec<T>, Error> {
    let mut host = bytemuck::zeroed_vec(device.len());
    download(stream, device, &mut host)?;
    Ok(host)
}

/// `count` pinned buffers of the device's pool, each of one chunk (or the whole batch,
/// when it is smaller).
fn pinned_buffers<T: Pod>(
    stream: &Stream,
    count: usize,
    len: usize,
) -> Result<Vec<PooledPinned<T>>, Error> {
    (0..count)
        .map(|_| stream.device().pinned_pool().take::<T>(len.min(CHUNK)))
        .collect()
}

fn worker_gone() -> Error {
    Error::InvalidInput("staging: a copy thread ended early".into())
}

/// `(0..n).map(f).collect()`, with the values made by several threads when there are many:
/// each thread writes its own part of the vector's spare capacity, so the output is written
/// (and its pages first touched) once, in parallel.
pub fn parallel_collect<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    let threads = copy_threads();
    if n * size_of::<T>().max(1) < 1 << 20 || threads == 1 {
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
    fn chunks_cover_a_batch_once() {
        assert!(chunks(0, CHUNK).is_empty());
        assert_eq!(chunks(5, CHUNK), vec![0..5]);
        let c = chunks(2 * CHUNK + 1, CHUNK);
        assert_eq!(
            c,
            vec![0..CHUNK, CHUNK..2 * CHUNK, 2 * CHUNK..2 * CHUNK + 1]
        );
    }

    #[test]
    fn parallel_collect_matches_the_plain_loop() {
        let collected = parallel_collect(1_000_003, |i| i as u64 * 3);
        assert_eq!(collected.len(), 1_000_003);
        assert!(
            collected
                .iter()
                .enumerate()
                .all(|(i, &v)| v == i as u64 * 3)
        );
        assert_eq!(parallel_collect(3, |i| i), vec![0, 1, 2]);
        assert!(parallel_collect(0, |i| i).is_empty());
    }
}
