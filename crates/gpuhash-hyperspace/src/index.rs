//! [`HyperspaceIndex`]: the key index and the attribute subspaces, each holding every
//! tuple, kept in step by the batches here. Searches are in `search.rs`.
//!
//! Phase order of each batch (what a concurrent reader may see in between):
//! - insert: the key index first (it decides which keys are new), then each subspace;
//! - delete: each subspace first, then the key index;
//! - modify: new copies into every space, a wait for every search that began before
//!   they were all in ([`crate::grace`]), then the old copies out of every space, each by
//!   the key slot a lookup found before the insert.

use std::sync::Arc;

use gpuhash_core::staging::upload;
use gpuhash_core::table::MemoryUsage;
use gpuhash_core::{Device, DeviceBuffer, Stream};

use crate::Result;
use crate::adaptive::AdaptiveReport;
use crate::adaptive::sketched_beside;
use crate::grace::GracePeriod;
use crate::launch::Lookup;
use crate::layouts::{GH_HS_INSERTED, GH_HS_PENDING, GH_HS_PRESENT};
use crate::observations::{Observations, distinct_found, population_of};
use crate::options::HyperspaceOptions;
use crate::regroup::RegroupPolicy;
use crate::shape::SpaceShape;
use crate::space::Space;
use crate::tuples::{self, DeviceTuples, Tuple, TupleBatch, Tuples};
use parking_lot::{Mutex, RwLock};

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
            observations: Mutex::new(observations),
            policy,
            adaptive: options.adaptive,
            regrouping: Mutex::new(()),
            report: Mutex::new(AdaptiveReport::default()),
            options: RwLock::new(options),
        })
    }

    /// An index of `p` attributes holding `batch`, built in bulk: every space sorts the
    /// tuples by bucket and writes whole nodes. The keys must be unique and not reserved.
    /// The spaces are sized for the batch and the distinct values of its attribute
    /// columns, sketched first (see [`crate::HyperspaceOptions::key_spread`]).
    pub fn build(
        device: &Device,
        p: usize,
        batch: TupleBatch<'_>,
        options: HyperspaceOptions,
    ) -> Result<Self> {
        tuples::check_shape(p, batch)?;
        // The keys are checked on host threads while the device builds: a batch they
        // reject loses only the new index, and their error comes first, as if checked
        // before.
        std::thread::scope(|scope| {
            let keys = scope.spawn(|| tuples::check_keys(batch.keys));
            let built = Self::build_unchecked(device, p, batch, options);
            keys.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            built
        })
    }

    /// [`HyperspaceIndex::build`] of a batch whose shape is checked and whose keys are
    /// taken to be unique and not reserved.
    fn build_unchecked(
        device: &Device,
        p: usize,
        batch: TupleBatch<'_>,
        options: HyperspaceOptions,
    ) -> Result<Self> {
        let n = batch.len() as u64;
        // The spaces are sized from the columns' distinct values, sketched while the
        // tuples go up.
        let stream = device.lend_stream()?;
        let (tuples, sketches) = sketched_beside(batch.attributes, batch.len(), || {
            DeviceTuples::from_batch(&stream, batch)
        });
        let tuples = tuples?;
        let shapes = options.shapes_for(p, n, &population_of(n, &sketches))?;
        let index = Self::with_shapes(device, p, n, options, shapes)?;
        for space in index.spaces().all() {
            space.build(&stream, &tuples)?;
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

    /// Inserts each tuple whose key the index does not hold; the others leave the index
    /// as it was. A batch with a key twice, a reserved key ([`crate::is_reserved_key`]) or
    /// the wrong shape is rejected whole, as is one the allocators cannot make room for
    /// (the error names why; the tuples of the batch inserted meanwhile are taken out).
    pub fn insert(&self, batch: TupleBatch<'_>) -> Result<Vec<InsertStatus>> {
        tuples::check_batch(self.attribute_count, batch)?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let inserted = |status: &Vec<InsertStatus>| {
            status
                .iter()
                .filter(|&&s| s == InsertStatus::Inserted)
                .count() as u64
        };
        self.observed_write(batch, || self.insert_checked(batch), inserted)
    }

    /// [`HyperspaceIndex::insert`] of a batch checked already.
    fn insert_checked(&self, batch: TupleBatch<'_>) -> Result<Vec<InsertStatus>> {
        let _writes = self.writes.read();
        let spaces = self.spaces();
        let spaces = spaces.all();
        let stream = self.device.lend_stream()?;
        let tuples = DeviceTuples::from_batch(&stream, batch)?;
        // Everything the phases need is allocated first: past the key index's insert, an
        // error takes the batch's copies out again.
        let mut buffers = PhaseBuffers::new(&stream, spaces.len(), batch.len())?;
        let inserted = insert_phases(&spaces, &stream, &tuples, &mut buffers);
        let key_status = match inserted {
            Ok(key_status) => key_status,
            Err(error) => {
                take_out(&spaces, &stream, &tuples.keys, &buffers.slots)?;
                return Err(error);
            }
        };
        Ok(key_status
            .iter()
            .map(|&s| {
                if u32::from(s) == GH_HS_INSERTED {
                    InsertStatus::Inserted
                } else {
                    InsertStatus::Present
                }
            })
            .collect())
    }

    /// The tuple of each key, or `None`.
    pub fn get(&self, keys: &[u32]) -> Result<Vec<Option<Tuple>>> {
        let stream = self.device.lend_stream()?;
        let (found, tuples) = self.lookup(&stream, keys)?;
        let tuples = tuples.to_host(&stream, self.attribute_count)?;
        Ok(found
            .iter()
            .enumerate()
            .map(|(i, &f)| (f != 0).then(|| tuples.tuple(i)))
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

    /// Looks keys up in the key index: found flags (on the host) and tuples (on the
    /// device, their key the empty word where not found).
    fn lookup(&self, stream: &Stream, keys: &[u32]) -> Result<(Vec<u8>, DeviceTuples)> {
        let keys_on = upload(stream, keys)?;
        let mut found = DeviceBuffer::<u8>::zeroed(stream, keys.len())?;
        let mut tuples = DeviceTuples::unfilled(stream, self.attribute_count, keys.len())?;
        self.get_async(stream, &keys_on, &mut found, &mut tuples)?;
        Ok((found.to_host(stream)?, tuples))
    }

    /// Removes the tuple of each key; true where there was one (for each copy of a key
    /// the batch repeats). Each subspace first,
    /// then the key index, so that a key is gone from every space once it is gone from the
    /// key index.
    pub fn delete(&self, keys: &[u32]) -> Result<Vec<bool>> {
        let stream = self.device.lend_stream()?;
        let (found, tuples) = self.lookup(&stream, keys)?;
        let _writes = self.writes.read();
        // Subspaces first, the key index last.
        for space in self.spaces().all().iter().rev() {
            space.delete(&stream, &tuples)?;
        }
        stream.synchronize()?;
        let found: Vec<bool> = found.iter().map(|&f| f != 0).collect();
        self.observations
            .lock()
            .removed(distinct_found(keys, &found));
        Ok(found)
    }

    /// Replaces the attributes and value of each tuple whose key the index holds with
    /// the batch's; true where it did, false for a key the index does not hold.
    ///
    /// In the GHSH paper's order: the new copies go into every space, then, once every
    /// search that began before they were all in has ended, the old copies go out. A
    /// search running meanwhile finds the tuple once or twice (old and new), never not at
    /// all. Two batches modifying one key at once from two host threads are not ordered:
    /// keep such writes on one thread. Rejected whole like [`HyperspaceIndex::insert`].
    pub fn modify(&self, batch: TupleBatch<'_>) -> Result<Vec<bool>> {
        tuples::check_batch(self.attribute_count, batch)?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.observed_write(batch, || self.modify_checked(batch), |_| 0)
    }

    /// [`HyperspaceIndex::modify`] of a batch checked already.
    fn modify_checked(&self, batch: TupleBatch<'_>) -> Result<Vec<bool>> {
        let _writes = self.writes.read();
        let spaces = self.spaces();
        let spaces = spaces.all();
        let stream = self.device.lend_stream()?;
        let (found, old) = self.lookup(&stream, batch.keys)?;
        let old_slots = slots_of(&spaces, &stream, &old)?;
        let new = DeviceTuples::from_batch(&stream, batch)?;
        let pending: Vec<u8> = found
            .iter()
            .map(|&f| {
                if f != 0 {
                    GH_HS_PENDING as u8
                } else {
                    GH_HS_PRESENT as u8
                }
            })
            .collect();
        let mut buffers = PhaseBuffers::new(&stream, spaces.len(), batch.len())?;
        let inserted = (|| {
            for (s, space) in spaces.iter().enumerate() {
                buffers.status[s].copy_from_host(&stream, &pending)?;
                let (status, slots) = (&mut buffers.status[s], &mut buffers.slots[s]);
                space.insert(&stream, &new, status, Some(slots), false)?;
            }
            Ok(())
        })();
        if let Err(error) = inserted {
            take_out(&spaces, &stream, &new.keys, &buffers.slots)?;
            return Err(error);
        }
        stream.synchronize()?;
        self.grace.wait_for_earlier_searches();
        take_out(&spaces, &stream, &new.keys, &old_slots)?;
        Ok(found.iter().map(|&f| f != 0).collect())
    }

    /// Replaces the value of each key the index holds, keeping its attributes; true where
    /// it did. The same road as [`HyperspaceIndex::modify`] with the attributes the key
    /// index holds (a tuple whose attributes change on another thread meanwhile may get
    /// the older ones back: writes of one key from two threads are not ordered).
    pub fn modify_values(&self, keys: &[u32], values: &[u32]) -> Result<Vec<bool>> {
        gpuhash_core::table::check_pairs(keys.len(), values.len())?;
        tuples::check_keys(keys)?;
        let held = self.get(keys)?;
        let n = keys.len();
        let mut attributes = vec![0; self.attribute_count * n];
        for (i, tuple) in held.iter().enumerate() {
            for (a, &value) in tuple.iter().flat_map(|t| t.attributes.iter()).enumerate() {
                attributes[a * n + i] = value;
            }
        }
        let batch = TupleBatch {
            keys,
            attributes: &attributes,
            values,
        };
        Ok(self
            .modify(batch)?
            .into_iter()
            .zip(&held)
            .map(|(modified, held)| modified && held.is_some())
            .collect())
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
    /// (4 bytes a field).
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

/// The key slot of each tuple's copy in every space (0 where a key was not found).
fn slots_of(
    spaces: &[&Space],
    stream: &Stream,
    tuples: &DeviceTuples,
) -> Result<Vec<DeviceBuffer<u64>>> {
    let n = tuples.len();
    let mut all = Vec::with_capacity(spaces.len());
    for space in spaces {
        let mut found = DeviceBuffer::<u8>::zeroed(stream, n)?;
        let mut slots = DeviceBuffer::<u64>::zeroed(stream, n)?;
        let lookup = Lookup {
            keys: &tuples.keys,
            attributes: Some(&tuples.attributes),
        };
        space.get(stream, lookup, &mut found, None, Some(&mut slots))?;
        all.push(slots);
    }
    Ok(all)
}

/// Takes out the copies a batch put in: `slots[s]` holds the key slots it took in space s
/// (0 where it took none), for the first `slots.len()` spaces.
fn take_out(
    spaces: &[&Space],
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    slots: &[DeviceBuffer<u64>],
) -> Result<()> {
    for (space, slots) in spaces.iter().zip(slots) {
        space.delete_slots(stream, slots, keys)?;
    }
    stream.synchronize()?;
    Ok(())
}

/// A status and a slot id for every element of a batch, in every space.
struct PhaseBuffers {
    status: Vec<DeviceBuffer<u8>>,
    slots: Vec<DeviceBuffer<u64>>,
}

impl PhaseBuffers {
    fn new(stream: &Stream, spaces: usize, n: usize) -> Result<Self> {
        let mut buffers = Self {
            status: Vec::with_capacity(spaces),
            slots: Vec::with_capacity(spaces),
        };
        for _ in 0..spaces {
            buffers.status.push(DeviceBuffer::zeroed(stream, n)?);
            buffers.slots.push(DeviceBuffer::zeroed(stream, n)?);
        }
        Ok(buffers)
    }
}

/// An insert's phases: the key index (which answers which keys are new), then each
/// subspace with the new ones. Returns the key index's status of each tuple.
fn insert_phases(
    spaces: &[&Space],
    stream: &Stream,
    tuples: &DeviceTuples,
    buffers: &mut PhaseBuffers,
) -> Result<Vec<u8>> {
    let (status, slots) = (&mut buffers.status[0], &mut buffers.slots[0]);
    spaces[0].insert(stream, tuples, status, Some(slots), true)?;
    let key_status = buffers.status[0].to_host(stream)?;
    let pending: Vec<u8> = key_status
        .iter()
        .map(|&s| {
            if u32::from(s) == GH_HS_INSERTED {
                GH_HS_PENDING as u8
            } else {
                GH_HS_PRESENT as u8
            }
        })
        .collect();
    for (s, space) in spaces.iter().enumerate().skip(1) {
        buffers.status[s].copy_from_host(stream, &pending)?;
        let (status, slots) = (&mut buffers.status[s], &mut buffers.slots[s]);
        space.insert(stream, tuples, status, Some(slots), false)?;
    }
    stream.synchronize()?;
    Ok(key_status)
}
