//! The device space a writing batch works in, allocated before the table changes so that
//! running out of memory cannot leave a batch half done.

use gpuhash_core::DeviceBuffer;
use gpuhash_core::Stream;
use gpuhash_core::table::{Key, Value};

use super::SIDE_HEADER;
use crate::Result;
use crate::launch::counter;

/// Device scratch space of one writing batch, allocated before the table changes so that
/// running out of memory cannot leave a batch half done.
pub(super) struct Scratch<K, V> {
    /// The batch's counters, by the names in [`counter`].
    pub(super) counters: DeviceBuffer<u64>,
    pub(super) failed_keys: [DeviceBuffer<K>; 2],
    pub(super) failed_values: [DeviceBuffer<V>; 2],
    pub(super) log: DeviceBuffer<K>,
    /// What the place kernel did with each pair of the batch (`GH_CUCKOO_PENDING`, ...).
    pub(super) status: DeviceBuffer<u8>,
    /// The side slot as it was before the batch, for undoing it.
    pub(super) side_before: DeviceBuffer<u32>,
    /// The failed list the last insert launch wrote.
    pub(super) current: usize,
    /// The last user batch sorted by partition, kept for the next batch of its size.
    pub(super) sorted: Option<(DeviceBuffer<K>, DeviceBuffer<V>)>,
}

impl<K: Key, V: Value> Scratch<K, V> {
    /// Room for `pairs` homeless pairs in each failed list, and for a user batch of `batch`
    /// pairs (the eviction log and the place kernel's status); `batch` is 0 for the
    /// scratch of a resize, which re-inserts without either.
    pub(super) fn new(stream: &Stream, pairs: usize, batch: usize) -> Result<Self> {
        Ok(Self {
            counters: DeviceBuffer::zeroed(stream, counter::WORDS)?,
            failed_keys: [
                DeviceBuffer::zeroed(stream, pairs)?,
                DeviceBuffer::zeroed(stream, pairs)?,
            ],
            failed_values: [
                DeviceBuffer::zeroed(stream, pairs)?,
                DeviceBuffer::zeroed(stream, pairs)?,
            ],
            log: DeviceBuffer::zeroed(stream, batch)?,
            status: DeviceBuffer::zeroed(stream, batch)?,
            side_before: DeviceBuffer::zeroed(stream, SIDE_HEADER + size_of::<V>() / 4)?,
            current: 0,
            sorted: None,
        })
    }

    pub(super) fn bytes(&self) -> u64 {
        let lists: usize = self
            .failed_keys
            .iter()
            .map(DeviceBuffer::size_bytes)
            .sum::<usize>()
            + self
                .failed_values
                .iter()
                .map(DeviceBuffer::size_bytes)
                .sum::<usize>();
        let sorted = self
            .sorted
            .as_ref()
            .map_or(0, |(k, v)| k.size_bytes() + v.size_bytes());
        let rest = [
            self.counters.size_bytes(),
            self.log.size_bytes(),
            self.status.size_bytes(),
            self.side_before.size_bytes(),
            sorted,
        ];
        (lists + rest.iter().sum::<usize>()) as u64
    }

    /// The counters, indexed by the names in [`counter`]; waits for `stream`.
    pub(super) fn counters(&self, stream: &Stream) -> Result<[u64; counter::WORDS]> {
        let mut out = [0u64; counter::WORDS];
        self.counters.copy_to_host(stream, &mut out)?;
        Ok(out)
    }

    pub(super) fn reset(&mut self, stream: &Stream) -> Result<()> {
        Ok(self.counters.fill_zero(stream)?)
    }
}

/// The input of one insert launch.
pub(super) struct Input<'a, K, V> {
    pub(super) keys: &'a DeviceBuffer<K>,
    pub(super) values: &'a DeviceBuffer<V>,
    pub(super) count: usize,
    /// When given, a counter of the scratch space that an earlier kernel of the stream
    /// set: the pairs are then the first min(that counter, `count`), read on the device.
    pub(super) count_from: Option<usize>,
    pub(super) skip: Option<&'a DeviceBuffer<u8>>,
}
