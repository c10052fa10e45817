//! The engine under the three slab hash tables: bucket heads and the slab allocator behind
//! one lock, and the batches that run on them, queued on the caller's stream
//! ([`SlabTable::queue`]) or run to the end with retries ([`SlabTable::run`]). Room for
//! inserts is in `room.rs`, whole-table passes in `scan.rs`, images in `image.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gpuhash_core::hash::Universal32;
use gpuhash_core::last_copy::{self, DuplicateKeys};
use gpuhash_core::staging::{downloaded, upload};
use gpuhash_core::table::Key;

use gpuhash_core::{Device, DeviceBuffer, Stream};
use gpuhash_slab_alloc::layouts::GH_SLAB_WORDS;
use gpuhash_slab_alloc::{Exhaustion, SlabAlloc, SlabAllocOptions};
use gpuhash_slab_list::room::InUseBound;
use parking_lot::RwLock;

use crate::launch::{self, OpsBuffers};
use crate::layouts::{
    GH_EMPTY_KEY, GH_OP_INSERT, GH_OP_INSERT_OR_FIND, GH_OP_REMOVE, GH_OP_UPSERT_ADD,
    GH_OP_UPSERT_MAX, GH_OP_UPSERT_MIN, GH_RESERVED_BUCKETS, GH_SLAB_READ_HALF, GH_SLAB_READ_HOME,
    GH_SLAB_READ_THREADS, GH_SLAB_READ_WHOLE, GH_STATUS_PENDING, GhSlabTable,
};
use crate::op::OpCode;
use crate::options::SlabHashOptions;
use crate::room::Room;
use crate::runs::RunScratch;
use crate::shape::{Kind, Shape};
use crate::{Result, SlabHashError, sizing};

/// What batches share and whole-table work replaces: behind the table's lock, which
/// batches hold for reading while they queue their kernels, and growth, compaction,
/// clearing and images hold for writing, after waiting for the device.
#[derive(Debug)]
pub(crate) struct Slabs {
    pub alloc: SlabAlloc,
    /// bucket_count + 3 head slabs of 32 words; the last three hold the reserved keys.
    pub heads: DeviceBuffer<u32>,
    /// Raised by the allocator when an insert queued without waiting found no free slab.
    pub lost: Exhaustion,
}

#[derive(Debug)]
pub(crate) struct SlabTable {
    pub shape: Shape,
    pub device: Device,
    pub bucket_count: u32,
    pub hash: Universal32,
    pub duplicate_keys: DuplicateKeys,
    pub slabs: RwLock<Slabs>,
    /// An upper bound of the allocator's slabs in use: measured on the device at the last
    /// wait, plus the most every insert batch queued since may link (see `room.rs`).
    pub possibly_in_use: InUseBound,
    /// Set when a batch that may remove entries is queued, cleared by a compaction:
    /// whether compacting could give slabs back.
    pub may_hold_tombstones: AtomicBool,
    /// An upper bound of the entries held: every batch that may insert adds its most
    /// inserts; unknown (`u64::MAX`) for a table loaded from an image, 0 after a clear.
    pub entries_bound: AtomicU64,
}

/// What one batch asks: `ops` per element or `uniform_op` for all, on `keys` (and
/// `values`), with at most `max_inserts` inserts among them.
pub(crate) struct Batch<'a, K, V> {
    pub ops: Option<&'a DeviceBuffer<OpCode>>,
    pub uniform_op: u32,
    pub keys: &'a DeviceBuffer<K>,
    pub values: Option<&'a DeviceBuffer<V>>,
    pub max_inserts: usize,
}

impl<'a, K: Key, V: Key> Batch<'a, K, V> {
    /// Every element the same operation `op`, with `values` for inserts.
    pub(crate) fn uniform(
        op: u32,
        keys: &'a DeviceBuffer<K>,
        values: Option<&'a DeviceBuffer<V>>,
    ) -> Self {
        let max_inserts = if may_insert(op) { keys.len() } else { 0 };
        Self {
            ops: None,
            uniform_op: op,
            keys,
            values,
            max_inserts,
        }
    }

    /// Operations `ops[i]` on `keys[i]` with `values[i]`, of which at most `max_inserts`
    /// are inserts.
    pub(crate) fn mixed(
        ops: &'a DeviceBuffer<OpCode>,
        keys: &'a DeviceBuffer<K>,
        values: &'a DeviceBuffer<V>,
        max_inserts: usize,
    ) -> Self {
        Self {
            ops: Some(ops),
            uniform_op: GH_OP_INSERT,
            keys,
            values: Some(values),
            max_inserts,
        }
    }

    fn may_remove(&self) -> bool {
        self.ops.is_some() || self.uniform_op == GH_OP_REMOVE
    }
}

/// Where one pass answers, and whether it serves every element or only PENDING ones.
struct Answers<'a, V> {
    results: Option<&'a mut DeviceBuffer<V>>,
    status: Option<&'a mut DeviceBuffer<u8>>,
    answer_all: bool,
    plan: Plan,
}

/// How the passes of one batch read the lists, chosen once for the batch.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// How the bulk kernels read slabs, a `GH_SLAB_READ_*` way ([`SlabTable::plan`]).
    reads: u32,
    /// A multimap's inserts: slabs of a list the tiled pass reads before it defers to the
    /// grouped appends (`runs.rs`); 0 for other batches.
    walk_slabs: u32,
}

impl SlabTable {
    /// An empty table of `shape` on `device`. Waits for its memory to be ready.
    pub(crate) fn new(device: &Device, shape: Shape, options: SlabHashOptions) -> Result<Self> {
        let bucket_count = options.bucket_count(shape)?;
        let hash = Universal32::from_seed(options.seed, bucket_count)?;
        let stream = device.lend_stream()?;
        let head_words = (u64::from(bucket_count) + u64::from(GH_RESERVED_BUCKETS)) * 32;
        let mut heads = DeviceBuffer::zeroed(&stream, head_words as usize)?;
        launch::fill(&stream, &mut heads, GH_EMPTY_KEY)?;
        // Slabs past the heads that `expected_entries` need under a uniform hash, and a
        // quarter more for the spread between lists; the allocator grows past that if it
        // must.
        let all =
            sizing::expected_slabs(options.expected_entries, bucket_count, shape.per_slab()) as u64;
        let beyond_heads = all.saturating_sub(u64::from(bucket_count));
        let alloc_options = SlabAllocOptions {
            variant: options.variant,
            initial_slabs: beyond_heads + beyond_heads / 4 + 1024,
        };
        let alloc = SlabAlloc::new(&stream, alloc_options)?;
        let lost = Exhaustion::new(&stream)?;
        stream.synchronize()?;
        Ok(Self::assemble(
            device,
            shape,
            hash,
            options.duplicate_keys,
            Slabs { alloc, heads, lost },
            0,
            0,
        ))
    }

    /// A table of these parts, `in_use` of whose slabs are taken, holding at most
    /// `entries_bound` entries.
    pub(crate) fn assemble(
        device: &Device,
        shape: Shape,
        hash: Universal32,
        duplicate_keys: DuplicateKeys,
        slabs: Slabs,
        in_use: u64,
        entries_bound: u64,
    ) -> Self {
        Self {
            shape,
            device: device.clone(),
            bucket_count: hash.layout().buckets,
            hash,
            duplicate_keys,
            slabs: RwLock::new(slabs),
            possibly_in_use: InUseBound::new(in_use),
            may_hold_tombstones: AtomicBool::new(in_use > 0),
            entries_bound: AtomicU64::new(entries_bound),
        }
    }

    /// Head slabs, the reserved-key buckets included.
    pub(crate) fn all_buckets(&self) -> u32 {
        self.bucket_count + GH_RESERVED_BUCKETS
    }

    /// Calls `launch` with the table as a kernel parameter, keeping the stream ordering of
    /// the table's memory until it has queued its kernel. Warps that find no free slab
    /// raise `exhaustion`, or, when none is given, the table's `lost` flag.
    pub(crate) fn with_table<R>(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        exhaustion: Option<&mut Exhaustion>,
        launch: impl FnOnce(GhSlabTable) -> gpuhash_core::Result<R>,
    ) -> gpuhash_core::Result<R> {
        let exhausted = match exhaustion {
            Some(own) => own.address(stream),
            None => slabs.lost.shared_address(stream),
        };
        let context = slabs.alloc.context(stream, exhausted);
        let heads = slabs.heads.address(stream);
        launch(GhSlabTable {
            buckets: heads.address as *mut u32,
            bucket_count: self.bucket_count,
            kind: self.shape.kind.code(),
            hash: self.hash.layout(),
            alloc: context.params(),
        })
    }

    /// Queues `batch` on `stream` and returns without waiting; every element is answered
    /// into `results` and `status` where given. A batch that may insert first makes sure
    /// the allocator can serve every slab it could need ([`Room::Required`]); a map that
    /// keeps the last copy of each key skips the earlier copies.
    pub(crate) fn queue<K: Key, V: Key>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        results: Option<&mut DeviceBuffer<V>>,
        status: Option<&mut DeviceBuffer<u8>>,
    ) -> Result<()> {
        check_lengths(batch, results.as_deref(), status.as_deref())?;
        let mut scratch = self.run_scratch(stream, batch, status.is_some())?;
        let slabs = self.slabs_for(stream, batch, Room::Required)?;
        let plan = self.plan(batch);
        if self.keeps_last_copies(batch) {
            let mut marked = self.marked_status(stream, batch)?;
            let answers = Answers {
                results,
                status: Some(&mut marked),
                answer_all: false,
                plan,
            };
            return self.launch(&slabs, stream, batch, answers, None, None);
        }
        let answers = Answers {
            results,
            status,
            answer_all: true,
            plan,
        };
        self.launch(&slabs, stream, batch, answers, scratch.as_mut(), None)
    }

    /// Runs `batch` to the end and returns each element's status: when inserts find no
    /// free slab the table makes room and they run again. If it cannot, every other
    /// operation has taken effect and the error names the inserts that did not.
    pub(crate) fn run<K: Key, V: Key>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        mut results: Option<&mut DeviceBuffer<V>>,
    ) -> Result<DeviceBuffer<u8>> {
        check_lengths(batch, results.as_deref(), None)?;
        let mut status = self.marked_status(stream, batch)?;
        let mut scratch = self.run_scratch(stream, batch, true)?;
        let plan = self.plan(batch);
        let mut room = Room::BestEffort;
        loop {
            let slabs = match self.slabs_for(stream, batch, room) {
                Ok(slabs) => slabs,
                Err(SlabHashError::Alloc(cause)) if room == Room::Retry => {
                    let not_inserted = pending(stream, &status)?;
                    return Err(SlabHashError::NotInserted {
                        not_inserted,
                        cause,
                    });
                }
                Err(other) => return Err(other),
            };
            let mut exhaustion = Exhaustion::new(stream)?;
            let answers = Answers {
                results: results.as_deref_mut(),
                status: Some(&mut status),
                answer_all: false,
                plan,
            };
            let exhausted = Some(&mut exhaustion);
            self.launch(&slabs, stream, batch, answers, scratch.as_mut(), exhausted)?;
            drop(slabs);
            if !exhaustion.happened(stream)? {
                return Ok(status);
            }
            room = Room::Retry;
        }
    }

    /// Runs a batch of host slices to the end ([`SlabTable::run`]) on a stream lent by the
    /// device, so that calls from several host threads overlap; returns each element's
    /// status and, when `results` is set, its result.
    pub(crate) fn run_host<K: Key, V: Key>(
        &self,
        ops: Option<&[OpCode]>,
        uniform_op: u32,
        keys: &[K],
        values: Option<&[V]>,
        results: bool,
    ) -> Result<(Vec<u8>, Vec<V>)> {
        let stream = self.device.lend_stream()?;
        let keys = upload(&stream, keys)?;
        let values = values.map(|v| upload(&stream, v)).transpose()?;
        let max_inserts = match ops {
            Some(ops) => ops.iter().filter(|&&op| op == OpCode::INSERT).count(),
            None if may_insert(uniform_op) => keys.len(),
            None => 0,
        };
        let ops = ops
            .map(|o| DeviceBuffer::from_host(&stream, o))
            .transpose()?;
        let batch = Batch {
            ops: ops.as_ref(),
            uniform_op,
            keys: &keys,
            values: values.as_ref(),
            max_inserts,
        };
        let mut found = results
            .then(|| DeviceBuffer::zeroed(&stream, keys.len()))
            .transpose()?;
        let status = self.run(&stream, &batch, found.as_mut())?;
        let status = downloaded(&stream, &status)?;
        let found = found.map(|f| downloaded(&stream, &f)).transpose()?;
        Ok((status, found.unwrap_or_default()))
    }

    /// The slabs held for reading, with room for every slab `batch` may link.
    fn slabs_for<K: Key, V: Key>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        room: Room,
    ) -> Result<parking_lot::RwLockReadGuard<'_, Slabs>> {
        if batch.max_inserts == 0 {
            return Ok(self.slabs.read());
        }
        let needed = self.slabs_needed(batch.max_inserts);
        Ok(self.with_room(stream, needed, room)?)
    }

    /// How the passes of `batch` read the lists, counting the batch into the entries
    /// bound. While the table, with every insert of the batch, would hold at most
    /// [`SHORT_LISTS_FILL`] entries a bucket for each spot in a slab's first half (lists
    /// of about one slab): a map's or set's operations go thread by thread to their key's
    /// home quarter (`GH_SLAB_READ_THREADS`; most end there), except inserts into a
    /// table whose head slabs span at least [`MANY_HEADS_L2_MULTIPLE`] times the L2
    /// cache, which tiles serve reading home quarters first (`GH_SLAB_READ_HOME`); a
    /// multimap's inserts into such a table read slabs by halves (`GH_SLAB_READ_HALF`: a
    /// multimap's list fills from its first spot). Otherwise tiles read whole slabs.
    /// Measured: slab_tile.cuh. A multimap's inserts walk as far as
    /// [`crate::policy::walk_slabs`] says for that bound.
    fn plan<K, V>(&self, batch: &Batch<'_, K, V>) -> Plan {
        let added = batch.max_inserts as u64;
        let before = self
            .entries_bound
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                Some(b.saturating_add(added))
            })
            .unwrap_or(u64::MAX);
        let after = before.saturating_add(added);
        let buckets = u64::from(self.bucket_count);
        let heads_bytes = buckets * u64::from(GH_SLAB_WORDS) * 4;
        let l2 = self.device.properties().l2_cache_bytes as u64;
        let (num, den) = SHORT_LISTS_FILL;
        let short_lists = u128::from(after) * u128::from(den)
            <= u128::from(buckets * self.shape.in_first_half()) * u128::from(num);
        let tiled_inserts = added > 0 && heads_bytes >= MANY_HEADS_L2_MULTIPLE * l2;
        let reads = match (short_lists, self.shape.kind, tiled_inserts) {
            (false, _, _) | (true, Kind::MultiMap, false) => GH_SLAB_READ_WHOLE,
            (true, Kind::MultiMap, true) => GH_SLAB_READ_HALF,
            (true, _, true) => GH_SLAB_READ_HOME,
            (true, _, false) => GH_SLAB_READ_THREADS,
        };
        let walk_slabs = if self.groups_runs(batch) {
            self.walk_slabs(after)
        } else {
            0
        };
        Plan { reads, walk_slabs }
    }

    fn keeps_last_copies<K, V>(&self, batch: &Batch<'_, K, V>) -> bool {
        self.duplicate_keys == DuplicateKeys::LastCopy
            && self.shape.kind == Kind::Map
            && batch.ops.is_none()
            && batch.uniform_op == GH_OP_INSERT
    }

    /// A status byte an element for a pass that serves PENDING elements only: PENDING,
    /// but DONE for the earlier copies of a key in a map that keeps last copies.
    fn marked_status<K: Key, V: Key>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
    ) -> Result<DeviceBuffer<u8>> {
        let n = batch.keys.len();
        let mut status = DeviceBuffer::<u8>::unfilled(stream, n)?;
        let repeated = if self.keeps_last_copies(batch) {
            let mut repeated = DeviceBuffer::<u8>::unfilled(stream, n)?;
            last_copy::mark_repeated(stream, batch.keys, &mut repeated)?;
            Some(repeated)
        } else {
            None
        };
        launch::mark_pending(stream, repeated.as_ref(), &mut status)?;
        Ok(status)
    }

    /// Queues one pass of `batch` over the slabs the caller holds: a multimap's inserts,
    /// with their `scratch`, as a tiled pass and grouped appends (`runs.rs`).
    fn launch<K: Key, V: Key>(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        answers: Answers<'_, V>,
        scratch: Option<&mut RunScratch>,
        exhaustion: Option<&mut Exhaustion>,
    ) -> Result<()> {
        if batch.may_remove() {
            self.may_hold_tombstones.store(true, Ordering::Release);
        }
        Ok(self.with_table(slabs, stream, exhaustion, |table| {
            let mut buffers = OpsBuffers {
                ops: batch.ops,
                uniform_op: batch.uniform_op,
                keys: batch.keys,
                values: batch.values,
                results: answers.results,
                status: answers.status,
                answer_all: answers.answer_all,
                reads: answers.plan.reads,
            };
            match scratch {
                Some(scratch) => {
                    let (status, runs) = scratch.parts(answers.plan.walk_slabs, buffers.status);
                    buffers.status = status;
                    launch::multimap_inserts(stream, self.shape, table, buffers, runs)
                }
                None => launch::ops(stream, self.shape, table, buffers),
            }
        })?)
    }
}

/// Entries a bucket, over the spots of a slab's first half, up to which lists count as
/// short in [`SlabTable::plan`] (5/4: a table of 2^26 u32 pairs at memory utilization 0.5
/// holds 8.07 entries a bucket over 8 spots; docs/benchmarks/slab-hash.md).
const SHORT_LISTS_FILL: (u64, u64) = (5, 4);

/// Head slabs must span this many times the L2 cache for inserts to go to tiles reading
/// a part of each slab first, rather than thread by thread.
const MANY_HEADS_L2_MULTIPLE: u64 = 4;

/// Whether a uniform batch of `op` may store new keys (and so needs room for them).
fn may_insert(op: u32) -> bool {
    matches!(
        op,
        GH_OP_INSERT
            | GH_OP_UPSERT_ADD
            | GH_OP_UPSERT_MIN
            | GH_OP_UPSERT_MAX
            | GH_OP_INSERT_OR_FIND
    )
}

/// Indices of the elements still PENDING; waits for the stream.
fn pending(stream: &Stream, status: &DeviceBuffer<u8>) -> Result<Vec<usize>> {
    let codes = status.to_host(stream)?;
    Ok((0..codes.len())
        .filter(|&i| u32::from(codes[i]) == GH_STATUS_PENDING)
        .collect())
}

fn check_lengths<K: Key, V: Key>(
    batch: &Batch<'_, K, V>,
    results: Option<&DeviceBuffer<V>>,
    status: Option<&DeviceBuffer<u8>>,
) -> Result<()> {
    let n = batch.keys.len();
    let others = [
        ("keys and operations", batch.ops.map(DeviceBuffer::len)),
        ("keys and values", batch.values.map(DeviceBuffer::len)),
        ("keys and results", results.map(DeviceBuffer::len)),
        ("keys and answers", status.map(DeviceBuffer::len)),
    ];
    for (what, len) in others {
        if let Some(len) = len
            && len != n
        {
            return Err(gpuhash_core::Error::LengthMismatch {
                what,
                left: n,
                right: len,
            }
            .into());
        }
    }
    Ok(())
}
