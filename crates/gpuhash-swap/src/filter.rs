//! Miss filters: a blocked Bloom filter in device memory for each child, consulted for the
//! children on the host, so that a lookup of a key a child does not hold is answered on the
//! device and never crosses the bus.
//!
//! A child's filter holds (at least) every key the child's image holds: it is built from
//! the child's keys when a changed child leaves the device, and emptied when the child is
//! cleared on the host. While a child is resident its filter is not consulted, so removes
//! and inserts there need not keep it current. A filter only ever answers "maybe" for a key
//! of its child; its "no" for others is wrong at a rate that the bits a key set
//! ([`crate::SwapOptions::filter_bits_per_key`]) bound.
//!
//! Batches on several streams read the filters, and a page-out replaces a child's filter
//! without waiting for the device: the filters keep an event recorded after each batch's
//! reads ([`Filters::read_on`]), and a filter replaced or emptied waits for all of them on
//! the device first (a buffer's own tracking follows only the last stream that read it).

use std::ops::Range;

use bytemuck::Pod;
use cudarc::driver::CudaEvent;
use gpuhash_core::{Device, DeviceBuffer, Result, Stream};

use crate::launch::{self, FilterSet};
use crate::partition::Partition;

/// Every child's filter.
pub(crate) struct Filters {
    filters: Vec<DeviceBuffer<u32>>,
    blocks: u32,
    /// Recorded after the kernels that read the filters, on the streams that queued them
    /// (the completed ones pruned).
    readers: Vec<CudaEvent>,
}

/// The keys of a partitioned segment that the filters passed (the whole ranges of the
/// children whose filters the count consulted), with their places in the partitioned
/// segment.
pub(crate) struct Survivors<K> {
    keys: DeviceBuffer<K>,
    places: DeviceBuffer<u32>,
    /// Each child's passed keys (empty for children not checked).
    pub(crate) ranges: Vec<Range<usize>>,
}

impl Filters {
    /// Empty filters of `blocks` blocks for `children` children.
    pub(crate) fn new(stream: &Stream, children: usize, blocks: u32) -> Result<Self> {
        let filters = (0..children)
            .map(|_| DeviceBuffer::zeroed(stream, launch::filter_words(blocks)))
            .collect::<Result<_>>()?;
        Ok(Self {
            filters,
            blocks,
            readers: Vec::new(),
        })
    }

    /// Device bytes of every filter.
    pub(crate) fn bytes(&self) -> u64 {
        self.filters.iter().map(|f| f.size_bytes() as u64).sum()
    }

    /// Blocks of each filter.
    pub(crate) fn blocks(&self) -> u32 {
        self.blocks
    }

    /// A new filter of `blocks` blocks holding `keys`, queued on `stream`.
    pub(crate) fn built<K: Pod>(
        stream: &Stream,
        blocks: u32,
        keys: &DeviceBuffer<K>,
    ) -> Result<DeviceBuffer<u32>> {
        let mut filter = DeviceBuffer::zeroed(stream, launch::filter_words(blocks))?;
        launch::filter_add(stream, keys, blocks, &mut filter)?;
        Ok(filter)
    }

    /// Puts `filter`, made by [`Filters::built`], in child `child`'s place. The old one is
    /// freed once the kernels that read the filters so far have run, on the device; should
    /// the driver refuse to order that, once the host has seen them run; should that fail
    /// too, never (its memory leaks rather than being freed under a reader).
    pub(crate) fn replace(&mut self, device: &Device, child: usize, filter: DeviceBuffer<u32>) {
        assert_eq!(
            filter.len(),
            launch::filter_words(self.blocks),
            "a filter of its blocks"
        );
        let old = std::mem::replace(&mut self.filters[child], filter);
        let ordered = device
            .lend_stream()
            .and_then(|stream| self.after_readers(&stream).map(|()| stream));
        match ordered {
            // Read on a stream that waits for every reader: the free, which waits for the
            // buffer's last read, follows them all.
            Ok(stream) => drop(old.address(&stream)),
            Err(_) if self.readers.iter().all(|e| e.synchronize().is_ok()) => {}
            Err(_) => std::mem::forget(old),
        }
    }

    /// Empties child `child`'s filter, on `stream`, after the kernels that read it.
    pub(crate) fn clear(&mut self, stream: &Stream, child: usize) -> Result<()> {
        self.after_readers(stream)?;
        self.filters[child].fill_zero(stream)
    }

    /// Records that kernels on `stream` read the filters: a filter replaced or emptied
    /// waits for them (should the driver refuse the event, they are waited for now).
    pub(crate) fn read_on(&mut self, stream: &Stream) -> Result<()> {
        self.readers.retain(|e| !e.is_complete());
        match stream.cuda_stream().record_event(None) {
            Ok(event) => {
                self.readers.push(event);
                Ok(())
            }
            Err(_) => stream.synchronize(),
        }
    }

    /// Makes `stream` wait for every kernel that read the filters.
    fn after_readers(&self, stream: &Stream) -> Result<()> {
        for reader in &self.readers {
            stream.cuda_stream().wait(reader)?;
        }
        Ok(())
    }

    /// The filters of the children `consult` marks, for kernels on `stream`, or `None`
    /// when it marks none.
    pub(crate) fn set<'a>(
        &'a self,
        stream: &'a Stream,
        consult: &[bool],
    ) -> Result<Option<FilterSet<'a>>> {
        if !consult.iter().any(|&c| c) {
            return Ok(None);
        }
        let filters = self
            .filters
            .iter()
            .zip(consult)
            .map(|(filter, &consulted)| consulted.then_some(filter));
        FilterSet::new(stream, filters, self.blocks).map(Some)
    }
}

/// The keys of `partition` that the filters passed, when its count `consulted` filters:
/// the count left out every key they ruled out, so the survivors are the whole ranges of
/// the children whose filters it consulted, as partitioned. Nothing checks them again: the
/// survivors are a copy of the partition's keys, each at its own place (places `0, 1,
/// ...`), queued on `stream`, with no wait.
pub(crate) fn survivors<K: Pod, V: Pod>(
    stream: &Stream,
    partition: &Partition<K, V>,
    consulted: bool,
) -> Result<Survivors<K>> {
    let ranges = partition
        .ranges
        .iter()
        .zip(&partition.passed)
        .map(|(range, &passed)| range.start..range.start + passed)
        .collect();
    let len = match consulted {
        true => partition.keys().len(),
        false => 0,
    };
    let mut places = DeviceBuffer::unfilled(stream, len)?;
    launch::iota(stream, &mut places)?;
    Ok(Survivors {
        keys: launch::copy_range(stream, partition.keys(), 0..len)?,
        places,
        ranges,
    })
}

impl<K: Pod> Survivors<K> {
    /// Every passed key, each child's compacted at the front of its range.
    pub(crate) fn keys(&self) -> &DeviceBuffer<K> {
        &self.keys
    }

    /// Each passed key's place in the partitioned segment.
    pub(crate) fn places(&self) -> &DeviceBuffer<u32> {
        &self.places
    }

    /// The keys of `range`, in a buffer of their own.
    pub(crate) fn keys_of(&self, stream: &Stream, range: Range<usize>) -> Result<DeviceBuffer<K>> {
        launch::copy_range(stream, &self.keys, range)
    }

    /// The places (in the partitioned segment) of the keys of `range`.
    pub(crate) fn places_of(
        &self,
        stream: &Stream,
        range: Range<usize>,
    ) -> Result<DeviceBuffer<u32>> {
        launch::copy_range(stream, &self.places, range)
    }
}
