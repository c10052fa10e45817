//! # gpuhash-shard
//!
//! A map spread over GPUs: [`ShardedTable<T>`] holds one shard, any table `T` of the
//! contract ([`gpuhash_core::table::Map`]; DyHash, [`gpuhash_cuckoo::CuckooTable`], by
//! default: [`ShardedMap<K, V>`]), on each GPU of a [`Comm`], and moves a batch's keys to
//! the GPUs that own them through NCCL, the engine GPU clusters already run on, rather
//! than a protocol of its own. The GPUs are those of one process, or of several processes
//! (of one host or of several), one rank each. It implements [`Table`] and [`Map`]
//! itself, and [`CombiningMap`] where its shards do, so code written against the contract
//! runs on it unchanged, host forms included.
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
//!   (`ncclCommInitAll`): every rank is *local*. [`Comm::from_rank`] makes one rank of a
//!   communicator whose other ranks are other processes (`ncclCommInitRank`, with a
//!   [`CommId`]): only that rank is local, and the table holds only its shard.
//! - **Owners.** Key `k` lives in shard [`ShardedTable::owner_of`]`(k, ranks)`: the high
//!   32 bits of `fmix64(k ^ seed)` scaled to the ranks, the choice the Starfish partition
//!   makes for its children ([`gpuhash_swap::policy::Spread`]) with a seed of the sharded
//!   table's own ([`OWNER_SEED`]), which follows neither the shards' own hashing
//!   (DyHash's, the slab hash's) nor a Starfish shard's choice of its children: with the
//!   children's seed, each Starfish shard's keys would fall in a band of its children.
//! - **A batch** (a device form, on a stream of a local rank's GPU, the *source*; the host
//!   forms are the contract's, staged through the first local rank's GPU) is split by
//!   owner on the source GPU ([`gpuhash_swap::partition::Partition::by_part`]: a count
//!   kernel, the counts scanned on the host, a scatter kernel, shared-memory counts a
//!   block). Then an **all-to-all** (`src/exchange.rs`) moves each source's part for each
//!   owner to the owner's GPU: first every pair of ranks exchanges its part's length (one
//!   word), so each receiver sizes its buffers, then the parts, each exchange one NCCL
//!   group of sends and receives queued on each local rank's stream (the caller's on the
//!   source, the rank's own elsewhere). Each owner runs its shard's own device form on
//!   each source's part, source by source (one call a part that has keys); the answers
//!   (flags, values) travel back to each part's source the same way and a gather kernel
//!   puts them at their input places. In one process one rank is the source and the
//!   others send empty parts; in several, every process is the source of its own batch.
//! - **Counts and memory** go shard by shard on each local shard's stream and are summed
//!   over every rank (in several processes each rank sends its words to every rank);
//!   **clear** clears the local shards; **export** brings every shard's pairs to the
//!   caller's GPU through the exchange and lays them end to end (in several processes,
//!   to every process).
//! - **Combining** ([`CombiningMap`], where the shards are combining maps): an upsert
//!   travels as an insert does, each owner upserting each source's part (so every value
//!   is combined into its key's exactly once, the shards' own guarantee); an
//!   `insert_or_find` travels as an insert and its values come back as a lookup's. Of
//!   equal new keys from several sources, the first source's part to reach the owner
//!   stores its candidate.
//! - **Threads.** A table takes `&self` everywhere; one lock serializes batches (the
//!   ranks' streams and communicators take one batch at a time).
//!
//! ## Several processes
//!
//! One process, say rank 0, makes a [`CommId`] and hands [`CommId::to_bytes`] to every
//! other by any channel the job has (an MPI broadcast, a file on a shared disk, a
//! launcher's environment); each process then calls [`Comm::from_rank`] with its own
//! device, the id, its rank and the rank count, and builds its [`ShardedTable`] with the
//! same options (its shard gets its share of the capacity). The ranks may be on several
//! hosts: NCCL finds its way between them (`NCCL_SOCKET_IFNAME` names the network
//! interface of the bootstrap and of sockets, `NCCL_IB_HCA` the InfiniBand adapters;
//! `NCCL_DEBUG=INFO` shows what it chose).
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_core::table::{Map, Table};
//! use gpuhash_shard::{COMM_ID_BYTES, Comm, CommId, ShardOptions, ShardedMap};
//!
//! # fn send_to_others(_: &[u8]) {}
//! # fn receive_from_rank_0() -> [u8; COMM_ID_BYTES] { [0; COMM_ID_BYTES] }
//! // Rank, rank count and this host's GPU for the rank, as the job's launcher gives them.
//! let (rank, ranks, gpu) = (0usize, 16usize, 0usize);
//! let id = if rank == 0 {
//!     let id = CommId::new()?;
//!     send_to_others(&id.to_bytes());
//!     id
//! } else {
//!     CommId::from_bytes(receive_from_rank_0())
//! };
//! let comm = Comm::from_rank(&Device::new(gpu)?, &id, rank, ranks)?;
//! let map = ShardedMap::<u64, u64>::new(comm, ShardOptions::with_capacity(1 << 30))?;
//! // Every process inserts its own keys, in one collective batch.
//! let mine: Vec<u64> = (0..1000).map(|i| i * ranks as u64 + rank as u64).collect();
//! map.insert(&mine, &mine)?;
//! assert_eq!(map.len()?, 1000 * ranks);
//! # Ok::<(), gpuhash_cuckoo::CuckooError>(())
//! ```
//!
//! Every verb is then **collective**: every process calls the same verbs in the same
//! order, each with its own batch, possibly empty (a process with nothing to insert still
//! calls the insert, with no keys). Each gets the answers for its own keys; `len` and
//! `memory` are the whole table's on every process; `export` gives every process every
//! pair. Host forms run whole (one batch a call, [`Table::host_insert_chunk`] and
//! [`Table::host_lookup_chunk`] being `usize::MAX`), so that every process runs as many
//! batches. A process whose own device-form arguments are wrong (lengths, a stream of
//! another device) takes part with no keys and returns its error. After a change (insert,
//! upsert, `insert_or_find`, removal) every rank's outcome is exchanged before the answers
//! travel, so that when any rank's shard failed every rank takes its shard back and every
//! process returns an error (its own, or `OutOfDeviceMemory` or `Device` naming the
//! failure elsewhere). Any other failure on one process (running out of memory while
//! splitting, exchanging or looking up; a host form's slices of unequal lengths, refused
//! before any batch) leaves the others waiting in NCCL: a job should then end all its
//! processes.
//!
//! ## After an error
//!
//! A batch that fails leaves **every shard holding exactly what it held before**: before
//! an owner's insert, upsert or removal runs on a part, the shard's own `get_async` logs
//! what the part's keys held (a flag and a value a key, on the shard's GPU); when any
//! later step fails (another part's change, running out of memory on any GPU, the
//! exchange of the answers), each logged part is taken back with the contract's verbs
//! ([`UndoPlan`]), the last reached first, and the batch's own error returns. Lookups
//! change nothing. What cannot be undone: a failure that shows only when a stream is
//! waited on (a kernel that faults), or an undo that fails in turn (the GPU lost); the
//! shard may then hold part of the batch. A [`Table::clear`] that fails leaves the shards
//! before it cleared. NCCL failures are errors of kind `Device` (the call and NCCL's code
//! are written to standard error, since the core error has no words for them); a stream
//! of a GPU the table does not span is `InvalidInput`.
//!
//! ## NCCL
//!
//! cudarc opens NCCL at run time, so building needs none. A communicator of more than one
//! GPU, and any made by [`Comm::from_rank`] or [`CommId::new`], needs `libnccl.so.2` on
//! the loader path (for instance from the `nvidia-nccl-cu13` Python package: its
//! `site-packages/nvidia/nccl/lib` on `LD_LIBRARY_PATH`); [`nccl_available`] says whether
//! it loads, and those calls fail with an error saying so rather than panicking. This
//! crate never creates NVLink multicast objects; runs over several GPUs should set
//! `NCCL_NVLS_ENABLE=0` (docs/gpu-testing.md).
//!
//! ## Left for later
//!
//! - **Sets and multimaps of shards**: only maps so far.
//! - **Several local ranks in a process of many** (a process driving two GPUs of a job of
//!   several processes): [`Comm::from_rank`] makes one rank; the exchange already takes
//!   any set of local ranks.
//! - **Waits**: each exchange reads its lengths back on every receiver (one wait a rank
//!   an exchange, two exchanges a direction), and the partition reads its counts (one
//!   wait); a batch from host slices of many chunks pays these a chunk.
//! - **Measurements**: the W1 scaling benchmark (`gpuhash-bench shard`: weak scaling at
//!   n pairs a GPU, strong scaling at 4n in all, 1 to 8 GPUs, against linear scaling and
//!   against the exchange's bound from the scatter bandwidth [`scatter_bandwidth`]
//!   measures) is written but has not run yet; it starts every batch on one GPU, so its
//!   partition and outgoing links bound it. Several processes, each the source of its
//!   own batch, have not been measured either.
//!
//! [`Table`]: gpuhash_core::table::Table
//! [`Map`]: gpuhash_core::table::Map
//! [`CombiningMap`]: gpuhash_core::table::CombiningMap
//! [`Table::clear`]: gpuhash_core::table::Table::clear
//! [`Table::host_insert_chunk`]: gpuhash_core::table::Table::host_insert_chunk
//! [`Table::host_lookup_chunk`]: gpuhash_core::table::Table::host_lookup_chunk
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
pub use table::{OWNER_SEED, ShardedMap, ShardedTable, owners};
