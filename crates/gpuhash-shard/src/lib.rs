//! # gpuhash-shard
//!
//! A map spread over the GPUs of a host: [`ShardedTable<T>`] holds one shard, any table `T`
//! of the contract ([`gpuhash_core::table::Map`]; DyHash, [`gpuhash_cuckoo::CuckooTable`],
//! by default: [`ShardedMap<K, V>`]), on each GPU of a [`Comm`], and moves a batch's keys
//! to the GPUs that own them through NCCL, the engine GPU clusters already run on, rather
//! than a protocol of its own. It implements [`Table`] and [`Map`] itself, so code written
//! against the contract runs on it unchanged, host forms included.
//!
//! The partition follows the multisplit of the Starfish paging table ([`gpuhash_swap`],
//! "High-performance Hash Table Indexing System Supporting Paging Memory", Xiong et al.,
//! 2022), whose kernels it reuses ([`gpuhash_swap::partition`]); the exchange is an
//! all-to-all of uneven parts built from NCCL's grouped sends and receives.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_core::table::{Map, Table};
//! use gpuhash_shard::{Comm, ShardOptions, ShardedMap};
//!
//! // Every GPU of the host, one shard each (one GPU needs no NCCL).
//! let comm = Comm::all_devices()?;
//! let map = ShardedMap::<u64, u64>::new(comm, ShardOptions::with_capacity(1 << 24))?;
//! let keys: Vec<u64> = (0..1 << 20).collect();
//! map.insert(&keys, &keys)?;
//! assert_eq!(map.get(&keys[..3])?, vec![Some(0), Some(1), Some(2)]);
//! assert_eq!(map.len()?, keys.len());
//! # Ok::<(), gpuhash_cuckoo::CuckooError>(())
//! ```
//!
//! ## Structure
//!
//! - **Ranks** ([`Comm`]): one GPU a rank, each with a stream of its own. A communicator
//!   of one ([`Comm::single`]) needs no NCCL: its exchanges are copies on its device, and
//!   every other step runs as with many. [`Comm::from_devices`] (or
//!   [`Comm::all_devices`]) opens one NCCL communicator a GPU in this process
//!   (`ncclCommInitAll`).
//! - **Owners.** Key `k` lives in shard [`ShardedTable::owner_of`]`(k, ranks)`: the high
//!   32 bits of `fmix64(k ^ seed)` scaled to the ranks, the choice the Starfish partition
//!   makes for its children ([`gpuhash_swap::policy::child_of`]), which does not follow
//!   the shards' own hashing (DyHash's, the slab hash's).
//! - **A batch** (a device form, on a stream of any rank's GPU, the *source*; the host
//!   forms are the contract's, staged through rank 0's GPU) is split by owner on the
//!   source GPU ([`gpuhash_swap::partition::Partition::by_part`]: a count kernel, the
//!   counts scanned on the host, a scatter kernel, shared-memory counts a block). Then an
//!   **all-to-all** (`src/exchange.rs`) moves each owner's keys (and values) to its GPU:
//!   first every pair of ranks exchanges its part's length (one word), so each receiver
//!   sizes its buffers, then the parts, each exchange one NCCL group of sends and receives
//!   queued on each rank's stream (the caller's on the source, the rank's own elsewhere).
//!   Each shard runs its own device form on its keys, on its GPU; the answers (flags, and
//!   values of a lookup) travel back to the source the same way and a gather kernel puts
//!   them at their input places.
//! - **Counts, memory, clear** go shard by shard on each shard's stream; **export** brings
//!   every shard's pairs to the caller's GPU through the exchange and lays them end to
//!   end.
//! - **Threads.** A table takes `&self` everywhere; one lock serializes batches (the
//!   ranks' streams and communicators take one batch at a time).
//!
//! ## After an error
//!
//! A batch that fails leaves **every shard holding exactly what it held before**: before
//! a shard's insert or removal runs, the shard's own `get_async` logs what its keys held
//! (a flag and a value a key, on the shard's GPU); when any later step fails (another
//! shard's change, running out of memory on any GPU, the exchange of the answers), each
//! logged shard is taken back with the contract's verbs ([`UndoPlan`]), the last reached
//! first, and the batch's own error returns. Lookups change nothing. What cannot be
//! undone: a failure that shows only when a stream is waited on (a kernel that faults),
//! or an undo that fails in turn (the GPU lost); the shard may then hold part of the
//! batch. A [`Table::clear`] that fails leaves the shards before it cleared. NCCL
//! failures are errors of kind `Device` (the call and NCCL's code are written to standard
//! error, since the core error has no words for them); a stream of a GPU the table does
//! not span is `InvalidInput`.
//!
//! ## NCCL
//!
//! cudarc opens NCCL at run time, so building needs none. A communicator of more than one
//! GPU needs `libnccl.so.2` on the loader path (for instance from the `nvidia-nccl-cu13`
//! Python package: its `site-packages/nvidia/nccl/lib` on `LD_LIBRARY_PATH`);
//! [`nccl_available`] says whether it loads, and [`Comm::from_devices`] fails with an error
//! saying so rather than panicking. This crate never creates NVLink multicast objects;
//! runs over several GPUs should set `NCCL_NVLS_ENABLE=0` (docs/gpu-testing.md).
//!
//! ## Left for later
//!
//! - **Several processes**, one rank each (`ncclCommInitRank` with an id made on one rank
//!   and shared by the caller, for several hosts): the exchange is already an all-to-all
//!   of every rank's parts, but the verbs would have to run on every rank at once, each
//!   with its own batch, and `len` and export would need collectives; not built yet.
//! - **An owner seed of its own**: the owner reuses the Starfish partition's fixed seed,
//!   so a sharded table of Starfish tables would send each shard's keys to a narrow band
//!   of its children. Sharding DyHash or slab hash tables is unaffected.
//! - **Combining upserts** ([`gpuhash_core::table::CombiningMap`]) and sets and
//!   multimaps of shards: only maps so far.
//! - **Waits**: each exchange reads its lengths back on every receiver (one wait a rank
//!   an exchange, two exchanges a direction), and the partition reads its counts (one
//!   wait); a batch from host slices of many chunks pays these a chunk.
//! - **Measurements**: the W1 scaling benchmark (`gpuhash-bench shard`: weak scaling at
//!   n pairs a GPU, strong scaling at 4n in all, 1 to 8 GPUs, against linear scaling and
//!   against the exchange's bound from the scatter bandwidth [`scatter_bandwidth`]
//!   measures) is written but has not run yet. Every batch starts on one GPU (the
//!   source), whose partition and outgoing links bound it; batches from several GPUs at
//!   once would need the several-process path above.
//!
//! [`Table`]: gpuhash_core::table::Table
//! [`Map`]: gpuhash_core::table::Map
//! [`Table::clear`]: gpuhash_core::table::Table::clear
//! [`UndoPlan`]: gpuhash_core::table::UndoPlan

mod batch;
mod comm;
mod contract;
mod exchange;
mod launch;
mod options;
mod table;

pub use comm::{COMM_ID_BYTES, Comm, CommId, nccl_available, nccl_missing_help};
pub use exchange::scatter_bandwidth;
pub use options::{DEFAULT_CAPACITY, MakeShard, ShardOptions};
pub use table::{ShardedMap, ShardedTable};
