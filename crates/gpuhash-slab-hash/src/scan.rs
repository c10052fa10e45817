//! Passes that read the whole table or every value of keys: counting, export, memory,
//! and the multimap's gather. Each waits for its answer's size.

use gpuhash_core::table::{DeviceRows, Key, MemoryUsage};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::launch::{self, BucketPass};
use crate::shape::Kind;
use crate::table::SlabTable;

impl SlabTable {
    /// Live entries of each bucket (the reserved-key buckets last), on the device.
    fn bucket_counts(&self, stream: &Stream) -> Result<DeviceBuffer<u64>> {
        let buckets = self.all_buckets();
        let mut counts = DeviceBuffer::zeroed(stream, buckets as usize)?;
        let pass = BucketPass::Count {
            counts: &mut counts,
        };
        self.bucket_pass::<u32, u32>(stream, pass)?;
        Ok(counts)
    }

    /// Runs one per-bucket pass over the slabs, holding them for reading.
    fn bucket_pass<K: Key, V: Key>(
        &self,
        stream: &Stream,
        pass: BucketPass<'_, K, V>,
    ) -> Result<()> {
        let slabs = self.slabs.read();
        Ok(self.with_table(&slabs, stream, None, |table| {
            launch::buckets(stream, self.shape, table, self.all_buckets(), pass)
        })?)
    }

    /// Live entries once the work queued on `stream` before has run, summed on the device
    /// into one word.
    pub(crate) fn len(&self, stream: &Stream) -> Result<usize> {
        let mut total = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        self.bucket_pass::<u32, u32>(stream, BucketPass::Total { total: &mut total })?;
        let len = total.to_host(stream)?[0] as usize;
        self.check_lost(stream)?;
        Ok(len)
    }

    /// Every live entry into new device buffers: keys, and values (none for a set).
    pub(crate) fn export<K: Key, V: Key>(
        &self,
        stream: &Stream,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>)> {
        let counts = self.bucket_counts(stream)?.to_host(stream)?;
        let (offsets, total) = exclusive_prefix_sum(&counts);
        let offsets = DeviceBuffer::from_host(stream, &offsets)?;
        let value_count = if self.shape.kind == Kind::Set {
            0
        } else {
            total
        };
        let mut keys = DeviceBuffer::<K>::zeroed(stream, total as usize)?;
        let mut values = DeviceBuffer::<V>::zeroed(stream, value_count as usize)?;
        let pass = BucketPass::Export {
            offsets: &offsets,
            keys: &mut keys,
            values: (self.shape.kind != Kind::Set).then_some(&mut values),
        };
        self.bucket_pass(stream, pass)?;
        self.check_lost(stream)?;
        Ok((keys, values))
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

    /// Multimap: the values of each key laid end to end in key order, as compressed rows.
    /// A batch on another stream may remove values between the count and the gather:
    /// then the gather runs again with the counts it found, which only fall, so that no
    /// slot of the answer is left unwritten.
    pub(crate) fn gather<K: Key, V: Key>(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &DeviceBuffer<u32>,
    ) -> Result<DeviceRows<V>> {
        let mut limits = counts.to_host(stream)?;
        loop {
            let wide: Vec<u64> = limits.iter().map(|&c| u64::from(c)).collect();
            let (mut offsets, total) = exclusive_prefix_sum(&wide);
            offsets.push(total);
            let mut written = DeviceBuffer::from_host(stream, &limits)?;
            let offsets = DeviceBuffer::from_host(stream, &offsets)?;
            let mut values = DeviceBuffer::<V>::unfilled(stream, total as usize)?;
            {
                let slabs = self.slabs.read();
                self.with_table(&slabs, stream, None, |table| {
                    launch::gather(
                        stream,
                        self.shape,
                        table,
                        keys,
                        &mut written,
                        &offsets,
                        &mut values,
                    )
                })?;
            }
            let written = written.to_host(stream)?;
            if written == limits {
                self.check_lost(stream)?;
                return Ok(DeviceRows { offsets, values });
            }
            limits = written;
        }
    }
}

/// Offsets where each group starts when groups of `counts` are laid end to end, and the
/// total.
pub(crate) fn exclusive_prefix_sum(counts: &[u64]) -> (Vec<u64>, u64) {
    let mut total = 0;
    let offsets = counts
        .iter()
        .map(|&c| {
            let at = total;
            total += c;
            at
        })
        .collect();
    (offsets, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_lay_groups_end_to_end() {
        assert_eq!(exclusive_prefix_sum(&[3, 0, 2]), (vec![0, 3, 3], 5));
        assert_eq!(exclusive_prefix_sum(&[]), (vec![], 0));
    }
}
