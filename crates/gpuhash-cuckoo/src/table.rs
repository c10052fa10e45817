//! [`CuckooTable`]: the table's state, its host-side bookkeeping and the order of its
//! batches. Each phase of the table's work lives in a submodule, as cuCollections splits a
//! container from its device-side views: `insert` (both insert passes, the sort by
//! partition, undoing a batch), `lookup` (find and export), `remove`, `resize`, `image`,
//! and `contract` (the [`Table`](gpuhash_core::table::Table) and
//! [`Map`](gpuhash_core::table::Map) verbs, built on the others). `order` keeps batches on
//! different streams in the order the locks give them on the host; `scratch` holds the
//! device space a writing batch works in; `subtable` one subtable's device arrays. Every
//! kernel launch goes through the crate's `launch` module.

mod combining;
mod contract;
mod device_view;
mod image;
mod insert;
mod lookup;
mod order;
mod remove;
mod resize;
mod routed;
mod scratch;
mod subtable;

pub use device_view::DeviceView;
pub use image::IMAGE_LAYOUT_VERSION;

use std::marker::PhantomData;

use gpuhash_core::hash::fmix64;
use gpuhash_core::table::{Key, Value};
use gpuhash_core::{Device, DeviceAddress, DeviceBuffer, Error, Stream};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::launch::counter;
use crate::layouts::{
    GH_CUCKOO_MAX_SUBTABLES, GH_CUCKOO_MAX_VALUE_WORDS, GH_CUCKOO_REPORT_SIDE, GhCuckooHome,
    GhCuckooTable,
};
use crate::policy::{self, Bounds, ChoiceRange};
use crate::{BucketLayout, CuckooOptions, Result};
use order::Order;
use scratch::Scratch;
use subtable::Subtable;

/// Words of the side slot before the value: present flag and lock.
const SIDE_HEADER: usize = 2;
/// 2^32 - 5 and 2^61 - 1, the primes of the u32 and u64 hash families.
const PRIME32: u64 = 4_294_967_291;
const PRIME61: u64 = (1 << 61) - 1;

/// Whether the table stores values of `bytes` bytes: 4 to 64, in whole 4-byte words.
const fn stores_values_of(bytes: usize) -> bool {
    bytes >= 4 && bytes <= 4 * GH_CUCKOO_MAX_VALUE_WORDS as usize && bytes.is_multiple_of(4)
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

/// What the host knows of the device state, refreshed after every insert batch.
#[derive(Debug, Default)]
struct Mirror {
    counts: Vec<u64>,
    side_present: bool,
    /// Removes were queued since the counts were last read: the device's pair counts (which
    /// the remove kernel keeps) are ahead of `counts` and `side_present`.
    uncounted_removes: bool,
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

/// A dynamic GPU cuckoo hash table (DyHash): `K` keys (`u32` or `u64`) to `V` values
/// (plain data of 4 to 64 bytes, a multiple of 4: other widths do not compile).
///
/// The table speaks the [table contract](gpuhash_core::table): [`Map`] for the batches
/// (host slices or device buffers on a caller's stream), [`Table`] for `len`, `memory`
/// and `clear`, [`Image`](gpuhash_core::image::Image) to move it to host memory or a file
/// and back. What is its own: the resize policy's state (`capacity`, `fill_factor`,
/// `shrink_to`, ...).
///
/// Batch calls take `&self` and the table is `Send + Sync`. Reading batches (`get`,
/// `contains`, `export`) run concurrently from any number of threads, each on its own
/// stream; writing batches (`insert`, `remove`, `clear`) run one at a time and exclude
/// readers, because a cuckoo insert moves pairs between subtables and a concurrent reader
/// could miss a pair in flight. The host locks order the calls; events carry that order
/// to the device, whatever streams the batches come on: a batch's work waits for the
/// events of the batches it excludes that were queued before it (a writer for every
/// earlier batch, a reader for the last writer), so a reader's kernel never runs beside
/// a writer's even though `get_async` returns before its kernel runs.
///
/// Device memory: the subtables' slot words (keys, or packed pairs), values (split
/// buckets only: see [`BucketLayout`]), one lock word and one dirty bit per bucket,
/// plus the scratch space of the largest insert batch so far (two lists for homeless pairs
/// and a log of evicted keys, about `3 * batch * (size_of::<K>() + size_of::<V>())` bytes),
/// kept so that later batches need not allocate. [`Table::memory`] counts the
/// subtables as in use and the scratch space as reserved.
///
/// A value width the table does not store is refused when the code is compiled:
///
/// ```compile_fail
/// let device = gpuhash_core::Device::default().unwrap();
/// let table = gpuhash_cuckoo::CuckooTable::<u32, u16>::with_capacity(&device, 1024);
/// ```
///
/// [`Map`]: gpuhash_core::table::Map
/// [`Table`]: gpuhash_core::table::Table
/// [`Table::memory`]: gpuhash_core::table::Table::memory
pub struct CuckooTable<K: Key, V: Value> {
    device: Device,
    options: CuckooOptions,
    /// The layout `options.layout` resolves to for this pair: `Split` or `Packed`.
    layout: BucketLayout,
    /// Writers hold it for writing, readers for reading, while they queue their work.
    gate: RwLock<()>,
    /// The events that carry the gate's order to the device.
    order: Order,
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

type Guards<'a, K> = Vec<RwLockReadGuard<'a, Subtable<K>>>;

impl<K: Key, V: Value> Drop for CuckooTable<K, V> {
    /// Frees the arrays without waiting for other work on the streams that used them, once
    /// every batch the table queued has run: the swap layer drops a child whose work it
    /// waited for while the next batch runs on the same stream, and the memory goes to the
    /// child paged in next, whose copy would otherwise wait for that batch.
    #[allow(
        unsafe_code,
        reason = "device memory freed with no wait: the table's batch order proves it idle"
    )]
    fn drop(&mut self) {
        if !self.order.all_run() {
            return;
        }
        let shared = self.shared.get_mut();
        // SAFETY: every use of these arrays is a batch the order brackets with events
        // (`reading`, `writing`, a device view) or work on a lent stream waited for before
        // its call returned (`on_lent_stream`, `rebuild`); every event has completed, so no
        // use is left to run.
        unsafe {
            shared.counts.forget_finished_uses();
            shared.side.forget_finished_uses();
            for subtable in &mut self.subtables {
                let s = subtable.get_mut();
                s.keys.forget_finished_uses();
                s.values.forget_finished_uses();
                s.locks.forget_finished_uses();
                s.dirty.forget_finished_uses();
            }
            if let Some(scratch) = self.scratch.get_mut() {
                scratch.counters.forget_finished_uses();
                scratch.log.forget_finished_uses();
                scratch.status.forget_finished_uses();
                scratch.side_before.forget_finished_uses();
                for (keys, values) in scratch.failed_keys.iter().zip(&scratch.failed_values) {
                    keys.forget_finished_uses();
                    values.forget_finished_uses();
                }
                if let Some((keys, values)) = &scratch.sorted {
                    keys.forget_finished_uses();
                    values.forget_finished_uses();
                }
            }
        }
    }
}

impl<K: Key, V: Value> std::fmt::Debug for CuckooTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuckooTable")
            .field("options", &self.options)
            .field("buckets", &self.subtable_buckets())
            .field("counts", &self.mirror.lock().counts)
            .finish()
    }
}

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// Pairs one bucket of a table made with `layout` holds: 16 packed, 32 split `u32` keys,
    /// 16 split `u64` keys. A table of `b` buckets a subtable and `d` subtables has
    /// `b * d * bucket_slots` slots. [`CuckooError::InvalidOptions`](crate::CuckooError) if
    /// this pair cannot have that layout ([`BucketLayout::resolve`]).
    pub fn bucket_slots(layout: BucketLayout) -> Result<usize> {
        let resolved = layout.resolve(size_of::<K>(), size_of::<V>())?;
        Ok(resolved.slots(size_of::<K>()) as usize)
    }

    /// 4-byte words of a value.
    const WORDS: usize = size_of::<V>() / 4;

    /// A table with the default options sized to hold `capacity` pairs below the upper fill
    /// bound, which keeps that size as its floor (see [`CuckooOptions::initial_capacity()`]).
    pub fn with_capacity(device: &Device, capacity: usize) -> Result<Self> {
        Self::new(device, CuckooOptions::with_capacity(capacity))
    }

    /// A table with these options; [`CuckooError::InvalidOptions`](crate::CuckooError)
    /// if they do not [validate](CuckooOptions::validate). Waits for its arrays to be
    /// filled, on a stream the device lends.
    pub fn new(device: &Device, options: CuckooOptions) -> Result<Self> {
        options.validate()?;
        let layout = options.layout.resolve(size_of::<K>(), size_of::<V>())?;
        let slots = layout.slots(size_of::<K>());
        let stream = device.lend_stream()?;
        let buckets = options.initial_bucket_count(slots);
        let subtables = (0..options.subtables)
            .map(|i| {
                let hash = hash_coefficients::<K>(options.seed, i);
                Self::allocate_subtable(layout, &stream, buckets, hash)
            })
            .collect::<Result<Vec<_>>>()?;
        let shared = Shared {
            counts: DeviceBuffer::zeroed(&stream, GH_CUCKOO_MAX_SUBTABLES as usize)?,
            side: DeviceBuffer::zeroed(&stream, SIDE_HEADER + Self::WORDS)?,
        };
        stream.synchronize()?;
        let mirror = Mirror {
            counts: vec![0; options.subtables],
            floor_slots: buckets * options.subtables as u64 * slots,
            ..Mirror::default()
        };
        Ok(Self::assemble(
            device, options, layout, subtables, shared, mirror,
        ))
    }

    /// An empty subtable of `buckets` buckets in `layout` (resolved): slot words all empty,
    /// and a values array only when split.
    fn allocate_subtable(
        layout: BucketLayout,
        stream: &Stream,
        buckets: u64,
        hash: (u64, u64),
    ) -> Result<Subtable<K>> {
        let value_words = layout.value_words_per_bucket(size_of::<K>(), Self::WORDS);
        Subtable::allocate(stream, buckets, value_words, hash)
    }

    /// The table of these parts, which every constructor makes; where the value width is
    /// checked, at compile time.
    fn assemble(
        device: &Device,
        options: CuckooOptions,
        layout: BucketLayout,
        subtables: Vec<Subtable<K>>,
        shared: Shared,
        mirror: Mirror,
    ) -> Self {
        const {
            assert!(
                stores_values_of(size_of::<V>()),
                "cuckoo table values must be 4 to 64 bytes, a multiple of 4"
            )
        };
        Self {
            device: device.clone(),
            options,
            layout,
            gate: RwLock::new(()),
            order: Order::default(),
            subtables: subtables.into_iter().map(RwLock::new).collect(),
            shared: RwLock::new(shared),
            mirror: Mutex::new(mirror),
            scratch: Mutex::new(None),
            values: PhantomData,
        }
    }

    /// The options the table was made with.
    pub fn options(&self) -> &CuckooOptions {
        &self.options
    }

    /// How its buckets hold pairs: [`BucketLayout::Packed`] or [`BucketLayout::Split`], as
    /// [`CuckooOptions::layout`] resolves for this pair.
    pub fn layout(&self) -> BucketLayout {
        self.layout
    }

    /// Pairs one bucket holds (see [`bucket_slots`](Self::bucket_slots)).
    pub fn slots_per_bucket(&self) -> usize {
        self.slots() as usize
    }

    fn slots(&self) -> u64 {
        self.layout.slots(size_of::<K>())
    }

    /// Buckets of each subtable.
    pub fn subtable_buckets(&self) -> Vec<u64> {
        self.subtables.iter().map(|s| s.read().buckets).collect()
    }

    /// Pairs held by each subtable (the reserved key's side slot not included), once the
    /// batches queued so far have run (see [`fill_factor`](Self::fill_factor)).
    pub fn subtable_lens(&self) -> Result<Vec<u64>> {
        self.on_lent_stream(|s| self.count_on(s))?;
        Ok(self.mirror.lock().counts.clone())
    }

    /// Slots of all subtables. It stays at least [`capacity_floor`](Self::capacity_floor):
    /// a table holds `beta * capacity()` pairs before it grows. Downsizes that removes
    /// call for are made when the table next counts its pairs (see
    /// [`fill_factor`](Self::fill_factor)).
    pub fn capacity(&self) -> usize {
        policy::capacity(&self.subtable_buckets(), self.slots()) as usize
    }

    /// Slots below which no downsize takes the table: those it was created with (see
    /// [`CuckooOptions::initial_capacity()`]) until [`shrink_to`](Self::shrink_to) or
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
    /// does, so that the table keeps room for `min_capacity` pairs without growing. A
    /// writing batch, on a stream the device lends; returns with the resizes done.
    pub fn shrink_to(&self, min_capacity: usize) -> Result<()> {
        let floor = policy::slots_for(min_capacity as u64, self.options.beta);
        self.on_lent_stream(|stream| {
            self.writing(stream, || {
                self.catch_up_counts(stream)?;
                {
                    let mut m = self.mirror.lock();
                    m.floor_slots = m.floor_slots.min(floor);
                }
                self.apply_policy(stream)
            })
        })
    }

    /// `len / capacity`, the paper's filled factor, once the batches queued so far have
    /// run. Inserts keep it within `[alpha, beta]` before they return. Removes leave their
    /// counts on the device and return without waiting; the table reads them, and makes
    /// the downsizes they call for, when it next needs its count: here, in
    /// [`subtable_lens`](Self::subtable_lens), [`at_minimum_size`](Self::at_minimum_size),
    /// `len`, `memory`, `export`, `to_image`, `shrink_to` and the next insert.
    pub fn fill_factor(&self) -> Result<f64> {
        let len = self.on_lent_stream(|s| self.count_on(s))?;
        Ok(policy::fill(&self.subtable_buckets(), self.slots(), len))
    }

    /// True when the table cannot shrink further (every downsize would pass the minimum
    /// size or the capacity floor), so a fill factor below `alpha` is allowed.
    pub fn at_minimum_size(&self) -> Result<bool> {
        let len = self.on_lent_stream(|s| self.count_on(s))?;
        Ok(policy::next_resize(&self.subtable_buckets(), len, &self.bounds()).is_none())
    }

    /// Resizes made so far and the time they took.
    pub fn resize_stats(&self) -> ResizeStats {
        self.mirror.lock().stats
    }

    fn bounds(&self) -> Bounds {
        Bounds {
            alpha: self.options.alpha,
            beta: self.options.beta,
            slots: self.slots(),
            min_buckets: self.options.min_buckets,
            min_slots: self.capacity_floor() as u64,
            rehash_all: self.options.rehash_all,
        }
    }

    // ------------------------------------------------------------ order of batches

    /// Runs `work`, a writing batch queued on `stream`: alone on the host (the gate's write
    /// lock) and, on the device, after every batch queued before it on any stream and
    /// before every batch queued after it.
    fn writing<R>(&self, stream: &Stream, work: impl FnOnce() -> Result<R>) -> Result<R> {
        let _gate = self.gate.write();
        self.order.before_write(stream)?;
        let result = work();
        let recorded = self.order.after_write(stream);
        let value = result?;
        recorded?;
        Ok(value)
    }

    /// Runs `work`, a reading batch queued on `stream`: beside other readers on the host
    /// (the gate's read lock) and, on the device, after the last writing batch and before
    /// the next one.
    fn reading<R>(&self, stream: &Stream, work: impl FnOnce() -> Result<R>) -> Result<R> {
        let _gate = self.gate.read();
        self.order.before_read(stream)?;
        let result = work();
        let recorded = self.order.after_read(stream);
        let value = result?;
        recorded?;
        Ok(value)
    }

    /// Runs `work` on a stream the device lends, then waits for the stream (also when the
    /// work failed: nothing it queued outlives the call).
    fn on_lent_stream<R>(&self, work: impl FnOnce(&Stream) -> Result<R>) -> Result<R> {
        let stream = self.device.lend_stream()?;
        let value = work(&stream);
        let synchronized = stream.synchronize();
        let value = value?;
        synchronized?;
        Ok(value)
    }

    /// Pairs held once the batches queued so far have run. After removes, this is a
    /// writing batch on `stream`: it reads the counts they left (waiting for the stream)
    /// and makes the downsizes they call for.
    fn count_on(&self, stream: &Stream) -> Result<u64> {
        if self.mirror.lock().uncounted_removes {
            self.writing(stream, || self.settle_counts(stream))?;
        }
        Ok(self.mirror.lock().len())
    }

    /// Under the gate's write lock: reads the counts removes left, if any, and makes the
    /// downsizes they call for.
    fn settle_counts(&self, stream: &Stream) -> Result<()> {
        if self.mirror.lock().uncounted_removes {
            self.refresh(stream)?;
            self.apply_policy(stream)?;
        }
        Ok(())
    }

    /// Under the gate's write lock: reads the counts if removes changed them since.
    fn catch_up_counts(&self, stream: &Stream) -> Result<()> {
        if self.mirror.lock().uncounted_removes {
            self.refresh(stream)?;
        }
        Ok(())
    }

    // ------------------------------------------------------------ host bookkeeping

    /// Reads the subtable counts and the side slot's flag into the mirror; waits for
    /// `stream`.
    fn refresh(&self, stream: &Stream) -> Result<()> {
        self.refresh_reading(stream, None).map(drop)
    }

    /// [`refresh`](Self::refresh), reading a batch's `counters` (indexed by the names in
    /// [`counter`]; zeros without them) in the same wait.
    fn refresh_reading(
        &self,
        stream: &Stream,
        counters: Option<&DeviceBuffer<u64>>,
    ) -> Result<[u64; counter::WORDS]> {
        let subtables = self.options.subtables;
        let pool = stream.device().pinned_pool();
        let mut counts = pool.take::<u64>(subtables)?;
        let mut side = pool.take::<u32>(1)?;
        let mut batch = counters
            .map(|_| pool.take::<u64>(counter::WORDS))
            .transpose()?;
        {
            // Every copy queued before any is read: one wait.
            let shared = self.shared.read();
            shared
                .counts
                .copy_to_pinned_range_async(stream, 0..subtables, &mut counts, 0)?;
            shared
                .side
                .copy_to_pinned_range_async(stream, 0..1, &mut side, 0)?;
            if let (Some(counters), Some(batch)) = (counters, batch.as_mut()) {
                counters.copy_to_pinned_range_async(stream, 0..counter::WORDS, batch, 0)?;
            }
        }
        // Reading a pinned buffer waits for the copies into it.
        self.take_counts(&counts[..subtables], side[0] != 0);
        let mut read = [0; counter::WORDS];
        if let Some(batch) = &batch {
            read.copy_from_slice(&batch[..counter::WORDS]);
        }
        Ok(read)
    }

    /// [`refresh_reading`](Self::refresh_reading) with one copy, where the batch's last
    /// launch wrote the table's counts and side flag into the report words of its
    /// `counters` ([`counter::REPORT`]; the remove kernel of
    /// [`remove_logged`](Self::remove_logged)): at 2^22 pairs, the two copies saved are
    /// 1-3% of an insert.
    fn refresh_from_report(
        &self,
        stream: &Stream,
        counters: &DeviceBuffer<u64>,
    ) -> Result<[u64; counter::WORDS]> {
        let mut batch = stream.device().pinned_pool().take::<u64>(counter::WORDS)?;
        counters.copy_to_pinned_range_async(stream, 0..counter::WORDS, &mut batch, 0)?;
        // Reading the pinned buffer waits for the copy.
        let mut read = [0; counter::WORDS];
        read.copy_from_slice(&batch[..counter::WORDS]);
        let report = &read[counter::REPORT..];
        let side = report[GH_CUCKOO_REPORT_SIDE as usize] != 0;
        self.take_counts(&report[..self.options.subtables], side);
        Ok(read)
    }

    /// Puts counts and the side slot's flag read from the device into the mirror.
    fn take_counts(&self, counts: &[u64], side_present: bool) {
        let mut m = self.mirror.lock();
        m.counts = counts.to_vec();
        m.side_present = side_present;
        m.uncounted_removes = false;
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

    /// Bytes of the subtables and of the words every kernel shares.
    fn table_bytes(&self) -> u64 {
        let subtables: usize = self.subtables.iter().map(|s| s.read().bytes()).sum();
        let shared = self.shared.read();
        (subtables + shared.counts.size_bytes() + shared.side.size_bytes()) as u64
    }

    // ------------------------------------------------------------ the kernels' view

    fn view(&self) -> View<'_, K> {
        View {
            subs: self.subtables.iter().map(|s| s.read()).collect(),
            shared: self.shared.read(),
        }
    }

    /// The kernels' view of the table; the address guards go into `guards`, which must
    /// outlive the launch.
    fn describe<'a>(
        &self,
        view: &'a View<'a, K>,
        stream: &'a Stream,
        guards: &mut Vec<DeviceAddress<'a>>,
    ) -> GhCuckooTable {
        let mut table = GhCuckooTable {
            subtables: view.subs.len() as u32,
            value_words: Self::WORDS as u32,
            layout: self.layout.code(),
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
    /// agree with. (Lookups are exact whatever counts the weights come from: only keys
    /// settled under every insert's thresholds stop early.)
    fn home(&self, view: &View<'_, K>, placing: bool) -> GhCuckooHome {
        let buckets: Vec<u64> = view.subs.iter().map(|s| s.buckets).collect();
        let mut m = self.mirror.lock();
        let thresholds =
            policy::thresholds(&policy::home_weights(&buckets, &m.counts, self.slots()));
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
        choice_seed(self.options.seed)
    }
}

/// The seed of the keys' choices and home slots of a table made with `seed`.
fn choice_seed(seed: u64) -> u32 {
    fmix64(seed ^ 0x6a09_e667_f3bc_c909) as u32
}

fn check_lengths(what: &'static str, left: usize, right: usize) -> Result<()> {
    if left == right {
        Ok(())
    } else {
        Err(Error::LengthMismatch { what, left, right }.into())
    }
}

/// Universal hash coefficients of subtable `index`: `0 < a < p`, `b < p`.
fn hash_coefficients<K: Key>(seed: u64, index: usize) -> (u64, u64) {
    let prime = hash_prime::<K>();
    let x = fmix64(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let y = fmix64(x ^ 0xd1b5_4a32_d192_ed03);
    (1 + x % (prime - 1), y % prime)
}

/// The prime of the key width's hash family.
fn hash_prime<K: Key>() -> u64 {
    if K::WORDS == 1 { PRIME32 } else { PRIME61 }
}

#[cfg(test)]
mod tests;
