//! [`CuckooTable`]: the table, its host-side bookkeeping and the launches of its kernels.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::time::Instant;

use bytemuck::Pod;
use gpuhash_core::hash::fmix64;
use gpuhash_core::last_copy;
use gpuhash_core::{Device, DeviceAddress, DeviceBuffer, Error, LaunchShape, Stream};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::layouts::{
    GH_CUCKOO_DUPLICATE, GH_CUCKOO_MAX_SUBTABLES, GH_CUCKOO_MAX_VALUE_WORDS, GH_CUCKOO_NO_EXCLUDE,
    GH_CUCKOO_PARTITIONS, GH_CUCKOO_PLACE_PER_THREAD, GH_CUCKOO_REMOVE_ALL,
    GH_CUCKOO_REMOVE_DUPLICATES, GH_CUCKOO_REMOVE_FIRST, GH_CUCKOO_SORT_PER_THREAD,
    GH_CUCKOO_SORT_THREADS, GH_CUCKOO_TILE, GhCuckooExportParams, GhCuckooFillParams,
    GhCuckooFindParams, GhCuckooHome, GhCuckooInsertParams, GhCuckooPartitionParams,
    GhCuckooPlaceParams, GhCuckooRemoveParams, GhCuckooResizeParams, GhCuckooSubtable,
    GhCuckooTable, GhCuckooUpdateParams,
};
use crate::policy::{self, Bounds, ChoiceRange, Resize};
use crate::{CuckooError, CuckooKey, CuckooOptions, DuplicateKeys, Result, key};

const THREADS: u32 = 256;
const TILE: u64 = GH_CUCKOO_TILE as u64;
/// Upsize-and-retry rounds an insert makes before it reports the pairs it could not place.
const MAX_ROUNDS: usize = 24;
/// The find kernel's mark of a key it found, which the update kernel selects.
const FOUND: u32 = 1;
/// Words of the side slot before the value: present flag and lock.
const SIDE_HEADER: usize = 2;
/// 2^32 - 5 and 2^61 - 1, the primes of the u32 and u64 hash families.
const PRIME32: u64 = 4_294_967_291;
const PRIME61: u64 = (1 << 61) - 1;

/// Number of 4-byte words of a value type; a compile error for sizes outside 4..=64 bytes
/// or not a multiple of 4.
struct Words<V>(PhantomData<V>);

impl<V: Pod> Words<V> {
    const N: usize = {
        let size = size_of::<V>();
        assert!(
            size >= 4 && size <= 4 * GH_CUCKOO_MAX_VALUE_WORDS as usize && size.is_multiple_of(4),
            "cuckoo table values must be 4 to 64 bytes, a multiple of 4"
        );
        size / 4
    };
}

/// One subtable's device arrays.
struct Subtable<K> {
    keys: DeviceBuffer<K>,
    values: DeviceBuffer<u32>,
    locks: DeviceBuffer<u32>,
    /// One dirty bit a bucket (GhCuckooSubtable.dirty).
    dirty: DeviceBuffer<u32>,
    buckets: u64,
    hash_a: u64,
    hash_b: u64,
}

impl<K: CuckooKey> Subtable<K> {
    /// Empty arrays of `buckets` buckets: keys all ones (empty), locks free, buckets clean.
    fn allocate(stream: &Stream, buckets: u64, words: usize, hash: (u64, u64)) -> Result<Self> {
        let slots = usize::try_from(buckets * K::SLOTS)
            .map_err(|_| Error::InvalidInput("subtable too large".into()))?;
        let mut keys = DeviceBuffer::<K>::zeroed(stream, slots)?;
        let values = DeviceBuffer::<u32>::zeroed(stream, slots * words)?;
        let locks = DeviceBuffer::<u32>::zeroed(stream, buckets as usize)?;
        let dirty = DeviceBuffer::<u32>::zeroed(stream, buckets.div_ceil(32) as usize)?;
        fill_words(stream, &mut keys, u32::MAX)?;
        Ok(Self {
            keys,
            values,
            locks,
            dirty,
            buckets,
            hash_a: hash.0,
            hash_b: hash.1,
        })
    }

    fn layout<'a>(
        &'a self,
        stream: &'a Stream,
        guards: &mut Vec<DeviceAddress<'a>>,
    ) -> GhCuckooSubtable {
        let keys = self.keys.address(stream);
        let values = self.values.address(stream);
        let locks = self.locks.address(stream);
        let dirty = self.dirty.address(stream);
        let layout = GhCuckooSubtable {
            keys: keys.address as *mut _,
            values: values.address as *mut u32,
            locks: locks.address as *mut u32,
            dirty: dirty.address as *mut u32,
            buckets: self.buckets,
            fastmod: (u64::MAX / self.buckets).wrapping_add(1),
            hash_a: self.hash_a,
            hash_b: self.hash_b,
        };
        guards.extend([keys, values, locks, dirty]);
        layout
    }

    /// Bytes of its device arrays.
    fn bytes(&self) -> usize {
        self.keys.size_bytes()
            + self.values.size_bytes()
            + self.locks.size_bytes()
            + self.dirty.size_bytes()
    }
}

/// Writes `word` over every 4-byte word of `buffer`.
fn fill_words<T: Pod>(stream: &Stream, buffer: &mut DeviceBuffer<T>, word: u32) -> Result<()> {
    let count = (buffer.size_bytes() / 4) as u64;
    if count == 0 {
        return Ok(());
    }
    let target = buffer.address_mut(stream);
    let params = GhCuckooFillParams {
        words: target.address as *mut u32,
        count,
        value: word,
        pad: 0,
    };
    let shape = LaunchShape::grid_stride(stream.device(), count, THREADS);
    // SAFETY: the buffer is live (its guard is held across the launch) and holds `count`
    // whole 4-byte words; the kernel writes words[i] for i < count only.
    unsafe { key::FILL.launch(stream, shape, params) }?;
    Ok(())
}

/// Device memory a [`CuckooTable`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooMemory {
    /// Bytes of the subtables (keys, values, one lock word and one dirty bit a bucket) and
    /// of the words every kernel shares (pair counts, the reserved key's side slot).
    pub table_bytes: u64,
    /// Bytes of the scratch space kept from the largest insert batch so far (none while an
    /// insert runs, which holds it).
    pub scratch_bytes: u64,
    /// Pairs held.
    pub pairs: u64,
}

impl CuckooMemory {
    /// Table bytes (scratch not counted) per pair held; infinite for an empty table.
    pub fn bytes_per_pair(&self) -> f64 {
        self.table_bytes as f64 / self.pairs as f64
    }
}

/// Counts of resizes a table made, and the host time they took (each resize waits for
/// its kernels, so this is also their device time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResizeStats {
    /// Subtables doubled.
    pub upsizes: u64,
    /// Subtables halved.
    pub downsizes: u64,
    /// Whole-table rehashes (rehash-everything mode).
    pub rehashes: u64,
    /// Seconds spent resizing.
    pub seconds: f64,
}

/// What the host knows of the device state, refreshed after every writing batch.
#[derive(Debug, Default)]
struct Mirror {
    counts: Vec<u64>,
    side_present: bool,
    launches: u64,
    stats: ResizeStats,
    /// Per subtable, the choices that started there under every threshold an insert
    /// used since the table was last emptied (GhCuckooHome.settled_lo / _hi).
    settled: [ChoiceRange; GH_CUCKOO_MAX_SUBTABLES as usize],
    /// Slots no downsize goes below ([`Bounds::min_slots`]): those the table was built
    /// with, until `shrink_to` lowers it.
    floor_slots: u64,
}

impl Mirror {
    fn len(&self) -> u64 {
        self.counts.iter().sum::<u64>() + u64::from(self.side_present)
    }
}

/// Device scratch space of one writing batch, allocated before the table changes so that
/// running out of memory cannot leave a batch half done.
struct Scratch<K, V> {
    /// [evicted-key log count, failed count, hits or removed, residuals or written]
    counters: DeviceBuffer<u64>,
    failed_keys: [DeviceBuffer<K>; 2],
    failed_values: [DeviceBuffer<V>; 2],
    log: DeviceBuffer<K>,
    /// What the place kernel did with each pair of the batch (`GH_CUCKOO_PENDING`, ...).
    status: DeviceBuffer<u8>,
    /// The side slot as it was before the batch, for undoing it.
    side_before: DeviceBuffer<u32>,
    /// The failed list the last insert launch wrote.
    current: usize,
    /// The last user batch sorted by partition, kept for the next batch of its size.
    sorted: Option<(DeviceBuffer<K>, DeviceBuffer<V>)>,
}

impl<K: CuckooKey, V: Pod> Scratch<K, V> {
    /// Room for `pairs` homeless pairs in each failed list, and for a user batch of `batch`
    /// pairs (the eviction log and the place kernel's status); `batch` is 0 for the
    /// scratch of a resize, which re-inserts without either.
    fn new(stream: &Stream, pairs: usize, batch: usize) -> Result<Self> {
        Ok(Self {
            counters: DeviceBuffer::zeroed(stream, 4)?,
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
            side_before: DeviceBuffer::zeroed(stream, SIDE_HEADER + Words::<V>::N)?,
            current: 0,
            sorted: None,
        })
    }

    fn bytes(&self) -> u64 {
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

    fn counters(&self, stream: &Stream) -> Result<[u64; 4]> {
        let mut out = [0u64; 4];
        self.counters.copy_to_host(stream, &mut out)?;
        Ok(out)
    }

    fn reset(&mut self, stream: &Stream) -> Result<()> {
        Ok(self.counters.fill_zero(stream)?)
    }
}

/// The input of one insert launch.
struct Input<'a, K, V> {
    keys: &'a DeviceBuffer<K>,
    values: &'a DeviceBuffer<V>,
    count: usize,
    skip: Option<&'a DeviceBuffer<u8>>,
}

/// A dynamic GPU cuckoo hash table (DyHash): `K` keys (`u32` or `u64`) to `V` values
/// (plain data of 4 to 64 bytes, a multiple of 4).
///
/// Batch operations take `&self` and the table is `Send + Sync`. Reading batches (`get`,
/// `contains`, `export`, `len`) run concurrently from any number of threads; writing
/// batches (`insert`, `remove`, `clear`) run one at a time and exclude readers, because a
/// cuckoo insert moves pairs between subtables and a concurrent reader could miss a pair
/// in flight. Each subtable sits behind a lock of its own: a resize takes the write lock
/// of the one subtable it rebuilds, kernels take read locks.
///
/// Device memory: the subtables' keys, values, one lock word and one dirty bit per bucket,
/// plus the scratch space of the largest insert batch so far (two lists for homeless pairs
/// and a log of evicted keys, about `3 * batch * (size_of::<K>() + size_of::<V>())` bytes),
/// kept so that later batches need not allocate. [`CuckooTable::memory`] reports both.
pub struct CuckooTable<K: CuckooKey, V: Pod> {
    device: Device,
    stream: Stream,
    options: CuckooOptions,
    gate: RwLock<()>,
    subtables: Vec<RwLock<Subtable<K>>>,
    shared: RwLock<Shared>,
    mirror: Mutex<Mirror>,
    /// The scratch space of the largest insert batch so far (its failed lists and
    /// evicted-key log), kept for the next batches so that they do not allocate.
    scratch: Mutex<Option<Scratch<K, V>>>,
    values: PhantomData<V>,
}

/// Device words every kernel of the table shares.
struct Shared {
    /// Pairs of each subtable (GH_CUCKOO_MAX_SUBTABLES entries).
    counts: DeviceBuffer<u64>,
    /// The reserved key's side slot: present flag, lock, value words.
    side: DeviceBuffer<u32>,
}

/// Read locks on every subtable and the shared words, for one launch.
struct View<'a, K> {
    subs: Guards<'a, K>,
    shared: RwLockReadGuard<'a, Shared>,
}

impl<K: CuckooKey, V: Pod> std::fmt::Debug for CuckooTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuckooTable")
            .field("options", &self.options)
            .field("buckets", &self.subtable_buckets())
            .field("counts", &self.mirror.lock().counts)
            .finish()
    }
}

type Guards<'a, K> = Vec<RwLockReadGuard<'a, Subtable<K>>>;

impl<K: CuckooKey, V: Pod> CuckooTable<K, V> {
    const WORDS: usize = Words::<V>::N;

    /// A table with the default options sized to hold `capacity` pairs below the upper fill
    /// bound, which keeps that size as its floor (see [`CuckooOptions::initial_capacity`]).
    pub fn with_capacity(device: &Device, capacity: usize) -> Result<Self> {
        Self::new(
            device,
            CuckooOptions {
                initial_capacity: capacity,
                ..CuckooOptions::default()
            },
        )
    }

    /// A table with these options; [`CuckooError::InvalidOptions`] if they do not
    /// [validate](CuckooOptions::validate).
    pub fn new(device: &Device, options: CuckooOptions) -> Result<Self> {
        let words = Self::WORDS;
        options.validate()?;
        let stream = device.new_stream()?;
        let buckets = options.initial_bucket_count(K::SLOTS);
        let mut subtables = Vec::with_capacity(options.subtables);
        for i in 0..options.subtables {
            let hash = hash_coefficients::<K>(options.seed, i);
            subtables.push(RwLock::new(Subtable::allocate(
                &stream, buckets, words, hash,
            )?));
        }
        let counts = DeviceBuffer::zeroed(&stream, GH_CUCKOO_MAX_SUBTABLES as usize)?;
        let side = DeviceBuffer::zeroed(&stream, SIDE_HEADER + words)?;
        stream.synchronize()?;
        Ok(Self {
            device: device.clone(),
            stream,
            mirror: Mutex::new(Mirror {
                counts: vec![0; options.subtables],
                floor_slots: buckets * options.subtables as u64 * K::SLOTS,
                ..Mirror::default()
            }),
            options,
            gate: RwLock::new(()),
            subtables,
            shared: RwLock::new(Shared { counts, side }),
            scratch: Mutex::new(None),
            values: PhantomData,
        })
    }

    /// The options the table was made with.
    pub fn options(&self) -> &CuckooOptions {
        &self.options
    }

    /// The device the table lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Number of pairs held.
    pub fn len(&self) -> usize {
        self.mirror.lock().len() as usize
    }

    /// True when the table holds no pair.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Device memory held now: the table itself and the scratch space kept for inserts.
    pub fn memory(&self) -> CuckooMemory {
        let subtables = self.device_bytes();
        // One lock at a time, none held while another is taken.
        let scratch_bytes = self.scratch.lock().as_ref().map_or(0, Scratch::bytes);
        let shared_bytes = {
            let shared = self.shared.read();
            shared.counts.size_bytes() + shared.side.size_bytes()
        };
        CuckooMemory {
            table_bytes: (subtables + shared_bytes) as u64,
            scratch_bytes,
            pairs: self.len() as u64,
        }
    }

    /// Buckets of each subtable.
    pub fn subtable_buckets(&self) -> Vec<u64> {
        self.subtables.iter().map(|s| s.read().buckets).collect()
    }

    /// Pairs held by each subtable (the reserved key's side slot not included).
    pub fn subtable_lens(&self) -> Vec<u64> {
        self.mirror.lock().counts.clone()
    }

    /// Slots of all subtables. It stays at least [`capacity_floor`](Self::capacity_floor):
    /// a table holds `beta * capacity()` pairs before it grows.
    pub fn capacity(&self) -> usize {
        policy::capacity(&self.subtable_buckets(), K::SLOTS) as usize
    }

    /// Slots below which no downsize takes the table: those it was created with (see
    /// [`CuckooOptions::initial_capacity`]) until [`shrink_to`](Self::shrink_to) or
    /// [`shrink_to_fit`](Self::shrink_to_fit) lowers it.
    pub fn capacity_floor(&self) -> usize {
        self.mirror.lock().floor_slots as usize
    }

    /// Drops the capacity floor and shrinks as far as the fill bounds allow: halving while
    /// the fill factor is below `alpha` and the halved table stays at most `beta` full, no
    /// subtable below `min_buckets`. A downsize that finds no device memory for its new
    /// arrays ends the shrinking there, without an error: every pair stays in.
    pub fn shrink_to_fit(&self) -> Result<()> {
        self.shrink_to(0)
    }

    /// Lowers the capacity floor to the slots that `min_capacity` pairs fill to `beta` (a
    /// floor already lower stays) and shrinks toward it as [`shrink_to_fit`](Self::shrink_to_fit)
    /// does, so that the table keeps room for `min_capacity` pairs without growing.
    pub fn shrink_to(&self, min_capacity: usize) -> Result<()> {
        let _gate = self.gate.write();
        let floor = policy::slots_for(min_capacity as u64, self.options.beta);
        {
            let mut m = self.mirror.lock();
            m.floor_slots = m.floor_slots.min(floor);
        }
        self.apply_policy(&self.stream)
    }

    /// `len / capacity`, the paper's filled factor.
    pub fn fill_factor(&self) -> f64 {
        let len = self.mirror.lock().len();
        policy::fill(&self.subtable_buckets(), K::SLOTS, len)
    }

    /// True when the table cannot shrink further (every downsize would pass the minimum
    /// size), so a fill factor below `alpha` is allowed.
    pub fn at_minimum_size(&self) -> bool {
        let buckets = self.subtable_buckets();
        let len = self.mirror.lock().len();
        policy::next_resize(&buckets, len, &self.bounds()).is_none()
    }

    /// Resizes made so far and the time they took.
    pub fn resize_stats(&self) -> ResizeStats {
        self.mirror.lock().stats
    }

    /// Bytes of device memory the subtables take.
    pub fn device_bytes(&self) -> usize {
        self.subtables.iter().map(|s| s.read().bytes()).sum()
    }

    fn bounds(&self) -> Bounds {
        Bounds {
            alpha: self.options.alpha,
            beta: self.options.beta,
            slots: K::SLOTS,
            min_buckets: self.options.min_buckets,
            min_slots: self.capacity_floor() as u64,
            rehash_all: self.options.rehash_all,
        }
    }

    // ------------------------------------------------------------ host-slice API

    /// Inserts the pairs `(keys[i], values[i])`, replacing the value of keys already held.
    /// Of equal keys within one batch exactly one whole value wins: the last copy's with
    /// [`DuplicateKeys::LastCopy`], an unspecified one with [`DuplicateKeys::AnyCopy`] (the
    /// default; see [`CuckooOptions::duplicate_keys`]). Pairs that find no place are
    /// kept on the device, the table grows and they are retried: the call returns `Ok`
    /// with every pair in, or an error naming what is not.
    ///
    /// [`Error::LengthMismatch`] (inside [`CuckooError::Core`]) when the slices differ in
    /// length, and nothing changes.
    pub fn insert(&self, keys: &[K], values: &[V]) -> Result<()> {
        check_lengths("insert: keys and values", keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        let _gate = self.gate.write();
        let d_keys = DeviceBuffer::from_host(&self.stream, keys)?;
        let d_values = DeviceBuffer::from_host(&self.stream, values)?;
        let result = self.insert_locked(&self.stream, &d_keys, &d_values);
        self.after_failed_insert(&self.stream, result)
    }

    /// The value of each key, in order; `None` for keys not held.
    pub fn get(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let _gate = self.gate.read();
        let d_keys = DeviceBuffer::from_host(&self.stream, keys)?;
        let mut found = DeviceBuffer::<u8>::zeroed(&self.stream, keys.len())?;
        let mut values = DeviceBuffer::<V>::zeroed(&self.stream, keys.len())?;
        self.find(
            &self.stream,
            &d_keys,
            Some(&mut found),
            Some(&mut values),
            None,
        )?;
        let found = found.to_host(&self.stream)?;
        let values = values.to_host(&self.stream)?;
        Ok(found
            .iter()
            .zip(values)
            .map(|(&f, v)| (f != 0).then_some(v))
            .collect())
    }

    /// Whether each key is held, in order.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let _gate = self.gate.read();
        let d_keys = DeviceBuffer::from_host(&self.stream, keys)?;
        let mut found = DeviceBuffer::<u8>::zeroed(&self.stream, keys.len())?;
        self.find(&self.stream, &d_keys, Some(&mut found), None, None)?;
        Ok(found
            .to_host(&self.stream)?
            .iter()
            .map(|&f| f != 0)
            .collect())
    }

    /// Removes the keys held among `keys`; returns how many pairs went.
    pub fn remove(&self, keys: &[K]) -> Result<usize> {
        if keys.is_empty() {
            return Ok(0);
        }
        let _gate = self.gate.write();
        let d_keys = DeviceBuffer::from_host(&self.stream, keys)?;
        self.remove_locked(&self.stream, &d_keys)
    }

    /// Every pair held, in no particular order.
    pub fn export(&self) -> Result<Vec<(K, V)>> {
        let _gate = self.gate.read();
        let stream = &self.stream;
        let (slotted, side_present) = {
            let m = self.mirror.lock();
            (m.counts.iter().sum::<u64>() as usize, m.side_present)
        };
        let (keys, values) = self.export_slotted(stream, slotted)?;
        let mut out: Vec<(K, V)> = keys
            .to_host(stream)?
            .into_iter()
            .zip(values.to_host(stream)?)
            .collect();
        if side_present {
            out.push((K::RESERVED, self.side_value(stream)?));
        }
        Ok(out)
    }

    /// Removes every pair; the table then shrinks as its fill bounds say, down to its
    /// [capacity floor](Self::capacity_floor).
    pub fn clear(&self) -> Result<()> {
        let _gate = self.gate.write();
        let stream = &self.stream;
        for sub in &self.subtables {
            let mut sub = sub.write();
            fill_words(stream, &mut sub.keys, u32::MAX)?;
            sub.dirty.fill_zero(stream)?;
        }
        self.mirror.lock().settled = Default::default();
        let mut side = vec![0u32; SIDE_HEADER + Self::WORDS];
        // The side buffer is shared behind &self; its words are rewritten whole here.
        self.write_side(stream, &mut side)?;
        self.write_counts(stream, &vec![0; self.options.subtables])?;
        stream.synchronize()?;
        self.refresh(stream)?;
        self.apply_policy(stream)
    }

    // ---------------------------------------------------------- device-buffer API

    /// [`insert`](Self::insert) of pairs already on the device, queued on `stream`; waits
    /// for the batch (it reads failure counts and resizes as needed) before returning.
    pub fn insert_device(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        check_lengths("insert_device: keys and values", keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        let _gate = self.gate.write();
        let result = self.insert_locked(stream, keys, values);
        self.after_failed_insert(stream, result)
    }

    /// Looks the keys up on the device: `found[i]` is 1 for held keys and `values[i]` their
    /// value (left as it was for misses). Waits for the lookup before returning, since the
    /// table may change once the call lets go of it.
    pub fn get_device(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        check_lengths("get_device: keys and found", keys.len(), found.len())?;
        check_lengths("get_device: keys and values", keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        let _gate = self.gate.read();
        self.find(stream, keys, Some(found), Some(values), None)?;
        Ok(stream.synchronize()?)
    }

    /// [`remove`](Self::remove) of keys already on the device; waits for the batch.
    pub fn remove_device(&self, stream: &Stream, keys: &DeviceBuffer<K>) -> Result<usize> {
        if keys.is_empty() {
            return Ok(0);
        }
        let _gate = self.gate.write();
        self.remove_locked(stream, keys)
    }

    // ------------------------------------------------------------------ internals

    fn view(&self) -> View<'_, K> {
        View {
            subs: self.subtables.iter().map(|s| s.read()).collect(),
            shared: self.shared.read(),
        }
    }

    /// The kernels' view of the table; the address guards go into `guards`, which must
    /// outlive the launch.
    fn describe<'a>(
        view: &'a View<'a, K>,
        stream: &'a Stream,
        guards: &mut Vec<DeviceAddress<'a>>,
    ) -> GhCuckooTable {
        let mut table = GhCuckooTable {
            subtables: view.subs.len() as u32,
            value_words: Self::WORDS as u32,
            ..GhCuckooTable::default()
        };
        for (i, sub) in view.subs.iter().enumerate() {
            table.sub[i] = sub.layout(stream, guards);
        }
        let counts = view.shared.counts.address(stream);
        let side = view.shared.side.address(stream);
        table.counts = counts.address as *mut u64;
        table.side = side.address as *mut u32;
        guards.extend([counts, side]);
        table
    }

    /// Where new pairs start now: the paper's `n_i / C(m_i, 2)` weights as 32-bit
    /// thresholds, with the table's fixed choice seed, and the settled choices. A launch
    /// that places pairs (`placing`) narrows the settled choices to what its thresholds
    /// agree with.
    fn home(&self, view: &View<'_, K>, placing: bool) -> GhCuckooHome {
        let buckets: Vec<u64> = view.subs.iter().map(|s| s.buckets).collect();
        let mut m = self.mirror.lock();
        let thresholds = policy::thresholds(&policy::home_weights(&buckets, &m.counts, K::SLOTS));
        if placing {
            let ranges = policy::choice_ranges(&thresholds, buckets.len());
            for (settled, range) in m.settled.iter_mut().zip(ranges) {
                *settled = settled.intersect(range);
            }
        }
        GhCuckooHome {
            thresholds,
            settled_lo: m.settled.map(|r| r.lo),
            settled_hi: m.settled.map(|r| r.hi),
            seed: self.choice_seed(),
        }
    }

    /// The seed of the keys' choices and home slots, fixed for the table.
    fn choice_seed(&self) -> u32 {
        fmix64(self.options.seed ^ 0x6a09_e667_f3bc_c909) as u32
    }

    fn find(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: Option<&mut DeviceBuffer<u8>>,
        values: Option<&mut DeviceBuffer<V>>,
        hits: Option<&mut DeviceBuffer<u64>>,
    ) -> Result<()> {
        let view = self.view();
        let mut guards = Vec::new();
        let table = Self::describe(&view, stream, &mut guards);
        let k = keys.address(stream);
        let f = found.map(|b| b.address_mut(stream));
        let v = values.map(|b| b.address_mut(stream));
        let h = hits.map(|b| b.address_mut(stream));
        let params = GhCuckooFindParams {
            home: self.home(&view, false),
            table,
            keys: k.address as *const _,
            values_out: v
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u32),
            found_out: f
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u8),
            hits: h
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| (a.address + 16) as *mut u64),
            count: keys.len() as u64,
        };
        // SAFETY: the table arrays are held by `view` and their address guards; `keys`,
        // and the outputs when given, are live buffers of keys.len() entries (callers
        // check the lengths), `hits` a 4-u64 counters buffer whose third word is written;
        // all guards outlive the launch.
        unsafe {
            K::kernels()
                .find
                .launch(stream, tile_shape(stream, keys.len() as u64), params)
        }?;
        Ok(())
    }

    fn update(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        found: &DeviceBuffer<u8>,
        select: u32,
    ) -> Result<()> {
        let view = self.view();
        let mut guards = Vec::new();
        let table = Self::describe(&view, stream, &mut guards);
        let k = keys.address(stream);
        let v = values.address(stream);
        let f = found.address(stream);
        let params = GhCuckooUpdateParams {
            table,
            keys: k.address as *const _,
            values: v.address as *const u32,
            found: f.address as *const u8,
            old_values: std::ptr::null_mut(),
            count: keys.len() as u64,
            select,
            pad: 0,
        };
        // SAFETY: table arrays held as in `find`; keys, values and found are live buffers
        // of keys.len() entries (checked by the callers), held across the launch.
        unsafe {
            K::kernels()
                .update
                .launch(stream, tile_shape(stream, keys.len() as u64), params)
        }?;
        Ok(())
    }

    /// The lock-free first pass of a user batch: places what fits into an empty slot of one
    /// of its buckets, writes each pair's fate into `scratch.status` and the pairs left
    /// pending into failed list 1. Returns the number of pending pairs (for the insert
    /// kernel) and of duplicates (for the update kernel, once every pair is placed).
    fn place_launch(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<(u64, u64)> {
        let mut cursor = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        // The addresses borrow the scratch space until the launch is queued.
        {
            let view = self.view();
            let home = self.home(&view, true);
            let mut guards = Vec::new();
            let table = Self::describe(&view, stream, &mut guards);
            let k = input.keys.address(stream);
            let v = input.values.address(stream);
            let s = input.skip.map(|b| b.address(stream));
            assert!(
                scratch.status.len() >= input.count
                    && scratch.failed_keys[1].len() >= input.count
                    && scratch.failed_values[1].len() >= input.count
            );
            let status = scratch.status.address_mut(stream);
            let pending_keys = scratch.failed_keys[1].address_mut(stream);
            let pending_values = scratch.failed_values[1].address_mut(stream);
            let counters = scratch.counters.address_mut(stream);
            let c = cursor.address_mut(stream);
            let params = GhCuckooPlaceParams {
                table,
                home,
                keys: k.address as *const _,
                values: v.address as *const u32,
                skip: s
                    .as_ref()
                    .map_or(std::ptr::null(), |a| a.address as *const u8),
                status: status.address as *mut u8,
                pending_keys: pending_keys.address as *mut _,
                pending_values: pending_values.address as *mut u32,
                pending: (counters.address + 16) as *mut u64,
                duplicates: (counters.address + 24) as *mut u64,
                cursor: c.address as *mut u64,
                count: input.count as u64,
            };
            // SAFETY: table arrays held by `view` and their guards; the input buffers hold at
            // least `count` keys, values and skip flags, the status buffer `count` bytes and
            // failed list 1 `count` pairs (asserted), each input adding at most one; the
            // counters buffer holds 4 u64, of which the third and fourth are written, and
            // the cursor one, zeroed. Every guard outlives the launch.
            unsafe {
                K::kernels()
                    .place
                    .launch(stream, lane_shape(stream, input.count as u64), params)
            }?;
        }
        let [_, _, pending, duplicates] = scratch.counters(stream)?;
        Ok((pending, duplicates))
    }

    /// One insert launch: places `input`, logging evicted keys in `scratch.log` and
    /// setting homeless pairs aside in `scratch.failed_*[out]`.
    fn insert_launch(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
        out: usize,
        exclude: Option<usize>,
    ) -> Result<()> {
        if input.count == 0 {
            return Ok(());
        }
        let salt = {
            let mut m = self.mirror.lock();
            m.launches += 1;
            fmix64(m.launches ^ self.options.seed) as u32
        };
        let view = self.view();
        let home = self.home(&view, true);
        let mut guards = Vec::new();
        let table = Self::describe(&view, stream, &mut guards);
        let k = input.keys.address(stream);
        let v = input.values.address(stream);
        let s = input.skip.map(|b| b.address(stream));
        let log_capacity = scratch.log.len() as u64;
        let counters = scratch.counters.address_mut(stream);
        let [failed_keys_0, failed_keys_1] = &mut scratch.failed_keys;
        let [failed_values_0, failed_values_1] = &mut scratch.failed_values;
        let (fk, fv) = if out == 0 {
            (failed_keys_0, failed_values_0)
        } else {
            (failed_keys_1, failed_values_1)
        };
        assert!(fk.len() >= input.count && fv.len() >= input.count);
        let fk = fk.address_mut(stream);
        let fv = fv.address_mut(stream);
        let log = scratch.log.address_mut(stream);
        let params = GhCuckooInsertParams {
            table,
            keys: k.address as *const _,
            values: v.address as *const u32,
            skip: s
                .as_ref()
                .map_or(std::ptr::null(), |a| a.address as *const u8),
            count: input.count as u64,
            failed_keys: fk.address as *mut _,
            failed_values: fv.address as *mut u32,
            failed_count: (counters.address + 8) as *mut u64,
            log_keys: log.address as *mut _,
            log_count: counters.address as *mut u64,
            log_capacity,
            home,
            salt,
            max_evictions: self.options.max_evictions,
            exclude: exclude.map_or(GH_CUCKOO_NO_EXCLUDE, |e| e as u32),
        };
        let kernels = K::kernels();
        let kernel = if Self::WORDS == 1 {
            &kernels.insert1
        } else {
            &kernels.insert
        };
        // SAFETY: table arrays held by `view` and their guards; the input buffers hold at
        // least `count` keys, values and skip flags; the failed lists hold `count` pairs
        // (asserted) and each input adds at most one; the log is written below its
        // capacity only; the counters buffer holds 4 u64. Every guard outlives the launch.
        unsafe { kernel.launch(stream, tile_shape(stream, input.count as u64), params) }?;
        Ok(())
    }

    fn remove_launch(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        count: usize,
        skip: Option<&DeviceBuffer<u8>>,
        copies: u32,
        removed: Option<&mut DeviceBuffer<u64>>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let view = self.view();
        let mut guards = Vec::new();
        let table = Self::describe(&view, stream, &mut guards);
        let k = keys.address(stream);
        let s = skip.map(|b| b.address(stream));
        let r = removed.map(|b| b.address_mut(stream));
        let params = GhCuckooRemoveParams {
            table,
            keys: k.address as *const _,
            skip: s
                .as_ref()
                .map_or(std::ptr::null(), |a| a.address as *const u8),
            removed: r
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| (a.address + 16) as *mut u64),
            count: count as u64,
            copies,
            pad: 0,
        };
        // SAFETY: table arrays held as in `find`; `keys` (and `skip`) hold at least `count`
        // entries, `removed` is a 4-u64 counters buffer whose third word is written; all
        // guards outlive the launch.
        unsafe {
            K::kernels()
                .remove
                .launch(stream, tile_shape(stream, count as u64), params)
        }?;
        Ok(())
    }

    /// An insert that failed (out of memory, say) may have grown the table before it
    /// changed any pair; with its scratch space freed, shrink back within bounds (as far
    /// as memory allows) and pass the error on.
    fn after_failed_insert(&self, stream: &Stream, result: Result<()>) -> Result<()> {
        if result.is_err() {
            let _ = self
                .refresh(stream)
                .and_then(|()| self.apply_policy(stream));
        }
        result
    }

    /// Keeps the copy of each key that the table's [`DuplicateKeys`] rule makes win, then
    /// inserts the batch.
    fn insert_locked(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        match self.options.duplicate_keys {
            DuplicateKeys::AnyCopy => self.insert_batch(stream, keys, values),
            DuplicateKeys::LastCopy => {
                let (keys, values) = last_copy::last_copies(stream, keys, values)?;
                self.insert_batch(stream, &keys, &values)
            }
        }
    }

    fn insert_batch(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        let n = keys.len();
        let len_before = self.mirror.lock().len();
        // Everything the batch needs is allocated before anything changes.
        let mut scratch = match self.scratch.lock().take() {
            Some(cached) if cached.log.len() >= n => cached,
            _ => Scratch::<K, V>::new(stream, n, n)?,
        };
        // A batch larger than what the place kernel holds in flight works on its pairs sorted
        // by partition from here on; a smaller one is in flight whole whatever its order.
        let mut sorted = None;
        if n as u64 > self.pairs_in_flight(stream) {
            // A copy of another size is freed before the new one is allocated.
            let cached = scratch.sorted.take().filter(|(k, _)| k.len() == n);
            let (mut sorted_keys, mut sorted_values) = match cached {
                Some(copy) => copy,
                None => (
                    DeviceBuffer::unfilled(stream, n)?,
                    DeviceBuffer::unfilled(stream, n)?,
                ),
            };
            self.sort_batch(stream, keys, values, &mut sorted_keys, &mut sorted_values)?;
            sorted = Some((sorted_keys, sorted_values));
        }
        let (keys, values) = sorted.as_ref().map_or((keys, values), |(k, v)| (k, v));
        scratch.reset(stream)?;
        let mut found = None;
        let mut old_values = None;
        let mut existing = 0u64;
        if len_before > 0 {
            // Pass 1: which keys are held already, and their values (for undoing).
            let mut f = DeviceBuffer::<u8>::zeroed(stream, n)?;
            let mut old = DeviceBuffer::<V>::zeroed(stream, n)?;
            self.find(
                stream,
                keys,
                Some(&mut f),
                Some(&mut old),
                Some(&mut scratch.counters),
            )?;
            existing = scratch.counters(stream)?[2];
            found = Some(f);
            old_values = Some(old);
        }
        // Saved on the stream, between batches: its lock word is clear.
        scratch
            .side_before
            .copy_from(stream, &self.shared.read().side)?;
        // Grow before changing anything, so that running out of memory here leaves the
        // table as it was.
        self.grow_for(stream, len_before + (n as u64 - existing))?;
        scratch.reset(stream)?;

        if let Some(f) = &found
            && existing > 0
        {
            self.update(stream, keys, values, f, FOUND)?;
        }
        let input = Input {
            keys,
            values,
            count: n,
            skip: found.as_ref(),
        };
        let outcome = self.place_and_settle(stream, &input, &mut scratch);
        match outcome {
            Ok(()) => {}
            Err(e) if e.is_out_of_device_memory() => {
                self.undo_insert(
                    stream,
                    keys,
                    found.as_ref(),
                    old_values.as_ref(),
                    &mut scratch,
                )?;
                return Err(e);
            }
            Err(e) => {
                self.refresh(stream)?;
                return Err(e);
            }
        }
        self.refresh(stream)?;
        if sorted.is_some() {
            scratch.sorted = sorted;
        }
        *self.scratch.lock() = Some(scratch);
        self.apply_policy(stream)
    }

    /// Pairs the place kernel holds in flight at most: GH_CUCKOO_PLACE_PER_THREAD a thread of
    /// as many threads as the device keeps resident.
    fn pairs_in_flight(&self, stream: &Stream) -> u64 {
        let shape = lane_shape(stream, u64::MAX);
        u64::from(shape.blocks)
            * u64::from(shape.threads_per_block)
            * u64::from(GH_CUCKOO_PLACE_PER_THREAD)
    }

    /// Writes the batch into `sorted_keys` and `sorted_values` (of its length) sorted by the
    /// partition of each pair's first bucket (see `GhCuckooPartitionParams`): the kernels
    /// that then take the pairs in order work on a few partitions at a time, whose key and
    /// value lines stay in L2, where pairs in the order given would touch lines all over the
    /// table, each a DRAM access.
    fn sort_batch(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        sorted_keys: &mut DeviceBuffer<K>,
        sorted_values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        let n = keys.len();
        assert!(sorted_keys.len() == n && sorted_values.len() == n);
        let mut offsets = DeviceBuffer::<u64>::zeroed(stream, GH_CUCKOO_PARTITIONS as usize)?;
        {
            let view = self.view();
            let mut guards = Vec::new();
            let table = Self::describe(&view, stream, &mut guards);
            let k = keys.address(stream);
            let v = values.address(stream);
            let ko = sorted_keys.address_mut(stream);
            let vo = sorted_values.address_mut(stream);
            let o = offsets.address_mut(stream);
            let params = GhCuckooPartitionParams {
                home: self.home(&view, false),
                table,
                keys: k.address as *const _,
                values: v.address as *const u32,
                keys_out: ko.address as *mut _,
                values_out: vo.address as *mut u32,
                offsets: o.address as *mut u64,
                count: n as u64,
            };
            let scan = LaunchShape {
                blocks: 1,
                threads_per_block: GH_CUCKOO_SORT_THREADS,
                shared_bytes: 0,
            };
            let scatter = LaunchShape::grid_stride(
                stream.device(),
                (n as u64).div_ceil(u64::from(GH_CUCKOO_SORT_PER_THREAD)),
                GH_CUCKOO_SORT_THREADS,
            );
            let kernels = K::kernels();
            // SAFETY: the table's arrays are held by `view` and their guards (the kernels read
            // its bucket counts and hash coefficients only); the inputs and the sorted outputs
            // hold n pairs each and `offsets` GH_CUCKOO_PARTITIONS counters, zeroed; the scan
            // and the scatter run blocks of GH_CUCKOO_SORT_THREADS, as they need; the counts
            // give each partition exactly the places its pairs fill, so the scatter writes
            // every place below n once and nothing else. Every guard outlives the launches.
            unsafe {
                kernels
                    .partition_count
                    .launch(stream, lane_shape(stream, n as u64), params)?;
                key::PARTITION_SCAN.launch(stream, scan, params)?;
                kernels.partition_scatter.launch(stream, scatter, params)?;
            }
        }
        Ok(())
    }

    /// Passes 2 and 3 of a user batch: most pairs find an empty slot without a lock (the
    /// place kernel); the insert kernel, with its locks and evictions, takes the rest from
    /// failed list 1; `settle` removes the copies evictions left and retries the homeless;
    /// last, the later copies of a key write their values.
    fn place_and_settle(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<()> {
        let duplicates = self.place_then_insert(stream, input, scratch)?;
        self.settle(stream, scratch, Some(input), true, true)?;
        if duplicates > 0 {
            self.update(
                stream,
                input.keys,
                input.values,
                &scratch.status,
                GH_CUCKOO_DUPLICATE,
            )?;
        }
        Ok(())
    }

    /// The place kernel, then the insert kernel for the pairs it left pending (from failed
    /// list 1, homeless ones into failed list 0). Returns the number of duplicates.
    fn place_then_insert(
        &self,
        stream: &Stream,
        input: &Input<'_, K, V>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<u64> {
        let (pending, duplicates) = self.place_launch(stream, input, scratch)?;
        if pending > 0 {
            let keys = std::mem::replace(
                &mut scratch.failed_keys[1],
                DeviceBuffer::zeroed(stream, 0)?,
            );
            let values = std::mem::replace(
                &mut scratch.failed_values[1],
                DeviceBuffer::zeroed(stream, 0)?,
            );
            let rest = Input {
                keys: &keys,
                values: &values,
                count: pending as usize,
                skip: None,
            };
            let launched = self.insert_launch(stream, &rest, scratch, 0, None);
            scratch.failed_keys[1] = keys;
            scratch.failed_values[1] = values;
            launched?;
        }
        Ok(duplicates)
    }

    /// After an insert launch into failed list 0: removes duplicates that evictions may
    /// have left (when `dedup`), and while pairs are homeless, grows the table (when
    /// `grow`; an undo, short of memory, retries with fresh random swaps only) and retries
    /// them. On return every pair is placed, or the error says which are not; the failed
    /// list then holds them.
    fn settle(
        &self,
        stream: &Stream,
        scratch: &mut Scratch<K, V>,
        original: Option<&Input<'_, K, V>>,
        dedup: bool,
        grow: bool,
    ) -> Result<()> {
        const DUPLICATES: u32 = GH_CUCKOO_REMOVE_DUPLICATES;
        let mut current = 0usize;
        let mut retried = 0usize;
        for round in 0..MAX_ROUNDS {
            let [logged, failed, _, _] = scratch.counters(stream)?;
            let failed = failed as usize;
            if dedup {
                // A key of this batch that was swapped out may rest in two subtables now:
                // every swapped-out key is checked (all new keys if the log overflowed).
                let log_len = (logged as usize).min(scratch.log.len());
                self.remove_launch(stream, &scratch.log, log_len, None, DUPLICATES, None)?;
                if logged as usize > scratch.log.len()
                    && let Some(input) = original
                {
                    self.remove_launch(
                        stream,
                        input.keys,
                        input.count,
                        input.skip,
                        DUPLICATES,
                        None,
                    )?;
                }
                if round > 0 {
                    let retried_keys = &scratch.failed_keys[1 - current];
                    self.remove_launch(stream, retried_keys, retried, None, DUPLICATES, None)?;
                }
            }
            if failed == 0 {
                return Ok(());
            }
            if grow {
                self.refresh(stream)?;
                let buckets = self.subtable_buckets();
                let resize = if self.options.rehash_all {
                    Resize::UpAll
                } else {
                    Resize::Up(policy::upsize_target(&buckets))
                };
                scratch.current = current;
                self.resize(stream, resize)?;
            }
            scratch.reset(stream)?;
            let next = 1 - current;
            // Retry the homeless pairs, from list `current` into list `next`.
            let keys = std::mem::replace(
                &mut scratch.failed_keys[current],
                DeviceBuffer::zeroed(stream, 0)?,
            );
            let values = std::mem::replace(
                &mut scratch.failed_values[current],
                DeviceBuffer::zeroed(stream, 0)?,
            );
            let input = Input {
                keys: &keys,
                values: &values,
                count: failed,
                skip: None,
            };
            self.insert_launch(stream, &input, scratch, next, None)?;
            scratch.failed_keys[current] = keys;
            scratch.failed_values[current] = values;
            retried = failed;
            current = next;
            scratch.current = current;
        }
        // Still homeless after every round: name them.
        let failed = scratch.counters(stream)?[1] as usize;
        let keys = scratch.failed_keys[current].to_host(stream)?;
        Err(CuckooError::NotInserted {
            keys: keys[..failed].iter().map(|k| k.widen()).collect(),
        })
    }

    /// Undoes an insert batch that ran out of memory half way: removes the keys it added,
    /// restores the values it replaced and the side slot, and puts back the old pairs that
    /// were swapped out and left homeless.
    fn undo_insert(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: Option<&DeviceBuffer<u8>>,
        old_values: Option<&DeviceBuffer<V>>,
        scratch: &mut Scratch<K, V>,
    ) -> Result<()> {
        stream.synchronize()?;
        let failed = scratch.counters(stream)?[1] as usize;
        // The homeless pairs of the last insert launch.
        let homeless: Vec<(K, V)> = {
            let list = scratch.current;
            let k = scratch.failed_keys[list].to_host(stream)?;
            let v = scratch.failed_values[list].to_host(stream)?;
            k.into_iter().zip(v).take(failed).collect()
        };
        let n = keys.len();
        // Every copy of every key the batch added goes.
        self.remove_launch(stream, keys, n, found, GH_CUCKOO_REMOVE_ALL, None)?;
        stream.synchronize()?;
        // Pairs of the batch that were not held before are dropped; old pairs go back.
        let batch_keys = keys.to_host(stream)?;
        let was_found = match found {
            Some(f) => f.to_host(stream)?,
            None => vec![0; n],
        };
        let new_keys: HashSet<K> = batch_keys
            .iter()
            .zip(&was_found)
            .filter(|&(_, &f)| f == 0)
            .map(|(k, _)| *k)
            .collect();
        let mut seen = HashSet::new();
        let old: Vec<(K, V)> = homeless
            .into_iter()
            .filter(|(k, _)| !new_keys.contains(k) && seen.insert(*k))
            .collect();
        if !old.is_empty() {
            let (k, v): (Vec<K>, Vec<V>) = old.into_iter().unzip();
            let dk = DeviceBuffer::from_host(stream, &k)?;
            let dv = DeviceBuffer::from_host(stream, &v)?;
            scratch.reset(stream)?;
            let input = Input {
                keys: &dk,
                values: &dv,
                count: k.len(),
                skip: None,
            };
            // Into empty slots first, then with swaps, retried in place: there is no memory
            // to grow into.
            self.place_then_insert(stream, &input, scratch)?;
            if let Err(e) = self.settle(stream, scratch, None, false, false) {
                self.refresh(stream)?;
                return Err(e);
            }
        }
        // Then the values the batch replaced, and the side slot, as they were.
        if let (Some(found), Some(old)) = (found, old_values) {
            self.update(stream, keys, old, found, FOUND)?;
        }
        self.shared
            .write()
            .side
            .copy_from(stream, &scratch.side_before)?;
        self.refresh(stream)
    }

    fn remove_locked(&self, stream: &Stream, keys: &DeviceBuffer<K>) -> Result<usize> {
        let mut counters = DeviceBuffer::<u64>::zeroed(stream, 4)?;
        self.remove_launch(
            stream,
            keys,
            keys.len(),
            None,
            GH_CUCKOO_REMOVE_FIRST,
            Some(&mut counters),
        )?;
        let removed = counters.to_host(stream)?[2] as usize;
        self.refresh(stream)?;
        self.apply_policy(stream)?;
        Ok(removed)
    }

    /// Reads the subtable counts and the side slot's flag into the mirror.
    fn refresh(&self, stream: &Stream) -> Result<()> {
        let (counts, side) = {
            let shared = self.shared.read();
            (shared.counts.to_host(stream)?, shared.side.to_host(stream)?)
        };
        let mut m = self.mirror.lock();
        m.counts = counts[..self.options.subtables].to_vec();
        m.side_present = side[0] != 0;
        Ok(())
    }

    fn side_value(&self, stream: &Stream) -> Result<V> {
        let side = self.shared.read().side.to_host(stream)?;
        Ok(bytemuck::pod_read_unaligned(bytemuck::cast_slice(
            &side[SIDE_HEADER..],
        )))
    }

    /// Overwrites the side slot's words (its lock word cleared).
    fn write_side(&self, stream: &Stream, words: &mut [u32]) -> Result<()> {
        words[1] = 0;
        Ok(self.shared.write().side.copy_from_host(stream, words)?)
    }

    fn write_counts(&self, stream: &Stream, counts: &[u64]) -> Result<()> {
        let mut all = vec![0u64; GH_CUCKOO_MAX_SUBTABLES as usize];
        all[..counts.len()].copy_from_slice(counts);
        Ok(self.shared.write().counts.copy_from_host(stream, &all)?)
    }

    /// Upsizes (before a batch changes anything) until `len` pairs fit below beta.
    fn grow_for(&self, stream: &Stream, len: u64) -> Result<()> {
        let bounds = Bounds {
            alpha: 0.0,
            ..self.bounds()
        };
        while let Some(resize) = policy::next_resize(&self.subtable_buckets(), len, &bounds) {
            self.resize(stream, resize)?;
        }
        Ok(())
    }

    /// Resizes until the fill factor is within bounds. Running out of memory for a resize
    /// here is not an error: every pair is in, only the fill factor stays out of bounds.
    fn apply_policy(&self, stream: &Stream) -> Result<()> {
        for _ in 0..64 {
            let len = self.mirror.lock().len();
            let Some(resize) = policy::next_resize(&self.subtable_buckets(), len, &self.bounds())
            else {
                return Ok(());
            };
            match self.resize(stream, resize) {
                Ok(()) => {}
                Err(e) if e.is_out_of_device_memory() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn resize(&self, stream: &Stream, resize: Resize) -> Result<()> {
        let start = Instant::now();
        match resize {
            Resize::Up(i) => self.resize_one(stream, i, true)?,
            Resize::Down(i) => self.resize_one(stream, i, false)?,
            Resize::UpAll => self.rehash_all(stream, true)?,
            Resize::DownAll => self.rehash_all(stream, false)?,
        }
        let mut m = self.mirror.lock();
        match resize {
            Resize::Up(_) => m.stats.upsizes += 1,
            Resize::Down(_) => m.stats.downsizes += 1,
            Resize::UpAll | Resize::DownAll => m.stats.rehashes += 1,
        }
        m.stats.seconds += start.elapsed().as_secs_f64();
        Ok(())
    }

    /// Doubles or halves subtable `index`, holding only its write lock. A downsize's
    /// residuals (pairs of two merged buckets that do not fit one) are then inserted into
    /// the other subtables.
    fn resize_one(&self, stream: &Stream, index: usize, up: bool) -> Result<()> {
        let words = Self::WORDS;
        let count = self.shared.read().counts.to_host(stream)?[index] as usize;
        let mut residual_keys = DeviceBuffer::<K>::zeroed(stream, if up { 0 } else { count })?;
        let mut residual_values = DeviceBuffer::<V>::zeroed(stream, if up { 0 } else { count })?;
        let mut counters = DeviceBuffer::<u64>::zeroed(stream, 4)?;
        let mut scratch = if up {
            None
        } else {
            Some(Scratch::<K, V>::new(stream, count, 0)?)
        };
        let residuals = {
            let mut sub = self.subtables[index].write();
            let buckets = if up { sub.buckets * 2 } else { sub.buckets / 2 };
            if buckets >= 1 << 31 {
                return Err(Error::OutOfDeviceMemory.into());
            }
            let new = Subtable::<K>::allocate(stream, buckets, words, (sub.hash_a, sub.hash_b))?;
            {
                let mut guards = Vec::new();
                let from = sub.layout(stream, &mut guards);
                let to = new.layout(stream, &mut guards);
                let rk = residual_keys.address_mut(stream);
                let rv = residual_values.address_mut(stream);
                let rc = counters.address_mut(stream);
                let params = GhCuckooResizeParams {
                    from,
                    to,
                    residual_keys: rk.address as *mut _,
                    residual_values: rv.address as *mut u32,
                    residual_count: rc.address as *mut u64,
                    value_words: words as u32,
                    seed: self.choice_seed(),
                };
                let units = if up { sub.buckets } else { buckets };
                // SAFETY: both subtables' arrays are live (the old one under the write
                // lock, the new one owned here) and sized by their bucket counts; the
                // residual lists hold the subtable's `count` pairs, more than can ever be
                // residual; all guards outlive the launch, which is waited for below.
                unsafe {
                    K::kernels()
                        .resize
                        .launch(stream, tile_shape(stream, units), params)
                }?;
            }
            stream.synchronize()?;
            *sub = new;
            counters.to_host(stream)?[0] as usize
        };
        if residuals > 0 {
            let mut counts = self.shared.read().counts.to_host(stream)?;
            counts[index] -= residuals as u64;
            self.write_counts(stream, &counts[..self.options.subtables])?;
            self.refresh(stream)?;
            let scratch = scratch.as_mut().expect("downsizes have scratch");
            let exclude = (self.options.subtables >= 3).then_some(index);
            let input = Input {
                keys: &residual_keys,
                values: &residual_values,
                count: residuals,
                skip: None,
            };
            self.insert_launch(stream, &input, scratch, 0, exclude)?;
            if let Err(e) = self.settle(stream, scratch, None, false, true) {
                // The residuals left homeless are no longer in the table: whatever went
                // wrong (running out of memory for the upsize that would make room), the
                // error names them rather than passing as a mere lack of memory.
                self.refresh(stream)?;
                return Err(match e {
                    CuckooError::Core(Error::OutOfDeviceMemory) => {
                        let failed = scratch.counters(stream)?[1] as usize;
                        let keys = scratch.failed_keys[scratch.current].to_host(stream)?;
                        CuckooError::NotInserted {
                            keys: keys[..failed].iter().map(|k| k.widen()).collect(),
                        }
                    }
                    other => other,
                });
            }
        }
        self.refresh(stream)
    }

    /// The rehash-everything baseline: every subtable doubled (or halved) and every pair
    /// inserted again. The old arrays stay until all pairs are in the new ones, so a failure
    /// leaves the table as it was.
    /// Every pair in the subtables (not the side slot) into new device buffers of the
    /// `slotted` pairs the counts say they hold; an error if the kernel found another
    /// number (it writes below `slotted` only), so nothing is lost unnoticed.
    fn export_slotted(
        &self,
        stream: &Stream,
        slotted: usize,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>)> {
        let mut keys = DeviceBuffer::<K>::zeroed(stream, slotted)?;
        let mut values = DeviceBuffer::<V>::zeroed(stream, slotted)?;
        let mut written = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        {
            let view = self.view();
            let mut guards = Vec::new();
            let table = Self::describe(&view, stream, &mut guards);
            let k = keys.address_mut(stream);
            let v = values.address_mut(stream);
            let w = written.address_mut(stream);
            let params = GhCuckooExportParams {
                table,
                keys_out: k.address as *mut _,
                values_out: v.address as *mut u32,
                written: w.address as *mut u64,
                capacity: slotted as u64,
            };
            let buckets: u64 = view.subs.iter().map(|s| s.buckets).max().unwrap_or(1);
            // SAFETY: the table's arrays are held by the read guards in `subs` and their
            // address guards; the outputs hold `slotted` keys and values, the kernel writes
            // below `capacity` only and counts the rest in `written`.
            unsafe {
                K::kernels()
                    .export
                    .launch(stream, tile_shape(stream, buckets), params)
            }?;
        }
        let written = written.to_host(stream)?[0] as usize;
        if written != slotted {
            return Err(Error::InvalidInput(format!(
                "export found {written} pairs where the counts say {slotted}"
            ))
            .into());
        }
        Ok((keys, values))
    }

    fn rehash_all(&self, stream: &Stream, up: bool) -> Result<()> {
        let words = Self::WORDS;
        let (slotted, counts_before) = {
            let m = self.mirror.lock();
            (m.counts.iter().sum::<u64>() as usize, m.counts.clone())
        };
        let (keys, values) = self.export_slotted(stream, slotted)?;
        let mut factor = 1u64;
        loop {
            factor *= 2;
            if factor > 64 {
                // The table still holds every pair in its old arrays.
                return Err(Error::InvalidInput(
                    "rehash found no place for some pairs even at 64 times the size".into(),
                )
                .into());
            }
            let mut fresh = Vec::with_capacity(self.subtables.len());
            for sub in &self.subtables {
                let sub = sub.read();
                let buckets = if up {
                    sub.buckets * factor
                } else {
                    sub.buckets * factor / 4
                };
                fresh.push(Subtable::<K>::allocate(
                    stream,
                    buckets.max(1),
                    words,
                    (sub.hash_a, sub.hash_b),
                )?);
            }
            let mut scratch = Scratch::<K, V>::new(stream, slotted, 0)?;
            stream.synchronize()?;
            let mut old = Vec::with_capacity(fresh.len());
            for (slot, new) in self.subtables.iter().zip(fresh) {
                old.push(std::mem::replace(&mut *slot.write(), new));
            }
            self.write_counts(stream, &vec![0; self.options.subtables])?;
            self.refresh(stream)?;
            // Every pair goes in afresh: only this insert's thresholds count.
            let settled_before = std::mem::take(&mut self.mirror.lock().settled);
            let input = Input {
                keys: &keys,
                values: &values,
                count: slotted,
                skip: None,
            };
            self.insert_launch(stream, &input, &mut scratch, 0, None)?;
            stream.synchronize()?;
            if scratch.counters(stream)?[1] == 0 {
                return self.refresh(stream);
            }
            // Some pairs found no place: put the old arrays back and try larger ones.
            for (slot, previous) in self.subtables.iter().zip(old) {
                *slot.write() = previous;
            }
            self.mirror.lock().settled = settled_before;
            self.write_counts(stream, &counts_before)?;
            self.refresh(stream)?;
            if !up && factor >= 2 {
                // A halving that does not fit is simply not done.
                return Ok(());
            }
        }
    }
}

fn check_lengths(what: &'static str, left: usize, right: usize) -> Result<()> {
    if left == right {
        Ok(())
    } else {
        Err(Error::LengthMismatch { what, left, right }.into())
    }
}

/// A launch of one tile per unit.
fn tile_shape(stream: &Stream, units: u64) -> LaunchShape {
    lane_shape(stream, units * TILE)
}

/// A launch of one lane per unit.
fn lane_shape(stream: &Stream, units: u64) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), units.max(1), THREADS)
}

/// Universal hash coefficients of subtable `index`: `0 < a < p`, `b < p`.
fn hash_coefficients<K: CuckooKey>(seed: u64, index: usize) -> (u64, u64) {
    let prime = if K::SLOTS == 32 { PRIME32 } else { PRIME61 };
    let x = fmix64(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let y = fmix64(x ^ 0xd1b5_4a32_d192_ed03);
    (1 + x % (prime - 1), y % prime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<CuckooTable<u32, u32>>();
        check::<CuckooTable<u64, [u32; 16]>>();
    }

    #[test]
    fn value_words_of_supported_types() {
        assert_eq!(Words::<u32>::N, 1);
        assert_eq!(Words::<[u32; 16]>::N, 16);
        assert_eq!(Words::<[u8; 12]>::N, 3);
        assert_eq!(Words::<[u64; 2]>::N, 4);
    }

    #[test]
    fn hash_coefficients_are_in_the_family() {
        for i in 0..8 {
            let (a, b) = hash_coefficients::<u32>(7, i);
            assert!(a > 0 && a < PRIME32 && b < PRIME32);
            let (a, b) = hash_coefficients::<u64>(7, i);
            assert!(a > 0 && a < PRIME61 && b < PRIME61);
        }
        assert_ne!(
            hash_coefficients::<u32>(7, 0),
            hash_coefficients::<u32>(7, 1)
        );
    }

    #[test]
    fn fastmod_magic_is_exact() {
        // The kernels compute h mod b as mulhi(magic * h, b) with magic = ceil(2^64 / b).
        for b in [1u64, 2, 3, 7, 1000, 735_843, (1 << 31) - 1] {
            let magic = (u64::MAX / b).wrapping_add(1);
            for h in [0u32, 1, 2, 12345, u32::MAX - 1, u32::MAX] {
                let low = magic.wrapping_mul(u64::from(h));
                let got = ((u128::from(low) * u128::from(b)) >> 64) as u64;
                assert_eq!(got, u64::from(h) % b, "h = {h}, b = {b}");
            }
        }
    }
}
