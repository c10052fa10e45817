//! # gpuhash-slab-hash
//!
//! The slab hash of the SlabHash paper (Ashkiani, Farach-Colton, Owens, *A Dynamic Hash Table for the
//! GPU*, IPDPS 2018): a dynamic, fully concurrent hash table with chaining, whose buckets
//! are the slab lists of [`gpuhash_slab_list`] (chains of 128-byte slabs from
//! [`gpuhash_slab_alloc`]; their device building blocks, `cuda-src/slab_list/slab_list.cuh`,
//! read, walk, extend and free the chains). Its three tables speak the table
//! contract of [`gpuhash_core::table`]: [`SlabHashMap`] is a [`Map`], [`SlabHashSet`] a
//! [`Set`], [`SlabHashMultiMap`] a [`MultiMap`], all three a [`Table`] and an [`Image`].
//! A kernel of the caller's own can probe a map too, fused with its other work:
//! [`SlabHashMap::device_view`] lends the map's device view, a plain `#[repr(C)]`
//! [`view::GhSlabView`], and [`view`] ships the headers whose `gh_slab_find_u32` / `_u64`
//! find a key from one thread, with an NVRTC compile against them ([`view::HEADERS`]).
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::table::{Map, Table};
//! use gpuhash_core::{Device, DeviceBuffer};
//! use gpuhash_slab_hash::{SlabHashMap, SlabHashOptions};
//!
//! # fn main() -> gpuhash_slab_hash::Result<()> {
//! let device = Device::default()?;
//! let map = SlabHashMap::<u32, u32>::new(&device, SlabHashOptions::with_capacity(1 << 20).load(0.5))?;
//! let keys: Vec<u32> = (0..1000).chain([u32::MAX]).collect();
//! let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
//! map.insert(&keys, &values)?;
//! assert_eq!(map.get(&[7, u32::MAX, 5000])?, vec![Some(21), Some(u32::MAX.wrapping_mul(3)), None]);
//! map.remove(&keys[..10])?;
//! assert_eq!(map.len()?, keys.len() - 10);
//!
//! // The same on device buffers, queued on a stream of the caller's.
//! let stream = device.new_stream()?;
//! let queries = DeviceBuffer::from_host(&stream, &[7u32, 5000])?;
//! let mut found = DeviceBuffer::zeroed(&stream, 2)?;
//! let mut answers = DeviceBuffer::zeroed(&stream, 2)?;
//! map.get_async(&stream, &queries, &mut found, &mut answers)?;
//! assert_eq!(found.to_host(&stream)?, vec![1, 0]);
//! # Ok(()) }
//! ```
//!
//! ## Options
//!
//! Set through [`SlabHashOptions`], by setters: `with_capacity(n)` or `expected_entries`,
//! `load` (slabs a bucket is sized for) or `buckets`, the allocator `variant`, `seed`, and
//! `duplicate_keys` (which copy of a key repeated in a batch stays).
//!
//! ## Structure
//!
//! - `table.rs`: the engine the three tables share: bucket heads and the allocator behind
//!   one lock, batches queued on the caller's stream (`queue`) or run to the end with
//!   retries (`run`). `room.rs`: room for inserts (reserved through
//!   [`gpuhash_slab_list::room`]), compaction, flush, clear. `scan.rs`: counting, export
//!   (live pairs per chunk of 32 buckets, scanned on the device by
//!   [`gpuhash_core::scan`], then written from each chunk's offset, into new buffers or the
//!   caller's), memory, the multimap's gather. `image.rs`: table images.
//! - `map.rs`, `set.rs`, `multimap.rs`: the contract's verbs on the engine;
//!   `contract.rs`: what the three share (construction, `flush`, [`Table`], [`Image`]).
//! - `runs.rs`: a multimap's inserts as a tiled pass and grouped appends (below).
//! - `launch.rs`: the only place raw device pointers go to the kernels of
//!   `cuda-src/slab_hash/`; `layouts.rs`: their parameter structs, made by bindgen.
//! - [`sizing`]: how many slabs a table needs, and [`policy`]: how far a multimap's tiled
//!   inserts walk (host functions, tested on the CPU).
//!
//! A table is an array of bucket heads, each the first slab of a list. A key-value slab
//! holds 15 pairs (key in an even lane, value in the next lane), a key-only slab 30 keys;
//! lane 31 holds the next slab's 32-bit address. Operations are served by
//! **warp-cooperative work sharing** (`cuda-src/slab_hash/slab_warp.cuh`): every thread
//! owns one operation, the warp takes them one at a time, and all 32 lanes read each slab
//! together, ballots finding the key or a free spot. Inserts claim a spot with one
//! compare-and-swap (64 bits for a pair); a full list grows by a slab from the warp
//! allocator; removals leave tombstones, compacted away when memory runs short (below).
//!
//! Batches of one kind only take a faster road. Lookup-only batches (`get`, `contains`) and
//! insert-only batches (`insert`) are served by **tiles** of 4 lanes
//! (`cuda-src/slab_hash/slab_tile.cuh`): a tile reads a whole slab with 16-byte loads, so a
//! warp has 8 slabs in flight instead of one, and each tile takes its own lanes' operations
//! in turn. On an H100 this took 2^26-pair builds from 7661 to 10152 M pairs/s and lookups
//! from 12898 to 21210 M/s (docs/benchmarks/slab-hash.md); mixed batches, removals and
//! counts keep the paper's warp-cooperative work sharing.
//!
//! **Home quarters.** A map's or set's key goes first to its home quarter of its head slab
//! (32 bytes, one sector, picked by bits of the key its bucket does not use), and only
//! when that quarter is full to the first empty spot of its list. Spots never become
//! empty again (removals leave tombstones; a flush, which compacts lists, puts the keys of
//! a list left in its head slab back in their home quarters), so a lookup that reads the
//! home quarter and meets an empty spot there but not the key is done. While lists are
//! short, each thread first tries its own operation in its head slab, a quarter a read,
//! and most end there: at memory utilization 0.5 a quarter holds two keys on average. On
//! an H100 at 2^26 pairs this took lookups that hit from 20354 to 23728 M/s and at 2^22
//! from 26771 to 35521. Tiled, warp-cooperative and thread-by-thread passes keep the same
//! invariants, so they follow each other on one table. A multimap's copies of a key fill
//! its list from its first spot, as before.
//!
//! Keys and values are `u32` or `u64` (the contract's [`Key`] types); an entry with a
//! 64-bit part takes 2 or 4 lanes, so a slab holds 7 to 30 entries. Lookups write their
//! found byte straight from the kernel: the status of each element is one byte, and for a
//! lookup or removal it is the answer the contract asks for.
//!
//! ## Many copies of a key
//!
//! A multimap insert has no key to look for, only the first empty spot of its list, and a
//! list grows with the values of its keys: were each insert to walk its list from the head,
//! c copies of one key would cost c^2 / 30 slab reads, and every copy would race the others
//! for the one tail slab. So a multimap's insert batch runs in two parts (`runs.rs`,
//! `cuda-src/slab_hash/slab_runs.cuh`). The tiled pass stores each pair in the first
//! [`policy::walk_slabs`] slabs of its list where they have room (one slab past the mean
//! list of the table's size), and defers the rest; it never extends a list. The **grouped
//! appends** then group the deferred pairs by bucket on the device (a table of buckets
//! counted with one atomic per group of lanes that share one, ranges handed out, indices
//! scattered), and one warp a bucket walks its list once: it fills the empty spots it meets
//! and links chains of up to 32 new slabs at the tail, each chain filled before the one
//! compare-and-swap that links it. A batch then costs at most `walk_slabs` slab reads a
//! pair, one walk a bucket and one slab write for every 15 pairs: linear in the batch
//! however its keys repeat; a batch of short lists defers nothing and pays four near-empty
//! launches and the zeroing of its table of buckets (12 bytes for each of 2 to 4 slots a
//! bucket it can fall in). Every pair still goes in at an empty spot with the same
//! claims, so readers, removals, counts and batches on other streams see the lists as
//! before, and a run that finds no free slab ends as any insert that finds none (below).
//! One bucket's run is one warp's work, so a key of 2^20 copies takes about 2200 chain
//! steps of one warp. A count or `get_all` of a key walks its list once, linear in its
//! values.
//!
//! ## Inserts that do not wait
//!
//! `insert_async` (and [`SlabHashMap::apply_async`]) queue their kernel on the caller's
//! stream and return; the batch finishes on its own, with no host call after it. Before
//! the launch the table makes sure the allocator can serve every slab the batch could
//! link: an insert links at most one new slab and a list that takes k new entries at most
//! ceil(k / entries per slab), so a batch of n links at most
//! ceil(n / entries per slab) + min(n, buckets + 3). The table keeps a host-side upper
//! bound of the slabs in use (the count measured at its last device-wide wait, plus every
//! batch's bound since) and launches at once while that bound stays within 3/4 of the
//! slabs reserved. Only a batch that would pass that share waits: for every kernel on the
//! device, then it measures the real use, compacts the lists if removals left tombstones,
//! and grows the allocator until the bound fits (or returns the growth's error, with
//! nothing queued). A table sized for its batches, refilled after [`Table::clear`] (which
//! resets the bound to zero), never waits.
//!
//! Why 3/4: a warp's allocator gives up after 64 full memory blocks in a row, and with a
//! quarter of the slabs free, at least a quarter of the blocks have room, so a warp gives
//! up only when 64 blocks its hash picks are all among the other three quarters (about
//! 1e-8 per run of full blocks, were the picks random). That is a bound on a probability,
//! not a proof: the picks are a hash. So the kernels keep their safety net. An insert
//! that still finds no slab raises a flag the table owns, and the next call on the table
//! that waits for its stream (`len`, `memory`, `export`, `export_into`, `get_all`, `flush`,
//! `to_image`)
//! returns [`SlabHashError::LostInserts`]: a pair is never lost silently. The host forms
//! (`insert` and `upsert` of a batch of at most one chunk, [`SlabHashMap::apply`]) keep
//! each element's status and run the inserts that found no slab again once the table has
//! made room, or name them in [`SlabHashError::NotInserted`]. A host batch of more than one
//! chunk ([`Table::host_insert_chunk`]) runs in chunks through the device form instead
//! ([`gpuhash_core::table::insert_in_chunks`]): each chunk reserves its room first, and
//! the batch takes effect, or fails and leaves the table as it was, as one.
//!
//! The price is memory: the allocator reserves at least 4/3 of the slabs a batch could
//! link, on top of those in use, which for a large batch is far more than it links. A
//! multimap's insert batch also holds, while it runs, 4 bytes a pair for its grouped
//! appends, a status byte a pair, and 12 bytes for each of 2 to 4 slots a bucket it can
//! fall in (allocated before anything is queued, so a batch refused for them changes
//! nothing). A
//! batch of n pairs of 32-bit keys and values into B buckets needs
//! 4/3 x (n / 15 + min(n, B)) slabs of 128 bytes free: for n = 2^26 and B = 2^26 / 9
//! (load 0.6), about 1.9 GiB (the allocator grows by doubling to at least that), beside
//! 0.9 GiB of head slabs. Smaller batches cost in
//! proportion (about 4/3 x 1.07 n slabs for n well below B); the reserve grows by doubling
//! and is kept through `clear`. A host batch in chunks reserves for one chunk at a time
//! (4M pairs), on top of the slabs the chunks before it linked.
//!
//! ## What readers see
//!
//! No reader, in the same launch or in a batch running at once on another stream, ever
//! sees a key without its own value. A key alone, or a 32-bit key with a 32-bit value, is
//! stored with one compare-and-swap. A wider entry cannot be: its insert claims the spot
//! as *busy* (a third reserved key word), writes the value, and publishes the key after a
//! memory fence. Lookups take a busy spot for one that holds no key (the insert has not
//! happened yet for them); inserts of a map's or set's keys that reach a busy spot wait for
//! it to resolve, since it may hold their own key, so a key is never stored twice. The
//! price is one fence per insert of a wide entry; 32-bit pairs pay nothing.
//!
//! An export counts the pairs of each chunk of buckets, then writes them; a batch on
//! another stream that removes pairs in between leaves a chunk with fewer pairs than its
//! range of the answer. The write pass then raises a flag, read with the lost-insert flag
//! after the pass (no more waits than before), and the export runs again: beside other
//! batches up to 4 times, then alone, the table's lock held for writing after a wait for
//! the device, as compaction runs. So an answer never holds a slot nobody wrote, and the
//! call always ends; a pair inserted meanwhile may or may not be in it. `export_into`
//! does the same in the caller's buffers: the count it returns covers only pairs written
//! by the try that came whole (slots past it may hold pairs of a try that came short).
//!
//! ## Memory under churn
//!
//! A removal leaves a tombstone, and inserts only ever use never-used spots at the end of
//! a list, so a table whose keys come and go fills its slabs with tombstones. When an
//! insert batch needs room and removals have left tombstones since the last compaction,
//! the table compacts every list first (moving live entries to the front and giving
//! emptied slabs back) and grows the allocator only if the batch's bound still does not
//! fit. So memory holds steady under any mix of inserts and removals with no call from the
//! user, and a table that only grows never pays for a compaction. Compaction, growth,
//! [`Table::clear`] and images wait for every batch already queued on the device and hold
//! off new ones while they run; [`SlabHashMap::flush`] runs the same compaction on demand,
//! on a shared table (`&self`).
//!
//! ## Equal keys in one batch
//!
//! Of the pairs of one map insert batch that share a key, one whole value stays, never a
//! mix of two. Which one is not specified by default ([`DuplicateKeys::AnyCopy`]; on an
//! H100 the last copy won for 90 to 95% of such keys); with
//! [`SlabHashOptions::duplicate_keys`] set to [`DuplicateKeys::LastCopy`] it is the last
//! copy's, as inserting the pairs one by one in order would leave it: the earlier copies are
//! found on the device ([`gpuhash_core::last_copy::mark_repeated`]) and skipped.
//!
//! ## Combining
//!
//! [`SlabHashMap`] is a [`CombiningMap`]: `upsert` adds, mins or maxes each value into its
//! key's value (unsigned, `u32` or `u64`, the add wrapping), and `insert_or_find` gives each
//! key its value or stores a candidate. They run in the warp-cooperative kernel, which
//! handles each key as an insert does. A key found has its value combined by one atomic
//! (`atomicAdd`, `atomicMin`, `atomicMax` of the value's width), or read for
//! `insert_or_find`; a key found only once its key is published (a busy spot holds no
//! key, and an upsert waits on it as an insert of a unique key does), so no combine
//! touches a value before it is written. A key not found is claimed at the first empty spot
//! as an insert claims it, with the value (or candidate) as its first value. Two copies of
//! a new key, in one batch or in batches on other streams, race for that claim: one wins,
//! and the loser reads the slab again, finds the winner's key and combines into its value.
//! So every value of a batch is combined exactly once, and of equal new keys exactly one
//! candidate is stored and answered to all. The host forms run again what found no free
//! slab, as `insert` does.
//!
//! ## Images
//!
//! [`Image::to_image`] copies the head slabs and the allocator's memory (its bitmaps and
//! slabs, [`gpuhash_slab_alloc::SlabAlloc::to_sections`]) with the options that give them
//! meaning (the bucket hash, the duplicate rule); [`Image::from_image`] allocates the same
//! sizes and copies them back, with no rehashing. Slab addresses are 32-bit indices into
//! the allocator's arrays, so the bytes hold at any device address; the regular
//! allocator's table of super block pointers is built anew. An image of another kind of
//! table, another width or another layout version ([`IMAGE_LAYOUT_VERSION`]) is refused,
//! and so is a damaged one (the image's checksum); an image crafted to pass the checksum
//! is trusted.
//!
//! Beyond the paper:
//! - **Every key is usable.** The three words slabs reserve (empty, tombstone, busy) are
//!   stored in three extra buckets, so `u32::MAX` is a key like any other.
//! - **Nothing is dropped silently** (above).
//! - **Shared by threads.** Every call takes `&self`; blocking calls run on streams the
//!   device lends, so several host threads use one table at once, flushes included.
//! - **Counting costs no memory.** `len` sums the live entries of every bucket on the
//!   device into one word.
//!
//! ## Features
#![doc = document_features::document_features!()]

mod contract;
mod error;
mod image;
mod launch;
#[allow(
    dead_code,
    reason = "generated from the kernels' header: not every constant is used"
)]
mod layouts;
mod map;
mod multimap;
mod op;
mod options;
pub mod policy;
mod room;
mod runs;
mod scan;
mod set;
mod shape;
pub mod sizing;
mod table;
pub mod view;

pub use error::{Result, SlabHashError};
pub use gpuhash_core::last_copy::DuplicateKeys;
pub use gpuhash_core::table::MemoryUsage;
pub use gpuhash_slab_alloc::Variant;
pub use image::IMAGE_LAYOUT_VERSION;
pub use map::SlabHashMap;
pub use multimap::SlabHashMultiMap;
pub use op::{Op, OpCode, Outcome};
pub use options::SlabHashOptions;
pub use set::SlabHashSet;
pub use view::DeviceView;

#[cfg(doc)]
use gpuhash_core::{
    image::Image,
    table::{CombiningMap, Key, Map, MultiMap, Set, Table},
};
