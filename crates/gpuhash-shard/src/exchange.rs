//! The all-to-all of a batch, built from NCCL's grouped sends and receives (NCCL has no
//! all-to-all of uneven parts): every rank holds one part for every rank; first the
//! parts' lengths travel (one word a pair of ranks), so that each receiver sizes its
//! buffers, then the parts themselves. A part a rank keeps is a copy on its device, so a
//! communicator of one runs the same steps with no NCCL.

use bytemuck::Pod;
use gpuhash_core::{DeviceBuffer, Result, Stream};

use crate::comm::Comm;
use crate::launch::Group;

/// `parts[from][to]`: the part rank `from` holds for rank `to`, on `streams[from]`'s
/// device. Returns `received[to][from]`, on `streams[to]`'s device. Waits for each
/// receiver's stream once, for the lengths.
pub(crate) fn all_to_all<T: Pod>(
    comm: &Comm,
    streams: &[Stream],
    parts: &[Vec<DeviceBuffer<T>>],
) -> Result<Vec<Vec<DeviceBuffer<T>>>> {
    let ranks = comm.ranks();
    let lengths: Vec<Vec<DeviceBuffer<u64>>> = parts
        .iter()
        .zip(streams)
        .map(|(row, stream)| {
            row.iter()
                .map(|part| DeviceBuffer::from_host(stream, &[part.len() as u64]))
                .collect()
        })
        .collect::<Result<_>>()?;
    let mut received_lengths = empty_matrix::<u64>(streams, 1)?;
    exchange(comm, streams, &lengths, &mut received_lengths)?;
    let mut received = (0..ranks)
        .map(|to| {
            (0..ranks)
                .map(|from| {
                    let len = received_lengths[to][from].to_host(&streams[to])?[0];
                    DeviceBuffer::unfilled(&streams[to], len as usize)
                })
                .collect()
        })
        .collect::<Result<Vec<Vec<_>>>>()?;
    exchange(comm, streams, parts, &mut received)?;
    Ok(received)
}

/// A buffer of `len` elements for every pair of ranks, `[to][from]` on `to`'s device.
fn empty_matrix<T: Pod>(streams: &[Stream], len: usize) -> Result<Vec<Vec<DeviceBuffer<T>>>> {
    streams
        .iter()
        .map(|stream| {
            (0..streams.len())
                .map(|_| DeviceBuffer::zeroed(stream, len))
                .collect()
        })
        .collect()
}

/// Moves `parts[from][to]` into `received[to][from]` (sized alike): a copy where `from`
/// is `to`, else a send and a receive, all of one group. Parts with no elements travel
/// not at all.
fn exchange<T: Pod>(
    comm: &Comm,
    streams: &[Stream],
    parts: &[Vec<DeviceBuffer<T>>],
    received: &mut [Vec<DeviceBuffer<T>>],
) -> Result<()> {
    for (rank, stream) in streams.iter().enumerate() {
        received[rank][rank].copy_from(stream, &parts[rank][rank])?;
    }
    if comm.ranks() == 1 {
        return Ok(());
    }
    let mut group = Group::start()?;
    for (from, rank) in comm.rank_list().iter().enumerate() {
        let nccl = rank
            .nccl
            .as_ref()
            .expect("ranks of a communicator of many have NCCL");
        for to in (0..comm.ranks()).filter(|&to| to != from) {
            if !parts[from][to].is_empty() {
                group.send(nccl, &streams[from], &parts[from][to], to)?;
            }
            if !received[from][to].is_empty() {
                group.recv(nccl, &streams[from], &mut received[from][to], to)?;
            }
        }
    }
    group.end()
}

/// The rate, in bytes a second, at which rank 0 scatters to every other rank through the
/// exchange a batch uses (lengths first, then parts): `bytes_per_peer` bytes to each, the
/// median of `runs` timed transfers after one untimed, each waited for on every GPU. The
/// bound a batch's exchange cannot beat: bytes leaving the source over this rate. A
/// communicator of one has no peers, and answers infinity.
pub fn scatter_bandwidth(comm: &Comm, bytes_per_peer: usize, runs: usize) -> Result<f64> {
    let ranks = comm.ranks();
    if ranks == 1 {
        return Ok(f64::INFINITY);
    }
    let streams: Vec<Stream> = comm.rank_list().iter().map(|r| r.stream.clone()).collect();
    let parts = streams
        .iter()
        .enumerate()
        .map(|(from, stream)| {
            (0..ranks)
                .map(|to| {
                    let len = if from == 0 && to != 0 {
                        bytes_per_peer
                    } else {
                        0
                    };
                    DeviceBuffer::<u8>::zeroed(stream, len)
                })
                .collect()
        })
        .collect::<Result<Vec<Vec<_>>>>()?;
    let mut times = Vec::with_capacity(runs.max(1));
    for run in 0..=runs.max(1) {
        let started = std::time::Instant::now();
        let received = all_to_all(comm, &streams, &parts)?;
        streams.iter().try_for_each(Stream::synchronize)?;
        let seconds = started.elapsed().as_secs_f64();
        drop(received);
        if run > 0 {
            times.push(seconds);
        }
    }
    times.sort_by(f64::total_cmp);
    let bytes = bytes_per_peer * (ranks - 1);
    Ok(bytes as f64 / times[times.len() / 2])
}
