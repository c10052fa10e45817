//! The all-to-all of a batch, built from NCCL's grouped sends and receives (NCCL has no
//! all-to-all of uneven parts): every local rank holds one part for every rank, local or
//! not; first the parts' lengths travel (one word a pair of ranks), so that each receiver
//! sizes its buffers, then the parts themselves. A part a rank keeps is a copy on its
//! device, so a communicator of one runs the same steps with no NCCL. Every process of a
//! communicator calls each exchange, in the same order.

use bytemuck::Pod;
use gpuhash_core::{DeviceBuffer, Result, Stream};

use crate::comm::Comm;
use crate::launch::Group;

/// `parts[from][to]`: the part the local rank at place `from` holds for rank `to` (of
/// every rank), on `streams[from]`'s device. Returns `received[to][from]` for the local
/// rank at place `to` and every rank `from`, on `streams[to]`'s device. Waits for each
/// local receiver's stream once, for the lengths.
pub(crate) fn all_to_all<T: Pod>(
    comm: &Comm,
    streams: &[Stream],
    parts: &[Vec<&DeviceBuffer<T>>],
) -> Result<Vec<Vec<DeviceBuffer<T>>>> {
    let lengths: Vec<Vec<DeviceBuffer<u64>>> = parts
        .iter()
        .zip(streams)
        .map(|(row, stream)| {
            row.iter()
                .map(|part| DeviceBuffer::from_host(stream, &[part.len() as u64]))
                .collect()
        })
        .collect::<Result<_>>()?;
    let mut received_lengths = empty_matrix::<u64>(comm, streams, 1)?;
    exchange(
        comm,
        streams,
        &by_reference(&lengths),
        &mut received_lengths,
    )?;
    let mut received = received_lengths
        .iter()
        .zip(streams)
        .map(|(row, stream)| {
            row.iter()
                .map(|len| DeviceBuffer::unfilled(stream, len.to_host(stream)?[0] as usize))
                .collect()
        })
        .collect::<Result<Vec<Vec<_>>>>()?;
    exchange(comm, streams, parts, &mut received)?;
    Ok(received)
}

/// Every buffer of `rows` by reference.
pub(crate) fn by_reference<T>(rows: &[Vec<DeviceBuffer<T>>]) -> Vec<Vec<&DeviceBuffer<T>>> {
    rows.iter().map(|row| row.iter().collect()).collect()
}

/// A buffer of `len` elements for every rank, on each local rank's device.
fn empty_matrix<T: Pod>(
    comm: &Comm,
    streams: &[Stream],
    len: usize,
) -> Result<Vec<Vec<DeviceBuffer<T>>>> {
    streams
        .iter()
        .map(|stream| {
            (0..comm.ranks())
                .map(|_| DeviceBuffer::zeroed(stream, len))
                .collect()
        })
        .collect()
}

/// Moves `parts[from][to]` into `received[to][from]` (sized alike; places of local
/// ranks, every rank's index otherwise): a copy where `from` is `to`, else a send and a
/// receive, all of one group. Parts with no elements travel not at all.
fn exchange<T: Pod>(
    comm: &Comm,
    streams: &[Stream],
    parts: &[Vec<&DeviceBuffer<T>>],
    received: &mut [Vec<DeviceBuffer<T>>],
) -> Result<()> {
    for (local, stream) in streams.iter().enumerate() {
        let me = comm.global(local);
        received[local][me].copy_from(stream, parts[local][me])?;
    }
    if comm.ranks() == 1 {
        return Ok(());
    }
    let mut group = Group::start()?;
    for (local, rank) in comm.local_list().iter().enumerate() {
        let me = comm.global(local);
        let nccl = rank
            .nccl
            .as_ref()
            .expect("ranks of a communicator of many have NCCL");
        for peer in (0..comm.ranks()).filter(|&peer| peer != me) {
            if !parts[local][peer].is_empty() {
                group.send(nccl, &streams[local], parts[local][peer], peer)?;
            }
            if !received[local][peer].is_empty() {
                group.recv(nccl, &streams[local], &mut received[local][peer], peer)?;
            }
        }
    }
    group.end()
}

/// Field by field, the sum over every rank of each local rank's `words`, the same in
/// every process: summed here where every rank is local, else exchanged (each local rank
/// sending its words to every rank) and summed as the first local rank receives them.
pub(crate) fn sum_over_ranks<const N: usize>(
    comm: &Comm,
    streams: &[Stream],
    words: &[[u64; N]],
) -> Result<[u64; N]> {
    let add = |sum: [u64; N], words: &[u64; N]| std::array::from_fn(|i| sum[i] + words[i]);
    if comm.is_whole() {
        return Ok(words.iter().fold([0; N], add));
    }
    let mine = words
        .iter()
        .zip(streams)
        .map(|(words, stream)| DeviceBuffer::from_host(stream, words))
        .collect::<Result<Vec<_>>>()?;
    let parts: Vec<Vec<_>> = mine.iter().map(|w| vec![w; comm.ranks()]).collect();
    let received = all_to_all(comm, streams, &parts)?;
    received[0].iter().try_fold([0; N], |sum, words| {
        let words: [u64; N] = words.to_host(&streams[0])?.try_into().expect("N words");
        Ok(add(sum, &words))
    })
}

/// The rate, in bytes a second, at which rank 0 scatters to every other rank through the
/// exchange a batch uses (lengths first, then parts): `bytes_per_peer` bytes to each, the
/// median of `runs` timed transfers after one untimed, each waited for on every local
/// GPU. The bound a batch's exchange cannot beat: bytes leaving the source over this
/// rate. A communicator of one has no peers, and answers infinity. Collective: every
/// process of a communicator of several calls it with the same arguments.
pub fn scatter_bandwidth(comm: &Comm, bytes_per_peer: usize, runs: usize) -> Result<f64> {
    let ranks = comm.ranks();
    if ranks == 1 {
        return Ok(f64::INFINITY);
    }
    let streams = comm.own_streams();
    let parts = streams
        .iter()
        .enumerate()
        .map(|(local, stream)| {
            (0..ranks)
                .map(|to| {
                    let len = if comm.global(local) == 0 && to != 0 {
                        bytes_per_peer
                    } else {
                        0
                    };
                    DeviceBuffer::<u8>::zeroed(stream, len)
                })
                .collect()
        })
        .collect::<Result<Vec<Vec<_>>>>()?;
    let parts = by_reference(&parts);
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
