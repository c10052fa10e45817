//! # gpuhash-hyperspace
//!
//! GHSH hyperspace hashing on the GPU (Ren, Gu, Li, Li, Yu, *GPU-Based Dynamic Hyperspace
//! Hash with Full Concurrency*, Data Science and Engineering 2021; docs/papers.md):
//! tuples `(key, A1..Ap, value)` of `u32` words, `1 <= p <= 8`, found by key or by any
//! conjunction of attribute equalities (`A1 = x and A3 = y`), all matches returned. Keys
//! are unique; attributes and values are any word.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_hyperspace::shape::Field;
//! use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, InsertStatus, Query, TupleBatch};
//!
//! # fn main() -> gpuhash_hyperspace::Result<()> {
//! let device = Device::default()?;
//! // Tuples of 2 attributes: (key, city, salary, value).
//! let index = HyperspaceIndex::new(&device, 2, 1 << 20, HyperspaceOptions::default())?;
//! let batch = TupleBatch {
//!     keys: &[1, 2, 3],
//!     attributes: &[10, 10, 20, /* salaries: */ 5000, 7000, 5000], // column-major
//!     values: &[100, 200, 300],
//! };
//! assert_eq!(index.insert(batch)?, vec![InsertStatus::Inserted; 3]);
//! assert_eq!(index.get(&[2, 9])?[0].as_ref().map(|t| t.value), Some(200));
//! let matches = index.search(&[
//!     Query::attribute(0, 10),                                 // city = 10
//!     Query::attribute(0, 20).and(Field::Attribute(1), 5000), // city = 20 and salary = 5000
//! ])?;
//! assert_eq!(matches.range(0).len(), 2);
//! assert_eq!(matches.of(1)[0].key, 3);
//! // Move tuple 1 to another city: searches running meanwhile see it once or twice.
//! let moved = TupleBatch { keys: &[1], attributes: &[20, 5000], values: &[101] };
//! assert_eq!(index.modify(moved)?, vec![true]);
//! assert_eq!(index.delete(&[2, 9])?, vec![true, false]);
//! assert_eq!(index.len()?, 2);
//! # Ok(()) }
//! ```
//!
//! ## Options
//!
//! Set through [`HyperspaceOptions`], by setters: `subspaces` (each attribute alone, the
//! default; pairs; any groups; or spaces of given shapes, bits included, [`Subspaces`]),
//! `bucket_tuples` (tuples a bucket is sized for, 32 by default) or `space_bits`
//! (coordinate bits of every space; both ignored by given shapes), `search` (grouped or
//! one subtask at a time, [`SearchStrategy`]), `key_spread` (below), the allocators'
//! `variant`, and `seed`. The capacity given to [`HyperspaceIndex::new`] sizes the grids
//! and allocators; an index holds more, with longer chains.
//!
//! Key spread (beyond the paper; on by default, `key_spread(false)` for the paper's
//! layout): a space's coordinate bits come from the capacity ([`HyperspaceOptions::bits_for`]),
//! but an attribute of `d` distinct values fills at most `d` coordinates, so in the paper's
//! layout an attribute of 100 values leaves 100 buckets of `n / 100` tuples each: a search
//! walks one long chain in one warp, and a delete or modify walks it to find the old copy.
//! With the key spread, each attribute of a subspace takes at most `ceil(log2(d))` bits
//! when `d` is known and the key, a last dimension, takes the rest, so those tuples spread
//! over short chains. A search naming attributes only touches every key coordinate (`2^k`
//! subtasks, one bucket a warp), while inserts, modifies and deletes, which know every
//! field of a tuple, still go to one bucket. Distinct counts are known at
//! [`HyperspaceIndex::build`] (sketched from the batch) and at a regroup (the index's
//! estimates), not at [`HyperspaceIndex::new`], whose subspaces are the paper's until a
//! regroup; [`HyperspaceOptions`] gives the rule.
//!
//! Regrouping: `regrouping` ([`regroup::RegroupOptions`]: most attributes a subspace,
//! most subspaces, target chain length, shift factor, searches between looks) bounds what
//! [`HyperspaceIndex::regroup_from_history`] chooses; `adaptive(RegroupOptions)` also
//! makes searches regroup by themselves (off by default); `history_half_life` sets how
//! fast the query history forgets (by default in `check_every` searches).
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_hyperspace::regroup::RegroupOptions;
//! use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions};
//!
//! # fn main() -> gpuhash_hyperspace::Result<()> {
//! let device = Device::default()?;
//! let looks = RegroupOptions { check_every: 1 << 14, ..RegroupOptions::default() };
//! let index = HyperspaceIndex::new(&device, 4, 1 << 20, HyperspaceOptions::default().adaptive(looks))?;
//! // ... inserts and searches; every 2^14 searches one of them may regroup the subspaces.
//! // Or on a call, whatever the option:
//! if let Some(subspaces) = index.regroup_from_history()? {
//!     println!("regrouped to {subspaces:?}");
//! }
//! println!("{:?}", index.adaptive_report());
//! # Ok(()) }
//! ```
//!
//! ## Structure
//!
//! - **Spaces** ([`shape`]): a space hashes some fields (its dimensions) to coordinates, the
//!   top bits of a 32-bit mix of the value and a per-field seed; a bucket is one cell of
//!   the grid, the coordinates concatenated. An index is the **key index** (the key its
//!   only dimension, never regrouped) and **attribute subspaces** (groups of attributes,
//!   and with the key spread the key as a last dimension).
//!   Every space holds every tuple whole, as HyperDex does and the paper follows, so any
//!   search is answered by one space alone: the key index when it names the key (the key
//!   index is space 0), else the space of fewest expected node reads by the cost model
//!   ([`cost`], [`HyperspaceIndex::best_space`]), the earliest on a tie.
//! - **Super nodes** (`cuda-src/hyperspace/super_node.cuh`): a bucket is a chain of super
//!   nodes, each p + 2 nodes of 128 bytes (the key node, one node per attribute, the value
//!   node), 31 slots a node and the link in lane 31, so the chains of one bucket advance in
//!   lockstep and slot s of each node holds one field of the same tuple. A search on `Ai`
//!   reads `Ai`'s nodes, and the other nodes of a super node only on the lanes that
//!   matched. Heads lie in one array per space; every other super node is one run of p + 2
//!   consecutive slabs of a SlabAlloc ([`gpuhash_slab_alloc`]), claimed with one atomic, so
//!   node c lies c slabs after the key node. A full tail gets a new super node by a
//!   compare-and-swap on the key node's link; the winner then links the other chains.
//! - **Slots** (`cuda-src/hyperspace/slots.cuh`): the key slot decides whether a tuple is
//!   there. An insert claims it as busy (a compare-and-swap from empty), writes the other
//!   fields, fences, then publishes the key; readers skip empty, busy and removed slots and
//!   read the other fields after a fence. A delete writes the removed word. Removed slots
//!   are freed together by [`HyperspaceIndex::reclaim`] (by the index itself every
//!   [`HyperspaceOptions::reclaim_after`] deletes and modifies) once no write is in flight
//!   and every search that began before has ended (`reclaim.rs`), and later inserts fill
//!   those holes before the chain grows. A batch that
//!   must find a slot again (a modify's old copy, a rolled-back insert) keeps its id: the
//!   super node's slab address and the lane (or the word in the heads array), which stay
//!   valid when the allocator grows, even the light variant that moves every slab.
//! - **Operations** are served by warp-cooperative work sharing: each thread owns an item,
//!   the warp takes them one at a time and reads each key node with all 32 lanes, ballots
//!   finding the key or a free slot. An insert looks for its key on the way (waiting on a
//!   busy slot, which may hold it) through the whole chain, and then claims the first
//!   empty slot it saw (a freed hole may lie before a live copy), so a key is stored
//!   once.
//! - **Searches** (`src/search.rs`, `cuda-src/hyperspace/search.cu`): queries naming the
//!   same fields form a group run in their best space; each (query, bucket it touches) is
//!   a subtask. With [`SearchStrategy::Grouped`], the paper's warp pre-combination data
//!   sharing, subtasks are sorted by bucket on the device (one launch serves one field set,
//!   so one scanned chain) and a warp takes the subtasks of one bucket, up to 32 at a time,
//!   comparing every one of them on each node it reads (one bucket a warp, so that no warp
//!   walks chain after chain while others idle); [`SearchStrategy::OneAtATime`] is the
//!   warp-cooperative baseline, a warp serving 32 subtasks one after another. A count pass,
//!   then a write pass into a layout with room to spare, then a compaction give compressed
//!   rows ([`Matches`]: offsets, then tuples as structure of arrays) like the slab hash
//!   multimap's `get_all`; the passes stay on the device, their counts laid out by
//!   device scans, and the host waits for two words a round (the room's size, the
//!   answer's size); the compaction takes a thread an answer, so a few long rows spread
//!   over the whole device. [`HyperspaceIndex::search_async`] queues the passes into the
//!   caller's buffers and waits for nothing; [`HyperspaceIndex::search_into`] brings the
//!   answers into host vectors reused from batch to batch: answers are tuples of p + 2
//!   words, and fresh host memory for millions of them costs more page faults than the
//!   search itself costs on the device.
//! - **What the index observes** (`src/observations.rs`, behind one lock): the fields of
//!   every search, each query one search, in a decaying [`history::QueryHistory`]; and a
//!   [`cost::Population`], the tuple count (kept by inserts and deletes, set exactly by
//!   a regroup) and the distinct values of each attribute, estimated by a
//!   [`cost::DistinctSketch`] of the values written (an upper bound: sketches do not
//!   forget deleted values). Searches are routed by it ([`HyperspaceIndex::population`],
//!   [`HyperspaceIndex::query_history`]).
//! - **Regrouping** (`src/adaptive.rs`, [`HyperspaceIndex::regroup`]): new attribute
//!   subspaces are built in bulk from the key index (read back whole by an export kernel,
//!   [`HyperspaceIndex::export`]) and swapped in; searches go on meanwhile on the
//!   subspaces they began with, while writes wait, so nothing is lost or duplicated; one
//!   regroup runs at a time. Which subspaces to build is the pure host policy of
//!   [`regroup`] (exact search over the groupings, costed by [`cost`] under the history):
//!   [`HyperspaceIndex::regroup_from_history`] asks it on a call, and with adaptive
//!   regrouping the search that brings the history to `check_every` more searches asks
//!   [`regroup::RegroupPolicy::advise`] after its batch and regroups on its own thread
//!   when it proposes (a regroup already under way makes it skip the look; a failure
//!   leaves the subspaces and goes to [`HyperspaceIndex::adaptive_report`]). The
//!   policy's spaces go in as [`Subspaces::Shapes`], with the bits it chose for the
//!   tuples held and the attributes' distinct values, not the index's own bits rule.
//! - **Bulk build** (`src/build.rs`): the batch laid out once as rows (key, attributes,
//!   value), then in each space sorted by bucket with a counting sort (histogram kernel,
//!   prefix sum on the device, scatter kernel; rows moved whole), then whole super nodes
//!   of 31 tuples, numbered bucket after bucket from device prefix sums of their counts
//!   (two totals cross to the host): one kernel takes a run of slabs for every super node
//!   past a head, another writes every super node with its links, one warp a super node
//!   whatever its bucket (the paper's one warp a bucket leaves an attribute of few values,
//!   hence few long buckets, to a few warps). The columns are sketched on host threads,
//!   each column in pieces, while the batch goes up.
//! - **Column scan** ([`scan::ColumnScan`]): the same searches answered without an index,
//!   by scanning device columns of the tuples as a dataframe library would; the baseline
//!   the index is measured against and an oracle on the GPU for its tests.
//! - `src/launch.rs` is the only place raw device pointers reach the kernels;
//!   `src/layouts.rs` holds their parameter structs, made by bindgen from
//!   `cuda-src/include/gpuhash/hyperspace_layouts.h`.
//!
//! ## Batches
//!
//! Host batches are structure of arrays ([`TupleBatch`]): keys, values, and the attributes
//! in one column-major slice (attribute `a` of tuple `i` at `a * n + i`), the layout of
//! the kernels and of [`DeviceTuples`]. A batch is checked whole before anything is
//! written: a key twice in one batch, a reserved key ([`is_reserved_key`]: the three
//! highest words) or attributes that are not p columns reject it with an error and change
//! nothing. The shape is checked on the host; the keys of a batch of 1024 or more once
//! uploaded, by a kernel that puts each key in a table twice the batch's size (one wait),
//! and only when it finds a fault are the keys scanned on the host to name the first one
//! in batch order (smaller batches are scanned on the host alone).
//! Device forms take the batch from device buffers on the caller's stream
//! ([`HyperspaceIndex::insert_on`], [`HyperspaceIndex::modify_on`],
//! [`HyperspaceIndex::modify_values_on`], [`HyperspaceIndex::delete_on`],
//! [`HyperspaceIndex::get_async`], [`HyperspaceIndex::search_async`]) and answer one byte
//! an element; the writes among them check their keys on the device as the host forms do
//! (reading them back only to name a fault), read the attribute columns back for the
//! index's sketches, and wait for their batch.
//! Inserts answer per tuple ([`InsertStatus`]: inserted, or present and left alone);
//! modify (whole tuples), [`HyperspaceIndex::modify_values`] (values alone) and delete
//! answer per key whether the index held it. Phase order: an insert goes
//! into the key index first (which decides what is new), then each subspace; a delete
//! leaves the subspaces first, then the key index; a modify puts new copies into every
//! space, waits, then takes the old copies out of every space by the key slots a lookup
//! found before.
//!
//! Room: before an insert each space makes sure its allocator can serve every super node
//! the batch may link (growing while nothing runs, as the slab hash does), and tuples that
//! still find none are served again after growth. If an allocator cannot grow (out of
//! device memory), the copies the batch put in are taken out again and the error says
//! why: the index holds what it held before.
//!
//! ## What concurrent readers see
//!
//! A modify inserts the new copy before it deletes the old one (the paper's temporary
//! repeated read): a search running meanwhile finds the tuple once or twice, never not at
//! all. Across host threads this needs a grace period: every search registers before its
//! first kernel, and a modify, once its new copies are all in, waits for every search that
//! began before that moment before it deletes. A search answers what one write pass saw,
//! whole (it runs again if a query found more than the room laid out for it). While a
//! modify is in flight, [`HyperspaceIndex::len`] and [`HyperspaceIndex::get`] may count or
//! find its tuples twice too. Writes of one key from two threads at once are not ordered;
//! keep them on one thread.
//!
//! ## Limits
//!
//! - Super nodes are never given back (only [`HyperspaceIndex::clear`] empties the
//!   chains): freed slots take later inserts of their own bucket, so under churn memory
//!   stays near what the largest population needed, not what the present one needs. A
//!   reclaim holds writes off while it waits for earlier searches.
//! - The index itself does not speak the table contract: it reserves three key words and
//!   rejects a batch repeating a key, where the contract takes every `u32` and keeps one
//!   copy. [`KeyIndexMap`] wraps it as a contract `Map<u32, [u32; W]>` that does (a side
//!   store for the reserved keys, repeats resolved on the host), at the price of a wait
//!   and a round trip of its keys through the host in every device form.
//!
//! ## Features
#![doc = document_features::document_features!()]

mod adaptive;
mod build;
pub mod cost;
mod error;
mod grace;
pub mod history;
mod index;
mod key_map;
mod launch;
#[allow(
    dead_code,
    reason = "generated from the kernels' header: not every constant is used"
)]
mod layouts;
mod observations;
mod options;
mod query;
mod reclaim;
pub mod regroup;
pub mod scan;
mod search;
pub mod shape;
mod space;
mod tuples;
mod writes;

pub use adaptive::AdaptiveReport;
pub use error::{HyperspaceError, Result};
pub use gpuhash_slab_alloc::Variant;
pub use index::{HyperspaceIndex, InsertStatus};
pub use key_map::KeyIndexMap;
pub use options::{HyperspaceOptions, SearchStrategy, Subspaces};
pub use query::{DeviceMatches, Matches, Query};
pub use tuples::{DeviceTuples, Tuple, TupleBatch, Tuples, is_reserved_key};
