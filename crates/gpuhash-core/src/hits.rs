//! Compact answers: the hits of lookup batches, or only their count, gathered on the device,
//! so that a join ships back what matched and nothing else.
//!
//! A lookup answers every query with a found flag and a value. [`DeviceHits`] gathers, from
//! one or more such answers, each hit's query index and value, laid end to end in no
//! particular order (one atomic a warp takes the places), with their count;
//! [`count_hits`] only counts. The contract's host forms
//! [`Map::get_hits`](crate::table::Map::get_hits) and
//! [`Map::count_hits`](crate::table::Map::count_hits) run on them.

use bytemuck::Pod;

use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::GhHitsParams;
use crate::{DeviceBuffer, Error, Result, Stream};

static HITS_IMAGE: KernelImage = crate::kernel_image!("hits");
static HITS: Kernel<GhHitsParams> = Kernel::new(&HITS_IMAGE, "gh_hits");

// SAFETY: bindgen's repr(C) copy of the C struct the kernel takes.
unsafe impl KernelParams for GhHitsParams {}

/// Query indices are 32-bit on the device.
const MAX_QUERIES: usize = 1 << 32;

/// The hits of a batch on the host: `values[j]` answers query `index[j]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hits<V> {
    /// The index, in the batch, of each hit's query.
    pub index: Vec<u32>,
    /// Each hit's value.
    pub values: Vec<V>,
}

impl<V: Copy> Hits<V> {
    /// The hits sorted by query index (they come in no particular order).
    pub fn sorted(mut self) -> Self {
        let mut pairs: Vec<(u32, V)> = self.index.into_iter().zip(self.values).collect();
        pairs.sort_unstable_by_key(|&(i, _)| i);
        (self.index, self.values) = pairs.into_iter().unzip();
        self
    }
}

/// Hits gathered on the device, with room for every query of the batch.
#[derive(Debug)]
pub struct DeviceHits<V> {
    index: DeviceBuffer<u32>,
    values: DeviceBuffer<V>,
    total: DeviceBuffer<u64>,
}

impl<V: Pod> DeviceHits<V> {
    /// Room for the hits of `queries` queries (at most 2^32: [`Error::InvalidInput`]
    /// beyond, whose indices do not fit 32 bits). Values must be whole 4-byte words.
    pub fn with_capacity(stream: &Stream, queries: usize) -> Result<Self> {
        if queries > MAX_QUERIES || !size_of::<V>().is_multiple_of(4) {
            return Err(Error::InvalidInput(format!(
                "hits: {queries} queries of {}-byte values (at most 2^32 queries of whole 4-byte words)",
                size_of::<V>()
            )));
        }
        Ok(Self {
            index: DeviceBuffer::unfilled(stream, queries)?,
            values: DeviceBuffer::unfilled(stream, queries)?,
            total: DeviceBuffer::zeroed(stream, 1)?,
        })
    }

    /// Queues the gathering of the hits of one lookup answer (`found`, `values`) whose
    /// queries are `base..base + found.len()` of the batch.
    pub fn gather(
        &mut self,
        stream: &Stream,
        base: usize,
        found: &DeviceBuffer<u8>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        let end = base.checked_add(found.len());
        if values.len() != found.len() || end.is_none_or(|end| end > self.index.len()) {
            return Err(Error::InvalidInput(format!(
                "hits: answers of {} flags and {} values from query {base} do not fit {} queries",
                found.len(),
                values.len(),
                self.index.len()
            )));
        }
        launch_hits(
            stream,
            found,
            Some((values, &mut self.index, &mut self.values)),
            base,
            &mut self.total,
        )
    }

    /// How many hits were gathered; waits for the stream.
    pub fn count(&self, stream: &Stream) -> Result<usize> {
        Ok(self.total.to_host(stream)?[0] as usize)
    }

    /// The hits, copied to the host (only the hits travel); waits for the stream.
    pub fn to_host(&self, stream: &Stream) -> Result<Hits<V>> {
        let count = self.count(stream)?;
        let pool = stream.device().pinned_pool();
        let mut index = pool.take::<u32>(count)?;
        let mut values = pool.take::<V>(count)?;
        self.index
            .copy_to_pinned_range_async(stream, 0..count, &mut index, 0)?;
        self.values
            .copy_to_pinned_range_async(stream, 0..count, &mut values, 0)?;
        Ok(Hits {
            index: index[..count].to_vec(),
            values: values[..count].to_vec(),
        })
    }
}

/// Queues the counting of the hits among `found` into `total[0]` (added to what it holds).
pub fn count_hits(
    stream: &Stream,
    found: &DeviceBuffer<u8>,
    total: &mut DeviceBuffer<u64>,
) -> Result<()> {
    if total.is_empty() {
        return Err(Error::InvalidInput("count_hits: an empty total".into()));
    }
    launch_hits::<u32>(stream, found, None, 0, total)
}

/// Where hits go: the values they come from, then the index and value outputs.
type Outputs<'a, V> = (
    &'a DeviceBuffer<V>,
    &'a mut DeviceBuffer<u32>,
    &'a mut DeviceBuffer<V>,
);

fn launch_hits<V: Pod>(
    stream: &Stream,
    found: &DeviceBuffer<u8>,
    outputs: Option<Outputs<'_, V>>,
    base: usize,
    total: &mut DeviceBuffer<u64>,
) -> Result<()> {
    if found.is_empty() {
        return Ok(());
    }
    let f = found.address(stream);
    let t = total.address_mut(stream);
    let mut params = GhHitsParams {
        found: f.address as *const u8,
        count: found.len() as u64,
        base: base as u64,
        hits: t.address as *mut _,
        value_words: (size_of::<V>() / 4) as u32,
        ..GhHitsParams::default()
    };
    let _guards = outputs.map(|(values, index, out)| {
        params.capacity = index.len() as u64;
        let guards = (
            values.address(stream),
            index.address_mut(stream),
            out.address_mut(stream),
        );
        params.values = guards.0.address as *const u32;
        params.hit_index = guards.1.address as *mut u32;
        params.hit_values = guards.2.address as *mut u32;
        guards
    });
    let shape = LaunchShape::grid_stride(stream.device(), found.len() as u64, 256);
    // SAFETY: `found` (and `values`) hold `count` elements; the outputs hold `capacity`
    // entries and the kernel writes below it only; `total` holds one word; every address
    // guard is held until the launch is queued.
    unsafe { HITS.launch(stream, shape, params) }
}
