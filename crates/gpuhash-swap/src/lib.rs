//! # gpuhash-swap
//!
//! Starfish ("High-performance Hash Table Indexing System Supporting Paging Memory", Xiong
//! et al., 2022): a map larger than the GPU's memory, split into child tables of which only
//! as many live on the device as a budget allows; the others wait in host memory as
//! images ([`gpuhash_core::image`]) and are paged in when a batch needs them.
//!
//! [`SwapTable<T>`] takes any child table `T` of the contract that has an image and says
//! whether its image can be probed in place ([`ProbeInPlace`], which every [`Map`] +
//! [`Image`] gets with `impl ProbeInPlace for MyMap {}`); [`SwapMap<K, V>`] is the default,
//! DyHash children ([`gpuhash_cuckoo::CuckooTable`]), which are probed in place. It
//! implements [`Table`] and [`Map`] itself, so code written against the contract runs on
//! it unchanged, host forms included.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_core::table::{Map, Table};
//! use gpuhash_swap::{SwapMap, SwapOptions};
//!
//! let device = Device::default()?;
//! // 16 children of 2^20 pairs; room on the device for a few of them.
//! let options = SwapOptions::with_capacity(16 << 20).device_budget(512 << 20);
//! let map = SwapMap::<u64, u64>::new(&device, options)?;
//! let keys: Vec<u64> = (0..1 << 20).collect();
//! map.insert(&keys, &keys)?;
//! assert_eq!(map.get(&keys[..4])?, vec![Some(0), Some(1), Some(2), Some(3)]);
//! assert_eq!(map.len()?, keys.len());
//! println!("{:?}", map.stats());
//! # Ok::<(), gpuhash_cuckoo::CuckooError>(())
//! ```
//!
//! [`Map`]: gpuhash_core::table::Map
//! [`Map::get`]: gpuhash_core::table::Map::get
//! [`Table`]: gpuhash_core::table::Table
//! [`Table::clear`]: gpuhash_core::table::Table::clear
//! [`Image`]: gpuhash_core::image::Image
//! [`ProbeInPlace`]: gpuhash_core::image::ProbeInPlace
//! [`PinnedImage`]: gpuhash_core::image::PinnedImage
//! [`Image::from_pinned_image`]: gpuhash_core::image::Image::from_pinned_image
//! [`Image::to_pinned_image`]: gpuhash_core::image::Image::to_pinned_image
//! [`ProbeInPlace::get_in_place`]: gpuhash_core::image::ProbeInPlace::get_in_place
//! [`ProbeInPlace::get_each`]: gpuhash_core::image::ProbeInPlace::get_each
//! [`ProbeInPlace::get_in_place_each`]: gpuhash_core::image::ProbeInPlace::get_in_place_each
//! [`ProbeInPlace::get_routed`]: gpuhash_core::image::ProbeInPlace::get_routed
//! [`UndoPlan`]: gpuhash_core::table::UndoPlan
//!
//! ## Options
//!
//! Set through [`SwapOptions`]: `with_capacity(n)`, `child_capacity` (one million pairs, the
//! paper's), `children`, `device_budget` and `host_budget` in bytes, `scratch_bytes` for
//! partitioning a batch (a quarter of the device budget unless set, or a whole batch at
//! once with no budget: [`policy::scratch_bytes`]), `filter_bits_per_key` for the miss filters, `cost_model` (the
//! rates that choose between paging and probing in place, [`CostModel`]),
//! `page_out_wait` (how long a page-out waits for its child's work), and `make_child`, the
//! child table's constructor.
//!
//! ## Structure
//!
//! - **Children.** `n` children (from [`SwapOptions::children`], or the capacity over
//!   [`SwapOptions::child_capacity`], one million pairs by default as in the paper). Each
//!   key lives in exactly one: [`policy::child_of`], the high 32 bits of
//!   `fmix64(key ^ seed)` scaled to `[0, n)`, which does not follow the children's own
//!   hashing (keys of one child still spread over its buckets).
//! - **A batch** (a device form; the host forms are the contract's, on top) is cut into
//!   segments of [`SwapTable::segment_len`] elements, as many as the scratch budget holds.
//!   Each segment is partitioned on the device (`cuda-src/swap/partition.cu`): a kernel
//!   picks each key's child and counts the keys of each child (and, for a lookup, the
//!   keys each consulted miss filter passes); the counts come to the host (which needs
//!   each child's range) and are scanned there; a second kernel scatters keys, values and
//!   each element's input place into per-child ranges. Then, child by child (resident
//!   ones first, each child once), the child's own device form runs on its range; a last
//!   kernel puts the answers back in input order. Before an insert or a removal runs on a
//!   child, the child's own lookup logs what its keys held, so that a batch that fails can
//!   be taken back (below, "After an error"). A batch of several segments with children
//!   on the host counts its keys by child first (one count kernel over the batch, through
//!   the filters for a lookup, one wait); the children on the host that the batch pages (for a
//!   lookup those the cost model pages for the whole batch, for an insert or a removal
//!   every one with keys) then take passes of their own over the segments, half as many at
//!   once as the slots hold (below, "Overlap"), after a first pass for the other
//!   children, so that each is paged in once a batch rather than once a segment
//!   ([`policy::passes`]). A pass moves only
//!   its own children's keys, and a lookup never moves a key a filter rules out, so a
//!   pass's segments read as many keys as its share of the batch lets the scratch hold
//!   (a pass that moves a quarter of the keys reads segments about 2.4 times as long),
//!   and one that would move more than its share is counted again at half the length
//!   ([`policy::SegmentRoom`]): fewer segments, each with its fixed cost of kernels and
//!   one wait.
//! - **Overlap.** While a child's kernels run on the caller's stream, the next child the
//!   segment needs on the device is paged in on another stream, by a thread of its own
//!   (`batch.rs`): first, when no slot is free, the least recently used child that no
//!   later visit needs is paged out (written back if changed, dropped if not), then the
//!   next child's image is copied in. One slot of look-ahead, as the paper's two child
//!   slots: the budget is never exceeded, and with a budget of one child there is no
//!   look-ahead. A page-out waits only for the events recorded after the work queued on
//!   its victim, so the kernels of other children run on meanwhile. Across passes
//!   likewise: paging passes take groups of half the slots ([`policy::page_group`]), and
//!   while one group's segments run, the next group's children page in, one after the
//!   other on one thread, into the other half (`prefetch.rs`; each victim leaves before
//!   its successor comes in, [`policy::Lru::moves_ahead`]), so that paging a batch's
//!   children costs the bus its time beside the kernels, not after them. A routed pass
//!   starts them before it queues its own launches. A child that leaves frees its device
//!   memory with no wait for the batch's later work on the caller's stream (DyHash's
//!   tables know when their own batches have run), so the child paged into that memory
//!   copies in while the batch's kernels run, not after them.
//! - **Residency.** At most [`SwapTable::resident_limit`] children are on the device: the
//!   device budget less the scratch and the filters, over the device memory of a child
//!   made at the child capacity (measured once, when the table is made). Bringing a child
//!   in pages out the least recently used one. Paging in is [`Image::from_pinned_image`],
//!   paging out [`Image::to_pinned_image`]: no rehashing, and for DyHash one DMA a section
//!   each way. Every child keeps its last image on the host, so a child that no batch
//!   changed since it came in is dropped, not copied back; [`SwapTable::stats`] counts
//!   page-ins, page-outs (write-backs) and drops, and the image bytes each way
//!   ([`SwapStats::bytes_paged_in`], [`SwapStats::bytes_written_back`]: what paging put on
//!   the bus, which the W5 benchmark adds to a batch's keys and answers for its bound).
//! - **Host memory.** Images are [`PinnedImage`]s in page-locked host memory, mapped into
//!   the device's address space, from a pool of the table's own whose cap is the host
//!   budget: an image that the budget cannot hold is an `OutOfPinnedMemory` error, and the
//!   child it was for stays resident and unchanged. The pool pins in power-of-two size
//!   classes, so an image may take up to twice its bytes of the budget. The children share
//!   one empty image until they first page out.
//! - **Lookups of children on the host.** A get or contains does not page a child on the
//!   host in for its keys. First its **miss filter** (a split block Bloom filter in device
//!   memory, `cuda-src/swap/filter.cu`, built from the child's keys when a changed child
//!   pages out) checks them on the device: keys it rules out are misses, answered by
//!   flags zeroed before the batch; nothing crosses the bus for them and the partition
//!   does not move them ([`SwapStats::filtered`] counts them). The keys it passes
//!   go, as the [`CostModel`] chooses for that child and batch segment, either to the
//!   child's image **probed in place** ([`ProbeInPlace::get_in_place`]: DyHash's own find
//!   kernel reading the mapped image over the bus; [`SwapStats::probes_in_place`]), or to
//!   the child paged in, when the model says moving the whole image takes less time than
//!   the probes' reads (large batches). Children that cannot be probed in place always
//!   page. A child whose keys in the segment the filter all ruled out is neither probed
//!   nor paged. The children a segment probes are probed in one call
//!   ([`ProbeInPlace::get_in_place_each`]: one launch for DyHash children), since a probe
//!   costs the host tens of microseconds whatever its keys. A lookup of several segments
//!   keeps the keys each child on the host that it probes passes, segment by segment, and
//!   probes them all in one call at its end, where they fit half the scratch
//!   (`policy::deferred_segment`). The filter test is one pass over the segment for every child on the host
//!   (in the partition's count kernel, and again in one compaction kernel), not a kernel a
//!   child. Inserts and removes of a child on the host page it in: the image is never
//!   written in place.
//! - **Routed lookups.** A lookup of children that can route ([`ProbeInPlace::get_routed`]:
//!   DyHash's find kernel reading each key's table from a list of tables on the device and
//!   images read in place) takes neither the partition nor a wait a segment
//!   (`src/routed.rs`). The count kernel writes each key's child, or none where the child's
//!   filter rules the key out, and one launch answers every key in place. A short batch
//!   (one whose keys the cost model would probe in place even if all went to one child on
//!   the host), or any batch when every child is resident, is routed in one pass with no
//!   wait at all. A longer one is surveyed first (one count, one wait), and its passes
//!   ([`crate::policy::passes`]) run routed: the first reaches the resident children and
//!   those on the host it probes in place; each group of children it pages takes a pass of
//!   its own, paged in first (the last pass's prefetch brings them in while its launches
//!   run), every key of the batch routed to its child or left out; the answers of the keys
//!   a pass leaves out are not written, on flags zeroed first. Such a batch of misses pages
//!   nothing and needs one pass; a batch of hits pays its page-ins and a count and a find
//!   over the batch a pass, instead of a partition a segment. The routed counts
//!   ([`SwapStats::filtered`], [`SwapStats::probes_in_place`]: a child on the host whose
//!   filter passed a key) come back without a wait, and join the stats when
//!   [`SwapTable::stats`] reads them. Children that cannot route take the partition as
//!   above. Host lookups ([`Map::get`] and the others) of a batch that pages nothing run in
//!   chunks whose copies overlap other chunks' launches: a batch of more than one chunk is
//!   judged from a sample of it, counted through the filters.
//! - **Threads.** A table takes `&self` everywhere; one lock serializes batches, so four
//!   host threads on one table are correct but do not run their batches at once.
//!
//! ## Where it departs from the paper
//!
//! - A query visits one child, the one its key hashes to; the paper searches every child
//!   in turn, blanking found queries. Inserts likewise go to the key's child, not to the
//!   child being built, so a key is never in two children and an upsert replaces its value.
//! - Children are the contract's tables (DyHash by default), not the paper's cuckoo tables
//!   with a 108-slot stash; a child grows on its own (DyHash resizes), so a child holding
//!   more than the child capacity takes more device memory than the budget counted.
//! - The overlap is generalised: the paper alternates two child slots for a build; here
//!   any batch pages its next child in (evicting ahead when the budget is full) while the
//!   current child's kernels run, whatever the verb.
//! - The paper has no filters and no zero-copy lookups: a search pages every child in.
//!
//! ## Waits
//!
//! A routed lookup (above) waits for its survey, when it has one, and for its page-ins.
//! Another device form waits for its stream once a segment: the per-child counts, and the
//! counts
//! of keys the filters passed, come to the host in one copy (the host sizes each child's
//! launches from them, and the cost model needs the passed counts). Besides, the thread
//! that runs the batch waits for a page-in ahead to land before the visit that needs it
//! (the copies then run beside the last child's kernels), and for a page-in at its visit
//! when there was no room to page ahead (the first child a batch pages in, or a budget of
//! one child). A page-out waits for the work queued on its victim only, not for the device,
//! and for at most [`SwapOptions::page_out_wait`] (a minute unless set): every piece of
//! work queued on a resident child records an event, and the wait polls those. A page-in
//! ahead runs on a thread that owns all it touches and takes no lock the batch's thread
//! holds, so the batch waits for it only as long as its own copies and the victim's
//! bounded wait take. A filter replaced by a page-out is freed once every kernel that read
//! the filters has run, on the device. The children's own device forms may wait too
//! (DyHash reads its counts back after inserts to decide on resizing). Equal keys in one
//! insert batch: one whole value wins, unspecified which. A batch of several segments
//! that takes passes waits once more, for its count by child. An insert or a removal that
//! succeeds adds no wait for its undo log: a segment's log leaves the device in the next
//! segment's wait, and the last one's never leaves. One that fails waits while it is
//! taken back.
//!
//! ## After an error
//!
//! A failed insert or removal leaves the table holding **exactly what it held before the
//! batch**, however many segments and children it had reached (`src/undo.rs`):
//!
//! - **The log.** Before a child's insert or removal runs, the child's own `get_async`
//!   looks its keys of the segment up (the child is resident then): a flag a key and the
//!   value it held, kept with the keys' places in the segment (one log a pass over a
//!   segment, when a batch takes passes). The log of the segment that runs stays on the
//!   device, within the scratch budget (it takes the room a lookup's filter survivors
//!   take: [`policy::change_scratch_per_element`]); as the next segment starts it moves to
//!   pinned host memory from the device's pool, so a batch larger than the device budget
//!   keeps its log off the device. The keys are not logged: the caller's buffer holds
//!   them, in input order, as long as the batch runs.
//! - **The cost.** A lookup of each key on the device before its insert or removal, and,
//!   over the bus, one flag, one value and one place an element, device to host, for every
//!   segment but the last to run (13 bytes for `u64` values); nothing more while batches
//!   succeed. A failed batch then copies its keys to the host once and the undo's keys and
//!   pairs back.
//! - **The undo.** Every logged visit is taken back with the contract's verbs
//!   ([`UndoPlan`]): after an insert, keys that were not there are removed and keys that
//!   were get their old values back; after a removal, the keys that were there go back in
//!   with their values. The visit that failed is taken back too (a form that fails may have
//!   changed part of its keys: DyHash's `NotInserted`). A key lives in one child, so the
//!   undo goes child by child, the resident ones first, each paged in once through the
//!   usual paths, and each child's visits go back the last segment first, so a key repeated
//!   across segments ends with what it held before. A failure in a later pass takes back
//!   the passes before it too (a child's visits all lie in one pass, in segment order).
//!   Then the batch's own error returns. [`SwapStats::undone`] counts the batches taken
//!   back.
//! - **What stays.** Children keep the room they grew by during the failed batch, and a
//!   child taken back counts as changed (its image is written back when it next leaves).
//!   The answers buffers of a failed batch hold answers for the visits before the
//!   failure only (a removal's flags then name keys the undo has put back).
//! - **What cannot be undone**: an error that no form returns but that shows only when the
//!   stream is waited on (a kernel that faults leaves the context unusable), and an undo
//!   that fails in turn (the device lost, or device memory or the host budget too short
//!   for a page-in or page-out it needs). The undo then stops, the batch's own error is
//!   still the one returned, [`SwapStats::undo_failures`] counts it, and the table may
//!   hold part of the batch (each key as it was before or as the batch left it).
//!
//! A page-in ahead that fails counts as failing at the child it was for; the batch waits
//! for any move under way before it returns or is taken back. A failed page-out leaves the
//! victim resident and unchanged; a failed page-in leaves the child on the host,
//! unchanged. Work on a victim that has not finished within [`SwapOptions::page_out_wait`]
//! fails the page-out with an error of kind `Device` (the driver's `CUDA_ERROR_TIMEOUT`).
//! Lookups change nothing, so after a failed lookup the table is as it was.
//! [`Table::clear`] that fails leaves some children cleared. Running out of device memory
//! is an error of kind `OutOfDeviceMemory`; exceeding the host budget on a page-out, or
//! the host refusing to pin more, is `OutOfPinnedMemory`, and the child stays resident and
//! unchanged.
//!
//! ## Left for later
//!
//! - The look-ahead starts a thread a move; a page-in and the page-out before it run one
//!   after the other on that thread (the page-in needs the victim's slot), not on two
//!   copy engines at once. Measured against paging one child after another in one run on
//!   an H100 (docs/benchmarks/swap.md), large batches of hits run 15 to 31% slower with
//!   the look-ahead, misses and small batches faster: the thread starts and joins cost
//!   about what they hide.
//! - An undone child keeps the room it grew by (DyHash shrinks it at a later count, not the
//!   undo), and the undo runs on the batch's stream child by child, with no look-ahead.
//! - Export builds every child's pairs on the device at once, outside the budget; so
//!   does a page-out for the one child's filter.
//! - The cost model's defaults are the rates measured on an H100 ([`CostModel`]); on
//!   other machines the W5 benchmark (`gpuhash-bench swap`) measures them on one child
//!   (its `rates` piece) and prints the model they make, for
//!   [`SwapTable::set_cost_model`].
//! - A short lookup's fixed cost is host work: routed, it takes no wait, but each batch
//!   records an event a child, parses each child image's state and uploads the filter and
//!   route lists (about 75 to 90 us for 16 children on an H100), so batches of 2^10 keys
//!   run at 11 to 13 M keys/s from device buffers, hits and misses alike; a table of
//!   resident children, whose routes each take a read lock and two events, costs more.
//! - Keys a miss filter passes by mistake (0.5% of those sent to a full child on the host
//!   at the default 12 bits a key, 3.3% at 8) are probed over the bus: at 8 bits, half the
//!   time of a W5 batch of misses of 2^26 keys. A static filter built at page-out (an xor
//!   filter: 0.4% at about 10 bits a key) would need rounds of peeling kernels a
//!   page-out and about three times the room outside the budget that the Bloom filter's
//!   build takes (above).
//! - A batch's first pass (its resident children) prefetches nothing: every slot is busy,
//!   so the first paging group comes in after that pass's launches have run. A batch of
//!   hits that pages its children is bound by their page-ins (12 of 52 MB for 2^26 keys
//!   in W5, about 1.2 ms each, 45 GB/s: the rebuild allocates and queues its sections one
//!   by one); keeping freed device memory in the pool for the next page-in measured no
//!   faster.
//! - Inserts and removals still partition each segment and visit its children one by
//!   one (their undo log needs each child's keys before its form runs). Host timing marks
//!   of a W5 insert of 2^26 pairs (75-92 ms): 7 passes of 54 segments in all, each
//!   segment's count waited for (about 0.3 ms), and 132 child inserts, each a DyHash
//!   insert that waits for its counts (22-24 ms of waits in all, now that those readbacks
//!   no longer queue behind page-outs); page-outs (2.3-2.7 ms each: export, filter,
//!   image) and page-ins run beside them. Fewer, longer segments or a child insert that
//!   need not wait are the levers.
//! - Small uploads (a launch's list of routes, a pass's children) still go by copy
//!   engine, behind a page-in's copies. Carrying them in launch parameters instead was
//!   built and measured (W5 hits of 2^26 keys, A/B in one call): no gain, left out.
//!
//! ## Features
#![doc = document_features::document_features!()]

mod batch;
mod contract;
mod deferred;
mod filter;
mod launch;
#[allow(unused_imports, reason = "generated")]
mod layouts;
mod options;
pub mod partition;
mod passes;
pub mod policy;
mod prefetch;
mod residency;
mod routed;
mod table;
mod undo;
mod wait;

pub use options::{
    DEFAULT_CHILD_CAPACITY, DEFAULT_FILTER_BITS_PER_KEY, DEFAULT_PAGE_OUT_WAIT,
    DEFAULT_SCRATCH_BYTES, MakeChild, SwapOptions,
};
pub use policy::{Access, CostModel};
pub use residency::SwapStats;
pub use table::{SwapMap, SwapTable};
