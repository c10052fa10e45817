//! [`HyperspaceIndex`]: the key index and the attribute subspaces, each holding every
//! tuple, kept in step by the write batches of `writes.rs`; lookups by key here,
//! searches in `search.rs`.
//!
//! Phase order of each batch (what a concurrent reader may see in between):
//! - insert: the key index first (it decides which keys are new), then each subspace;
//! - delete: each subspace first, then the key index;
//! - modify: new copies into every space, a wait for every search that began before
//!   they were all in ([`crate::grace`], the kernels of async searches included), then the old copies out of every space, each by
//!   the key slot a lookup found before the insert.

use std::sync::Arc;

use gpuhash_core::staging::upload;
use gpuhash_core::table::MemoryUsage;
use gpuhash_core::{Device, DeviceBuffer, Stream};

use crate::Result;
use crate::adaptive::AdaptiveReport;
use crate::adaptive::sketched_beside;
use crate::build::tuple_rows;
use crate::grace::GracePeriod;
use crate::launch::Lookup;
use crate::observations::{Observations, population_of};
use crate::options::HyperspaceOptions;
use crate::regroup::RegroupPolicy;
use crate::shape::SpaceShape;
use crate::space::Space;
use crate::tuples::{self, DeviceTuples, Tuple, TupleBatch, Tuples};
use gpuhash_slab_list::layouts::GH_SLAB_EMPTY_WORD;
use parking_lot::{Mutex, RwLock};

use crate::reclaim::ReclaimCounter;

/// What an insert did with each tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InsertStatus {
    /// The tuple went in.
    Inserted,
    /// The index held the key already; the tuple it holds stays as it was.
    Present,
}

/// A hyperspace index of tuples `(key, A1..Ap, value)` on one GPU (see the crate docs).
#[derive(Debug)]
pub struct HyperspaceIndex {
    device: Device,
    attribute_count: usize,
    pub(crate) capacity: u64,
    pub(crate) options: RwLock<HyperspaceOptions>,
    /// The key index, which never changes shape.
    pub(crate) key_index: Space,
    /// The attribute subspaces; a regroup swaps in new ones, while batches that began
    /// before keep the ones they took.
    pub(crate) subspaces: RwLock<Arc<Vec<Space>>>,
    /// Held for reading by every batch that writes, for writing by a regroup, so that no
    /// write lands in subspaces a regroup is about to replace.
    pub(crate) writes: RwLock<()>,
    pub(crate) grace: GracePeriod,
    /// Tuples removed since the last reclaim of removed slots.
    pub(crate) reclaim_counter: ReclaimCounter,
    /// The query history and the population, which route searches and feed regrouping.
    pub(crate) observations: Mutex<Observations>,
    /// The regroup policy of the options' `regrouping`.
    pub(crate) policy: RegroupPolicy,
    /// Whether searches regroup by themselves.
    pub(crate) adaptive: bool,
    /// Held by a regroup from start to end: one at a time.
    pub(crate) regrouping: Mutex<()>,
    pub(crate) report: Mutex<AdaptiveReport>,
}

/// The spaces one batch works on: the key index and the subspaces as they were when it
/// began.
pub(crate) struct Spaces<'a> {
    key_index: &'a Space,
    subspaces: Arc<Vec<Space>>,
}

impl Spaces<'_> {
    /// The key index first, then the subspaces.
    pub(crate) fn all(&self) -> Vec<&Space> {
        std::iter::once(self.key_index)
            .chain(self.subspaces.iter())
            .collect()
    }
}

impl HyperspaceIndex {
    /// An empty index of tuples with `p` attributes (1 to 8), its spaces sized for
    /// `capacity` tuples (they hold more, with longer chains).
    pub fn new(
        device: &Device,
        p: usize,
        capacity: u64,
        options: HyperspaceOptions,
    ) -> Result<Self> {
        let shapes = options.shapes(p, capacity)?;
        Self::with_shapes(device, p, capacity, options, shapes)
    }

    /// An empty index of spaces of shapes `shapes` (the key index first).
    fn with_shapes(
        device: &Device,
        p: usize,
        capacity: u64,
        options: HyperspaceOptions,
        shapes: Vec<SpaceShape>,
    ) -> Result<Self> {
        // Every option checked first: bad ones allocate nothing.
        let observations = Observations::new(p, options.half_life())?;
        let policy =
            RegroupPolicy::new(p, options.regrouping.clone())?.with_key_spread(options.key_spread);
        let mut spaces = shapes
            .into_iter()
            .map(|shape| Space::new(device, shape, options.seed, p, capacity, options.variant))
            .collect::<Result<Vec<_>>>()?;
        let key_index = spaces.remove(0);
        Ok(Self {
            device: device.clone(),
            attribute_count: p,
            capacity,
            key_index,
            subspaces: RwLock::new(Arc::new(spaces)),
            writes: RwLock::new(()),
            grace: GracePeriod::default(),
            reclaim_counter: ReclaimCounter::new(options.reclaim_after, capacity),
            observations: Mutex::new(observations),
            policy,
            adaptive: options.adaptive,
            regrouping: Mutex::new(()),
            report: Mutex::new(AdaptiveReport::default()),
            options: RwLock::new(options),
        })
    }

    /// An index of `p` attributes holding `batch`, built in bulk: every space sorts the
    /// tuples by bucket and writes whole nodes. The keys must be unique and not reserved
    /// (checked once they are on the device, before any space is made).
    /// The spaces are sized for the batch and the distinct values of its attribute
    /// columns, sketched first (see [`crate::HyperspaceOptions::key_spread`]).
    pub fn build(
        device: &Device,
        p: usize,
        batch: TupleBatch<'_>,
        options: HyperspaceOptions,
    ) -> Result<Self> {
        tuples::check_shape(p, batch)?;
        let n = batch.len() as u64;
        // The spaces are sized from the columns' distinct values, sketched while the
        // tuples go up and their keys are checked.
        let stream = device.lend_stream()?;
        let (tuples, sketches) = sketched_beside(batch.attributes, batch.len(), || {
            let tuples = DeviceTuples::from_batch(&stream, batch)?;
            tuples::check_keys_on(&stream, &tuples.keys, Some(batch.keys))?;
            Ok::<_, crate::HyperspaceError>(tuples)
        });
        let tuples = tuples?;
        let shapes = options.shapes_for(p, n, &population_of(n, &sketches))?;
        let index = Self::with_shapes(device, p, n, options, shapes)?;
        let rows = tuple_rows(&stream, &tuples)?;
        for space in index.spaces().all() {
            space.build(&stream, &tuples, &rows)?;
        }
        stream.synchronize()?;
        index.observations.lock().added(n, &sketches);
        Ok(index)
    }

    /// The device the index lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Attributes a tuple has (p).
    pub fn attribute_count(&self) -> usize {
        self.attribute_count
    }

    /// The options the index was made with (the subspaces as the last regroup set them).
    pub fn options(&self) -> HyperspaceOptions {
        self.options.read().clone()
    }

    /// The spaces as they are now.
    pub(crate) fn spaces(&self) -> Spaces<'_> {
        Spaces {
            key_index: &self.key_index,
            subspaces: self.subspaces.read().clone(),
        }
    }

    /// The shapes of the spaces: the key index first, then the attribute subspaces.
    pub fn space_shapes(&self) -> Vec<SpaceShape> {
        let spaces = self.spaces();
        spaces.all().iter().map(|s| s.shape().clone()).collect()
    }

    /// The bucket of each tuple of `batch` in space `space` (0 the key index), as the
    /// kernels compute it; [`SpaceShape::bucket`] computes the same on the host.
    pub fn buckets(&self, space: usize, batch: TupleBatch<'_>) -> Result<Vec<u32>> {
        tuples::check_shape(self.attribute_count, batch)?;
        let spaces = self.spaces();
        let all = spaces.all();
        let Some(space) = all.get(space) else {
            return Err(gpuhash_core::Error::InvalidInput(format!(
                "no space {space}: the index has {}",
                all.len()
            ))
            .into());
        };
        let stream = self.device.lend_stream()?;
        let tuples = DeviceTuples::from_batch(&stream, batch)?;
        Ok(space.buckets(&stream, &tuples)?.to_host(&stream)?)
    }

    /// The tuple of each key, or `None`. Waits once, for the tuples: a key not found
    /// comes back as the reserved empty word, so its found flag need not cross.
    pub fn get(&self, keys: &[u32]) -> Result<Vec<Option<Tuple>>> {
        let stream = self.device.lend_stream()?;
        let keys_on = upload(&stream, keys)?;
        let mut found = DeviceBuffer::<u8>::zeroed(&stream, keys.len())?;
        let mut tuples = DeviceTuples::unfilled(&stream, self.attribute_count, keys.len())?;
        self.get_async(&stream, &keys_on, &mut found, &mut tuples)?;
        let tuples = tuples.to_host(&stream, self.attribute_count)?;
        Ok((0..tuples.len())
            .map(|i| (tuples.keys[i] != GH_SLAB_EMPTY_WORD).then(|| tuples.tuple(i)))
            .collect())
    }

    /// Queues lookups of `keys` on `stream` and returns without waiting: `found[i]`
    /// becomes 1 with the tuple in slot i of `out` (which holds `keys.len()` tuples of p
    /// attributes), or 0 with the (reserved) empty word as slot i's key.
    pub fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<u32>,
        found: &mut DeviceBuffer<u8>,
        out: &mut DeviceTuples,
    ) -> Result<()> {
        let n = keys.len();
        let lengths = [
            ("keys and found", n, found.len()),
            ("keys and answer keys", n, out.keys.len()),
            ("keys and answer values", n, out.values.len()),
            (
                "p columns of keys and answer attributes",
                n * self.attribute_count,
                out.attributes.len(),
            ),
        ];
        for (what, left, right) in lengths {
            if left != right {
                return Err(gpuhash_core::Error::LengthMismatch { what, left, right }.into());
            }
        }
        let lookup = Lookup {
            keys,
            attributes: None,
        };
        self.key_index.get(stream, lookup, found, Some(out), None)
    }

    /// Tuples in the index, once the work queued before has run.
    pub fn len(&self) -> Result<usize> {
        let stream = self.device.lend_stream()?;
        Ok(self.key_index.len(&stream)? as usize)
    }

    /// Whether the index holds no tuple.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Removes every tuple, keeping the memory, after every kernel queued before.
    pub fn clear(&self) -> Result<()> {
        let _writes = self.writes.read();
        let stream = self.device.lend_stream()?;
        for space in self.spaces().all() {
            space.clear(&stream)?;
        }
        stream.synchronize()?;
        self.observations.lock().cleared();
        Ok(())
    }

    /// Device memory of every space together; entry bytes count each tuple once
    /// (4 bytes a field). Bytes in use count every super node of the chains, removed and
    /// freed slots included (a reclaim frees slots for later inserts, it gives no super
    /// node back; see [`HyperspaceIndex::reclaim`]).
    pub fn memory(&self) -> Result<MemoryUsage> {
        let stream = self.device.lend_stream()?;
        let mut usage = MemoryUsage::default();
        for space in self.spaces().all() {
            let (reserved, in_use) = space.memory(&stream)?;
            usage.bytes_reserved += reserved;
            usage.bytes_in_use += in_use;
        }
        usage.entry_bytes = self.key_index.len(&stream)? * (self.attribute_count as u64 + 2) * 4;
        Ok(usage)
    }

    /// Every tuple, in no particular order, from the key index, into new device buffers,
    /// after the work queued on `stream`; waits to size them, and holds off inserts,
    /// modifies and deletes meanwhile (after waiting for those under way).
    pub fn export_on(&self, stream: &Stream) -> Result<DeviceTuples> {
        let _writes = self.writes.write();
        self.key_index.export(stream)
    }

    /// Every tuple, in no particular order.
    pub fn export(&self) -> Result<Tuples> {
        let stream = self.device.lend_stream()?;
        self.export_on(&stream)?
            .to_host(&stream, self.attribute_count)
    }
}
