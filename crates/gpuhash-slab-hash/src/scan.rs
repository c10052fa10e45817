//! Passes that read the whole table or every value of keys: counting, export, memory,
//! and the multimap's gather. Counts are laid end to end on the device
//! ([`gpuhash_core::scan`]): only a total, the size of an answer, reaches the host.
//!
//! Export runs in three passes: live pairs per chunk of buckets, an exclusive scan of
//! those counts into each chunk's offset, and a pass that writes each chunk's pairs from
//! its offset. A single pass with a global cursor, one atomic a slab, would save the count
//! and the scan but would put every warp's slab on one word of memory (millions of atomics
//! for a large table) and give a different order on every run; the chunked count keeps the
//! order of the buckets, so an export of the same table is the same every time, and costs
//! one word a chunk of 32 buckets.

use gpuhash_core::scan::{exclusive_scan, scanned_total};
use gpuhash_core::table::{DeviceRows, Key, MemoryUsage};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::launch::{self, BucketPass, GatherBuffers};
use crate::shape::Kind;
use crate::table::{SlabTable, Slabs};

/// Tries of an export beside other batches before it runs alone
/// ([`SlabTable::consistent_export`]).
const SHARED_EXPORT_TRIES: usize = 4;

/// Where an export writes: keys, and values unless the table is a set.
pub(crate) struct ExportOutputs<'a, K, V> {
    pub keys: &'a mut DeviceBuffer<K>,
    pub values: Option<&'a mut DeviceBuffer<V>>,
}

impl SlabTable {
    /// Runs one per-bucket pass over the slabs the caller holds.
    fn bucket_pass<K: Key, V: Key>(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        pass: BucketPass<'_, K, V>,
    ) -> Result<()> {
        Ok(self.with_table(slabs, stream, None, |table| {
            launch::buckets(stream, self.shape, table, self.all_buckets(), pass)
        })?)
    }

    /// Live entries once the work queued on `stream` before has run, summed on the device
    /// into one word.
    pub(crate) fn len(&self, stream: &Stream) -> Result<usize> {
        let mut total = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        let pass = BucketPass::Total { total: &mut total };
        self.bucket_pass::<u32, u32>(&self.slabs.read(), stream, pass)?;
        let len = scanned_total(stream, &total)? as usize;
        self.check_lost(stream)?;
        Ok(len)
    }

    /// Where each chunk of buckets starts its pairs (one offset more than the chunks, the
    /// last the total) and the total, counted and scanned on the device.
    fn export_offsets(&self, slabs: &Slabs, stream: &Stream) -> Result<(DeviceBuffer<u64>, usize)> {
        let chunks = launch::chunks(self.all_buckets());
        let mut counts = DeviceBuffer::unfilled(stream, chunks)?;
        let pass = BucketPass::Count {
            counts: &mut counts,
        };
        self.bucket_pass::<u32, u32>(slabs, stream, pass)?;
        let mut offsets = DeviceBuffer::unfilled(stream, chunks + 1)?;
        exclusive_scan(stream, &counts, &mut offsets)?;
        let total = scanned_total(stream, &offsets)? as usize;
        Ok((offsets, total))
    }

    /// Every live entry into new device buffers: keys, and values (none for a set).
    pub(crate) fn export<K: Key, V: Key>(
        &self,
        stream: &Stream,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>)> {
        self.consistent_export(stream, |slabs, short_chunks| {
            let (offsets, total) = self.export_offsets(slabs, stream)?;
            let mut keys = DeviceBuffer::<K>::unfilled(stream, total)?;
            let value_count = if self.is_set() { 0 } else { total };
            let mut values = DeviceBuffer::<V>::unfilled(stream, value_count)?;
            let outputs = ExportOutputs {
                keys: &mut keys,
                values: (!self.is_set()).then_some(&mut values),
            };
            self.write_export(slabs, stream, &offsets, outputs, short_chunks)?;
            Ok((keys, values))
        })
    }

    /// Every live entry into the front of the caller's buffers (values, none for a set,
    /// must be given for the others); returns how many. Buffers too short for them are
    /// [`gpuhash_core::Error::InvalidInput`], and nothing is written, unless the table
    /// grew past them during an export run again (see [`SlabTable::consistent_export`]):
    /// then the front of the buffers may hold pairs of the try that came short.
    pub(crate) fn export_into<K: Key, V: Key>(
        &self,
        stream: &Stream,
        mut outputs: ExportOutputs<'_, K, V>,
    ) -> Result<usize> {
        let room = match &outputs.values {
            Some(values) => outputs.keys.len().min(values.len()),
            None if self.is_set() => outputs.keys.len(),
            None => 0,
        };
        self.consistent_export(stream, |slabs, short_chunks| {
            let (offsets, total) = self.export_offsets(slabs, stream)?;
            if room < total {
                return Err(gpuhash_core::Error::InvalidInput(format!(
                    "export_into: room for {room} pairs, the table holds {total}"
                ))
                .into());
            }
            let outputs = ExportOutputs {
                keys: &mut *outputs.keys,
                values: outputs.values.as_deref_mut(),
            };
            self.write_export(slabs, stream, &offsets, outputs, short_chunks)?;
            Ok(total)
        })
    }

    /// Runs `export` (count, scan and the write pass, on the slabs given) until a try
    /// writes every pair it counted, and returns what it made. A batch on another stream
    /// that removes pairs between the count and the write pass leaves a chunk short of its
    /// range, whose end nobody wrote: the pass raises the flag it is given, read with the
    /// lost-insert flag once the stream is done (one more word, no more waits), and the
    /// export runs again, beside other batches, up to [`SHARED_EXPORT_TRIES`] times. Then
    /// it runs alone, as compaction does: the table's lock held for writing (no batch
    /// queues meanwhile) after waiting for the device, until its kernels are done; its
    /// count is exact and its pass needs no flag. So the call always ends, and an answer
    /// holds only pairs the table held. Pairs inserted during a try may or may not be in
    /// it (a chunk that finds more than it counted stops at its range).
    fn consistent_export<R>(
        &self,
        stream: &Stream,
        mut export: impl FnMut(&Slabs, Option<&mut DeviceBuffer<u32>>) -> Result<R>,
    ) -> Result<R> {
        for _ in 0..SHARED_EXPORT_TRIES {
            let mut short_chunks = DeviceBuffer::<u32>::zeroed(stream, 1)?;
            let exported = export(&self.slabs.read(), Some(&mut short_chunks))?;
            let mut short = stream.device().pinned_pool().take::<u32>(1)?;
            short_chunks.copy_to_pinned_range_async(stream, 0..1, &mut short, 0)?;
            self.check_lost(stream)?;
            short.wait()?;
            if short[0] == 0 {
                return Ok(exported);
            }
        }
        let exported = {
            let slabs = self.slabs.write();
            self.device.synchronize()?;
            let exported = export(&slabs, None)?;
            stream.synchronize()?;
            exported
        };
        self.check_lost(stream)?;
        Ok(exported)
    }

    /// Queues the pass that writes each chunk's pairs from its offset, raising
    /// `short_chunks` (when given) if a chunk finds fewer than its range.
    fn write_export<K: Key, V: Key>(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        offsets: &DeviceBuffer<u64>,
        outputs: ExportOutputs<'_, K, V>,
        short_chunks: Option<&mut DeviceBuffer<u32>>,
    ) -> Result<()> {
        let pass = BucketPass::Export {
            offsets,
            keys: outputs.keys,
            values: outputs.values,
            short_chunks,
        };
        self.bucket_pass(slabs, stream, pass)
    }

    fn is_set(&self) -> bool {
        self.shape.kind == Kind::Set
    }

    /// Device memory the table reserves and uses.
    pub(crate) fn memory(&self, stream: &Stream) -> Result<MemoryUsage> {
        let (head_bytes, reserved, slabs_in_use) = {
            let slabs = self.slabs.read();
            (
                slabs.heads.size_bytes() as u64,
                slabs.alloc.bytes_reserved() as u64,
                slabs.alloc.slabs_in_use(stream)?,
            )
        };
        Ok(MemoryUsage {
            bytes_reserved: head_bytes + reserved,
            bytes_in_use: head_bytes + slabs_in_use * 128,
            entry_bytes: self.len(stream)? as u64 * self.shape.entry_bytes(),
        })
    }

    /// Multimap: the values of each key laid end to end in key order, as compressed rows,
    /// their offsets scanned on the device. A batch on another stream may remove values
    /// between the count and the gather: the gather then raises a flag, and runs again
    /// with the counts it found, which only fall, so that no slot of the answer is left
    /// unwritten.
    pub(crate) fn gather<K: Key, V: Key>(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &DeviceBuffer<u32>,
    ) -> Result<DeviceRows<V>> {
        let mut limits = DeviceBuffer::<u32>::unfilled(stream, counts.len())?;
        limits.copy_from(stream, counts)?;
        loop {
            let mut offsets = DeviceBuffer::unfilled(stream, limits.len() + 1)?;
            exclusive_scan(stream, &limits, &mut offsets)?;
            let total = scanned_total(stream, &offsets)? as usize;
            let mut values = DeviceBuffer::<V>::unfilled(stream, total)?;
            let mut short_rows = DeviceBuffer::<u32>::zeroed(stream, 1)?;
            {
                let slabs = self.slabs.read();
                self.with_table(&slabs, stream, None, |table| {
                    let buffers = GatherBuffers {
                        keys,
                        counts: &mut limits,
                        offsets: &offsets,
                        out: &mut values,
                        short_rows: &mut short_rows,
                    };
                    launch::gather(stream, self.shape, table, buffers)
                })?;
            }
            if short_rows.to_host(stream)?[0] == 0 {
                self.check_lost(stream)?;
                return Ok(DeviceRows { offsets, values });
            }
        }
    }
}
