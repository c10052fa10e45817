//! The engine under the host forms: a stream lent for each call, copies staged through
//! pinned memory ([`crate::staging`]), and lookups cut into chunks that run in lanes.
//!
//! A form that changes the table runs its device form once on the whole batch, so that
//! the batch takes effect, or fails, as one ([`insert_pairs`], for a multimap's inserts),
//! or in chunks that it can undo ([`super::chunked`], for maps' and sets' inserts and
//! upserts). A lookup changes nothing, so it answers in
//! chunks as it would whole: [`in_lanes`] deals its chunks in turn to a few host threads,
//! each on a stream of its own, each copying its chunk in, running the device form on it
//! and copying the answers out. One lane's copies then overlap another's kernel, the bus
//! carries copies both ways at once, and the lanes' host copies run side by side.

use bytemuck::Pod;

use super::{Key, Value, check_pairs};
use crate::staging::{copy_threads, download, parallel_collect, upload};
use crate::{Device, DeviceBuffer, Error, Stream};

/// The chunk of a form that must run on the whole batch at once.
pub(super) const WHOLE: usize = usize::MAX;

/// Runs `work` on a stream lent by the device's pool, then waits for the stream, so that
/// the host forms return with their work done.
pub(super) fn with_stream<R, E: From<Error>>(
    device: &Device,
    work: impl FnOnce(&Stream) -> Result<R, E>,
) -> Result<R, E> {
    let stream = device.lend_stream()?;
    let answer = work(&stream)?;
    stream.synchronize()?;
    Ok(answer)
}

/// A host form that inserts pairs through a device form, the whole batch in one call (so
/// that it takes effect, or fails, as one), its copies staged through pinned memory.
pub(super) fn insert_pairs<K: Key, V: Value, E: From<Error>>(
    device: &Device,
    keys: &[K],
    values: &[V],
    device_form: impl Fn(&Stream, &DeviceBuffer<K>, &DeviceBuffer<V>) -> Result<(), E>,
) -> Result<(), E> {
    check_pairs(keys.len(), values.len())?;
    with_stream(device, |s| {
        let (k, v) = (upload(s, keys)?, upload(s, values)?);
        device_form(s, &k, &v)
    })
}

/// Runs `work` on every part, the parts dealt in turn to as many lanes as the host has
/// copy threads (at most one a part): each lane a host thread with a stream of its own,
/// running its parts one after another. The first error of a lane ends that lane; the
/// first lane's error is returned.
pub(super) fn in_lanes<P: Send, E: From<Error> + Send>(
    device: &Device,
    parts: Vec<P>,
    work: impl Fn(&Stream, P) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let lanes = copy_threads().min(parts.len()).max(1);
    let run = |stream: &Stream, lane: Vec<P>| lane.into_iter().try_for_each(|p| work(stream, p));
    if lanes == 1 {
        return with_stream(device, |s| run(s, parts));
    }
    let mut dealt: Vec<Vec<P>> = (0..lanes).map(|_| Vec::new()).collect();
    for (i, part) in parts.into_iter().enumerate() {
        dealt[i % lanes].push(part);
    }
    std::thread::scope(|scope| {
        let running: Vec<_> = dealt
            .into_iter()
            .map(|lane| {
                let run = &run;
                scope.spawn(move || with_stream(device, |s| run(s, lane)))
            })
            .collect();
        // Lanes not joined here after an error are joined as the scope ends.
        running.into_iter().try_for_each(|lane| {
            lane.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
}

/// A host form that answers one word a key (a flag, a count) through a device form, on
/// chunks of `chunk` keys in lanes ([`WHOLE`]: once on the whole batch).
pub(super) fn answers_of<K: Key, A: Pod + Send + Sync, E: From<Error> + Send>(
    device: &Device,
    keys: &[K],
    chunk: usize,
    device_form: impl Fn(&Stream, &DeviceBuffer<K>, &mut DeviceBuffer<A>) -> Result<(), E> + Sync,
) -> Result<Vec<A>, E> {
    let mut answers = bytemuck::zeroed_vec(keys.len());
    answers_into(device, keys, &mut answers, chunk, device_form)?;
    Ok(answers)
}

/// [`answers_of`] into the caller's `answers`, which must have the keys' length.
pub(super) fn answers_into<K: Key, A: Pod + Send + Sync, E: From<Error> + Send>(
    device: &Device,
    keys: &[K],
    answers: &mut [A],
    chunk: usize,
    device_form: impl Fn(&Stream, &DeviceBuffer<K>, &mut DeviceBuffer<A>) -> Result<(), E> + Sync,
) -> Result<(), E> {
    check_lengths("keys and answers", keys.len(), answers.len())?;
    let chunk = chunk.max(1);
    // No keys still run one empty batch: a table whose batches are collective over
    // several processes runs as many in each.
    let parts: Vec<_> = match keys.is_empty() {
        true => vec![(keys, answers)],
        false => keys.chunks(chunk).zip(answers.chunks_mut(chunk)).collect(),
    };
    in_lanes(device, parts, |s, (keys, answers)| {
        let mut on_device = DeviceBuffer::unfilled(s, keys.len())?;
        device_form(s, &upload(s, keys)?, &mut on_device)?;
        Ok(download(s, &on_device, answers)?)
    })
}

/// [`answers_of`] for yes-or-no answers.
pub(super) fn flags_of<K: Key, E: From<Error> + Send>(
    device: &Device,
    keys: &[K],
    chunk: usize,
    device_form: impl Fn(&Stream, &DeviceBuffer<K>, &mut DeviceBuffer<u8>) -> Result<(), E> + Sync,
) -> Result<Vec<bool>, E> {
    let flags = answers_of(device, keys, chunk, device_form)?;
    Ok(parallel_collect(flags.len(), |i| flags[i] != 0))
}

/// [`Error::LengthMismatch`] (naming `what`) unless `left == right`.
pub(super) fn check_lengths(what: &'static str, left: usize, right: usize) -> Result<(), Error> {
    if left == right {
        Ok(())
    } else {
        Err(Error::LengthMismatch { what, left, right })
    }
}
