//! # gpuhash-cuckoo
//!
//! DyHash, the dynamic GPU cuckoo hash table of the DyHash paper ("Dynamic Hash Tables on GPUs",
//! also known as DyCuckoo): a map from `u32` or `u64` keys to values of 4 to 64 bytes that
//! keeps its fill factor within `[alpha, beta]` by resizing one subtable at a time. A `u32`
//! key and a 4-byte value share one 8-byte slot word (packed buckets, so a hit reads one
//! half line); other pairs keep keys and values apart ([`BucketLayout`]).
//!
//! [`CuckooTable`] speaks the table contract of [`gpuhash_core::table`]: its batches are
//! the [`Map`] verbs (device forms on a caller's stream, host forms on top), `len`,
//! `memory` and `clear` come from [`Table`], and [`Image`] moves a table between device
//! memory and host memory or a file without rehashing. [`ProbeInPlace`] looks keys up in
//! an image left in mapped host memory, read in place, and answers a batch spread over
//! many tables in one launch: ranges of it, one a table (`get_each`, `get_in_place_each`),
//! or each key naming its table, on the device or imaged on the host (`get_routed`: the
//! swap table's children). What is DyHash's own is its resize
//! policy: [`CuckooOptions`] (built by setters, `CuckooOptions::with_capacity(n).alpha(..)`),
//! [`CuckooTable::capacity`], [`CuckooTable::fill_factor`], [`CuckooTable::shrink_to`]
//! and their kin.
//!
//! Keys are the contract's [`Key`] types, `u32` and `u64`, and nothing more: what the table
//! needs of a key type (slots of a bucket, the kernels of its width, the all-ones word)
//! follows from [`Key::WORDS`] inside the crate, so code generic over `K: Key` makes a
//! `CuckooTable<K, V>` without naming a trait of this crate. Values are any contract
//! [`Value`] of 4 to 64 bytes in whole 4-byte words; another width does not compile
//! (`CuckooTable::<u32, u16>::new` fails when it is instantiated).
//!
//! A kernel of the caller's own can probe the table too, fused with its other work (a
//! join that filters and sums in one pass): [`CuckooTable::device_view`] lends the table's
//! device view, a plain `#[repr(C)]` [`view::GhCuckooView`], and [`view`] ships the
//! headers whose `gh_cuckoo_find_u32` / `_u64` find a key from one thread, with an NVRTC
//! compile against them ([`view::HEADERS`]).
//!
//! [`Map`]: gpuhash_core::table::Map
//! [`Table`]: gpuhash_core::table::Table
//! [`Image`]: gpuhash_core::image::Image
//! [`ProbeInPlace`]: gpuhash_core::image::ProbeInPlace
//! [`Key`]: gpuhash_core::table::Key
//! [`Key::WORDS`]: gpuhash_core::table::Key::WORDS
//! [`Value`]: gpuhash_core::table::Value
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::image::Image;
//! use gpuhash_core::table::{Map, Table};
//! use gpuhash_core::{Device, DeviceBuffer};
//! use gpuhash_cuckoo::{CuckooOptions, CuckooTable};
//!
//! # fn main() -> gpuhash_cuckoo::Result<()> {
//! let device = Device::default()?;
//! let options = CuckooOptions::with_capacity(1 << 20).alpha(0.3);
//! let table = CuckooTable::<u32, [u32; 4]>::new(&device, options)?;
//! // Host slices ...
//! let keys: Vec<u32> = (0..1000).chain([u32::MAX]).collect(); // every key is usable
//! let values: Vec<[u32; 4]> = keys.iter().map(|&k| [k; 4]).collect();
//! table.insert(&keys, &values)?;
//! assert_eq!(table.get(&[7, 5000])?, vec![Some([7; 4]), None]);
//! assert_eq!(table.remove(&[3, 5000])?, vec![true, false]);
//! assert_eq!(table.len()?, 1000);
//! assert!(table.fill_factor()? <= 0.9);
//! // ... or device buffers on a stream of the caller's.
//! let stream = device.new_stream()?;
//! let queries = DeviceBuffer::from_host(&stream, &[1u32, 2, 3])?;
//! let mut found = DeviceBuffer::<u8>::zeroed(&stream, 3)?;
//! let mut out = DeviceBuffer::<[u32; 4]>::zeroed(&stream, 3)?;
//! table.get_async(&stream, &queries, &mut found, &mut out)?; // returns without waiting
//! assert_eq!(found.to_host(&stream)?, vec![1, 1, 0]);
//! // The table as bytes, and back.
//! let mut bytes = Vec::new();
//! table.save(&mut bytes)?;
//! let copy = CuckooTable::<u32, [u32; 4]>::load(&device, &mut bytes.as_slice())?;
//! assert_eq!(copy.get(&[u32::MAX])?, vec![Some([u32::MAX; 4])]);
//! # Ok(()) }
//! ```
//!
//! The resize policy runs anywhere:
//!
//! ```
//! use gpuhash_cuckoo::policy::{next_resize, Bounds, Resize};
//! let bounds = Bounds {
//!     alpha: 0.4, beta: 0.9, slots: 32, min_buckets: 1, min_slots: 0, rehash_all: false,
//! };
//! // Three subtables of 4 buckets hold 384 slots; 350 pairs pass beta.
//! assert_eq!(next_resize(&[4, 4, 4], 350, &bounds), Some(Resize::Up(0)));
//! ```
//!
//! ## Options
//!
//! Set through [`CuckooOptions`]: `with_capacity(n)` (a floor the table never shrinks below),
//! `subtables` (d, 3 by default), the fill band `alpha` and `beta`, `min_buckets`,
//! `max_evictions`, `rehash_all`, `seed`, `duplicate_keys` and `layout` (the bucket layout,
//! below: [`BucketLayout::Auto`] by default, [`BucketLayout::Split`] to force keys and
//! values apart).
//!
//! ## Structure
//!
//! - **d subtables** (2 to 8, default 3), each an array of buckets; a bucket is one 128-byte
//!   line of *slot words*, laid out one of two ways ([`BucketLayout`]), chosen by the pair's
//!   width without the user asking. **Packed** (a `u32` key and a 4-byte value, so
//!   `CuckooTable<u32, u32>`, `<u32, f32>`, `<u32, [u32; 1]>` ...): a slot is one 8-byte
//!   word, the key in its low half and the value in its high half, 16 a bucket, so a hit
//!   reads its value in the same 64-byte half line as its key (one random read where split
//!   buckets take two dependent ones), and a pair is claimed, replaced, moved and emptied as
//!   one word. **Split** (every other pair; `u64` keys with 4-byte values need 12 bytes, so
//!   they stay split): a slot is a key, 32 `u32` or 16 `u64` keys a bucket, and values live
//!   in an array apart (struct of arrays), so a miss reads keys only and values may be up
//!   to 64 bytes. Either way a probe is one line, find and remove read at most d buckets,
//!   and a miss often one half of one (below). Both use the same bytes a slot for `u32`
//!   pairs (8), so packing saves reads, not memory; `memory()` counts what each allocates.
//! - **Hashing**: subtable i sends key k to bucket `H_i(k) mod |h_i|`, with
//!   `H_i(k) = (a_i * mix(k) + b_i) mod p` (universal, after the fmix bijection so that
//!   keys equal in many bits still spread). `H_i` does not depend on the size, so doubling
//!   a subtable sends bucket `loc` to `loc` or `loc + |h_i|` and halving merges them back.
//! - **Tiles and home halves**: the paper's warp becomes a *tile* of `GH_CUCKOO_TILE` = 2
//!   lanes that read one 128-byte bucket together (64 bytes a lane), so a warp serves 16
//!   buckets at once (on an H100, tiles of 4 gave the same inserts and slower finds at high
//!   load, tiles of 8 were slower at everything). Each key also has a *home slot*, fixed
//!   by a hash of the key, and so a *home half*: the 64 bytes of a bucket that hold it,
//!   which is what one random DRAM read fetches on an H100 however little of it is used.
//!   Every insert tries a bucket's slots in the key's order (its home quarter, the 32
//!   bytes that hold the home slot, from the home slot round; the other quarter of its
//!   home half; then the other half), so keys rest in their home half while it has room,
//!   and copies of a key agree on a slot whichever of those parts they read;
//!   find starts with each lane alone reading the home half of its own key's first bucket
//!   (a warp then has 32 lookups in flight, not 16) and hands the keys not found there to
//!   its tile, which reads whole lines; in the first insert pass each lane places its own
//!   pair alone throughout (home quarter or home half, other half, then whole lines). A
//!   resize fills each new bucket's halves the way inserts would: each key in its home half
//!   while that has room, the rest in the other half.
//! - **Batches sorted by partition.** An insert batch larger than the lock-free pass
//!   below holds in flight (about 2M pairs on an H100), into a table whose lines outgrow
//!   twice the L2 cache (a packed pair touches one line; a split pair two, its key's and
//!   its value's), is first sorted (a counting sort on the GPU, three launches) by the
//!   range of buckets its pairs start in: each subtable's buckets cut into 64 ranges of
//!   equal size. Blocks then take the sorted pairs in order from a shared cursor, so the
//!   pairs in flight at any time fall into one or two ranges, whose lines stay in L2 while
//!   their pairs go in: packed builds of 2^24 to 2^26 pairs run 1.1 to 1.4 times as fast,
//!   split ones 1.4 to 1.6 (docs/benchmarks). The sorted copy (one key and one value a
//!   pair) is kept for the next batch of that size. A smaller batch is in flight whole
//!   whatever its order, and a table near the L2's size is read from it in any order, so
//!   neither is sorted. The pairs that go in while the table is at most 0.6 full read the
//!   32-byte quarter of their first bucket that holds their first slot before the rest
//!   (one sector instead of two).
//! - **Inserts in two passes.** First, lock-free: a new pair takes an empty slot of the
//!   first of its d buckets (in lookup order) that has one, claimed by a CAS on the slot
//!   word (the key when split, the whole 64-bit pair when packed, expecting the empty
//!   all-ones word; a CAS that finds an equal key marks a duplicate). Nothing is evicted
//!   in this pass, so a slot only goes from empty to full and a full bucket stays full;
//!   equal keys of the batch try a bucket's slots in the same key-fixed order, so the
//!   second sees the first or loses the CAS to it, and no reader can see a key before its
//!   value (packed: key and value arrive in one word). Then the pairs whose d buckets were
//!   all full go in by the paper's voter coordination: a tile votes a leader among its lanes with pending
//!   pairs; the leader locks its bucket with one atomic; the tile replaces an equal key's
//!   value, fills an empty slot, or swaps the pair with a resident, which moves on to the
//!   next subtable of its probe order: each lane of the tile offers one resident at random
//!   and reads the bucket it would move to, and one with room there is taken where there is
//!   one (fewer swaps: a quarter fewer at load 0.8, 40% fewer at 0.95). When the lock is taken the tile re-votes
//!   instead of spinning. A pair still homeless after `max_evictions` swaps is set aside on
//!   the device (compacted list); the table upsizes and retries it, so nothing is lost.
//! - **Probe order and early exit.** A key's probe order is the subtable a new pair with
//!   that key would start in now, then the next ones round by index; inserts, evictions
//!   and lookups all follow it, and a bucket's slots are filled home half first. So while
//!   no pair has left a bucket, an empty slot in it proves that no key went past it, and a
//!   lookup stops there: a miss at load 0.5 mostly reads one home half, not d lines. Two
//!   things keep that sound. A bucket some key may have gone past that then lost a pair
//!   (a remove, a resize from a full or dirty bucket, a residual that skipped the subtable
//!   being halved) is marked *dirty* (one bit a bucket, beside the locks), and lookups go
//!   past it. And since the start subtable follows the paper's weights, which change from
//!   batch to batch, the table keeps for each subtable the choices it took under every
//!   weighting an insert used since it was last emptied ([`policy::ChoiceRange`]); lookups
//!   of other keys read all d buckets. Dirty bits clear when the table is emptied or
//!   rehashed whole. So the gain is whole for a table built at its size and smaller for
//!   one with many removes or grown by upsizes: a subtable doubled from full buckets is
//!   dirty wherever it has room, and each resize moves the weights, which narrows the
//!   settled choices.
//! - **Resizing** (host policy in [`policy`], pure and CPU-tested): above `beta` the
//!   smallest subtable doubles (conflict-free split), below `alpha` the largest halves and
//!   the pairs that do not fit (residuals) go into the other subtables; no subtable is ever
//!   more than twice another. New pairs start in subtable i with probability proportional
//!   to `n_i / C(m_i, 2)`. [`CuckooOptions::rehash_all()`] switches to the baseline the paper
//!   compares against: double or halve everything and rehash every pair.
//! - **Capacity floor**: no downsize takes the table below the slots it was created with
//!   ([`CuckooOptions::initial_capacity()`] or `initial_buckets`), as a `Vec` keeps its
//!   capacity: a table made for 2^28 pairs that first holds 100K stays at its size, and the
//!   next large batch pays no upsize. The floor counts slots of the whole table, since a
//!   downsize halves one subtable at a time; below alpha, the table halves while the result
//!   keeps the floor. [`CuckooTable::shrink_to`] lowers the floor to what a number of pairs
//!   fill to beta, [`CuckooTable::shrink_to_fit`] drops it; both then shrink as the fill
//!   bounds allow.
//! - **Every key is usable**: the all-ones key marks empty slots on the device, so its
//!   pair lives in a side slot of its own.
//!
//! ## What an insert batch does
//!
//! 0. With [`DuplicateKeys::LastCopy`], the batch is first reduced on the device to the
//!    last copy of each key, in input order ([`gpuhash_core::last_copy`]); the steps below
//!    then meet no equal keys. Running out of memory for that leaves the table as it was.
//! 1. A large batch is sorted by partition into the sorted copy; every later step works on
//!    it. If the table holds pairs: a lookup of every key (which are held already, and their
//!    values, kept for undoing the batch). Nothing changes yet.
//! 2. Upsizes until the held pairs plus the new keys fit below `beta` (the count of keys
//!    held already is read back only when the batch would not fit were every key new).
//!    Running out of memory here, or for the batch's scratch space or sorted copy, leaves
//!    the table as it was.
//! 3. Held keys get their new value under their bucket's lock (of equal keys in the batch,
//!    one whole value wins, unspecified which: [`DuplicateKeys::AnyCopy`]). New keys go in
//!    lock-free where a bucket has room; the rest by voter coordination. A new pair starts
//!    in a subtable chosen by a hash of its key and the paper's weights, so equal keys of
//!    one batch meet in one bucket: in the lock-free pass the later copies are set aside as
//!    duplicates, in the locked pass the second finds the first and replaces its value.
//! 4. The one way a key of the batch can end up twice: its first copy was swapped out of
//!    its bucket before the second arrived. Every swapped-out key is logged on the device,
//!    and a cleanup kernel keeps only the copy in the lowest subtable of each. Then the
//!    duplicates set aside in step 3 write their values, under bucket locks (one whole
//!    value wins).
//! 5. Pairs homeless after the eviction bound: the smallest subtable doubles and they are
//!    retried. If that upsize runs out of memory, the batch is undone (new keys removed,
//!    old values and homeless old pairs put back, into empty slots first and then with
//!    swaps, retried without growing) and the call returns
//!    [`gpuhash_core::Error::OutOfDeviceMemory`].
//! 6. The fill factor is brought within `[alpha, beta]`.
//!
//! DyHash decides its resizes on the host, from counts it reads back, so `insert_async`
//! waits for its stream a few times and returns with the batch done; its docs list each
//! wait. Lookups (`get_async`, `contains_async`) and removes (`remove_async`) queue their
//! kernels and return at once: the remove kernel keeps the pair counts on the device, and
//! the table reads them, and makes the downsizes they call for, when it next needs its
//! count (the next insert, `len`, `memory`, `export`, `fill_factor`, ...).
//!
//! ## Equal keys in one batch
//!
//! A key held more than once in one insert batch ends with one whole value of its copies,
//! never a mix. Which one, [`CuckooOptions::duplicate_keys()`] says: by default
//! ([`DuplicateKeys::AnyCopy`]) it is not specified and varies from run to run, since the
//! copies race on the device; with [`DuplicateKeys::LastCopy`] it is the last copy's, as
//! inserting the pairs one by one would leave it, at the cost of reducing the batch first
//! (measured beside the default in `gpuhash-bench cuckoo`, W1).
//!
//! ## Combining
//!
//! A table of `u32` or `u64` values is a [`CombiningMap`]: `upsert` adds (wrapping),
//! mins or maxes each value into the one its key holds (or stores it for a new key), and
//! `insert_or_find` keeps what a key holds and stores a candidate for a new one, giving
//! every copy of a key the value it holds afterwards. Other value widths have no
//! `CombiningMap` impl, so calling these on them does not compile.
//!
//! How: both are writing batches (below), run as one insert whose values are worked out
//! first. The batch is reduced on the device to one entry per key
//! ([`gpuhash_core::last_copy::reduce`]: a scratch open-addressing table over the batch's
//! keys whose slots accumulate each key's value by `atomicAdd`/`atomicMax` at the value's
//! width; for `insert_or_find`, the first copy's candidate); the distinct keys are looked
//! up; a kernel folds each held value into its key's reduced value (or keeps the held
//! value); and the results go in as an ordinary insert of distinct keys (step 1 above
//! onward). For `insert_or_find`, each distinct key's final value is then written to every
//! copy of the batch through the scratch table.
//!
//! Exactness: every value of a batch is combined into its key's value exactly once, and
//! of equal new keys in an `insert_or_find` batch the first copy's candidate is stored.
//! The read, fold and insert are exact because writing batches run one at a time
//! (whatever host threads and streams they come from), so nothing changes a key between
//! its lookup and its insert; running out of memory leaves the table as it was, as for an
//! insert.
//!
//! Cost: an insert of the batch's distinct keys, plus the reduction (two passes over the
//! batch, the compaction's three launches, and one wait to count the distinct keys), a
//! lookup of the distinct keys and the fold; scratch space of 2 to 4 slots a pair (a key,
//! a 4-byte index and a value each) and one value a pair while the batch runs. A batch of many copies of few
//! keys (counting skewed keys) inserts only the few. Measured beside the slab hash's in
//! `gpuhash-bench upsert`.
//!
//! [`CombiningMap`]: gpuhash_core::table::CombiningMap
//!
//! ## Code layout
//!
//! The device code in `cuda-src/cuckoo/` is split as cuCollections splits a container
//! from its device views: headers of building blocks that other crates may include, each
//! building on the one before, and kernel files by phase that hold `extern "C"` kernels
//! only, each compiled to its own fat binary.
//!
//! - `bucket.cuh`: key traits, the subtable hash, the bucket layouts (`Split<K>` and
//!   `Packed32`, each naming its key type, slot word, slots, empty word and how a word
//!   holds a key and value, so that every step below is written once for both), tiles and
//!   the loads of a bucket;
//!   `state.cuh`: dirty bits, bucket locks, the side slot, block counts; `probe.cuh`: a
//!   key's first subtable, the subtables after it and its slot order in a bucket.
//! - `locate.cuh` (find a key: home half, then the rest), `update.cuh`, `place.cuh` (the
//!   lock-free pass), `evict.cuh` (voter-coordinated inserts with evictions),
//!   `partition.cuh` (the sort by partition), `remove.cuh`, `resize.cuh`, `export.cuh`.
//! - Kernels: `lookup.cu` (find, export), `insert.cu` (update, place, insert),
//!   `partition.cu`, `remove.cu`, `subtable.cu` (resize, fill); suffixes `_u32` and `_u64`
//!   for split buckets, `_p32` for packed ones (the partition kernels read keys only and
//!   serve both).
//!
//! On the host, `layout` resolves [`BucketLayout`] and sizes a subtable's arrays by it (the
//! image records it: images made before the packed layout load as split tables); `launch`
//! holds every kernel launch (one parameter struct a kernel, the
//! only unsafe code of the crate); `table` and its submodules hold the table's state and
//! the order of its batches, one phase a file; `policy` the pure host-side resize policy.
//!
//! ## Concurrency
//!
//! Batch calls take `&self`; the table is `Send + Sync`. Reading batches run concurrently
//! from any number of threads. Writing batches run one at a time and exclude readers (a
//! reader could otherwise miss a pair that an insert is moving). A lock on the host orders
//! the calls, and since device forms return before their kernels run and each comes on
//! its caller's stream, events carry that order to the device: each batch records an
//! event on its stream after its work, a writer's stream waits for the last writer's and
//! every later reader's, a reader's for the last writer's. So a reader's kernel never
//! runs beside a writer's, whichever streams they came on, and readers still overlap.
//! Each subtable has a lock of its own, and a resize takes the write lock of the one
//! subtable it rebuilds only; on the device, an upsize touches that subtable alone, and a
//! downsize that subtable plus bucket-locked inserts of its residuals into the others.
//!
//! ## Features
#![doc = document_features::document_features!()]
#![deny(unsafe_code)]

mod error;
mod key;
#[allow(
    unsafe_code,
    reason = "the kernel launches: raw device pointers handed to the GPU"
)]
mod launch;
mod layout;
#[allow(
    dead_code,
    unsafe_code,
    reason = "generated from the C header whole: some constants serve the kernels only, \
              and bindgen's Default impls zero the structs"
)]
mod layouts;
mod options;
pub mod policy;
mod table;
pub mod view;

pub use error::{CuckooError, Result};
pub use layout::BucketLayout;
pub use options::{CuckooOptions, DuplicateKeys};
pub use table::{CuckooTable, DeviceView, IMAGE_LAYOUT_VERSION, ResizeStats};
