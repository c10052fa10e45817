//! # gpuhash
//!
//! GPU hash tables for Rust. This facade re-exports the crates of the workspace; each
//! table also stands alone as a crate of its own:
//!
//! | crate | holds |
//! | --- | --- |
//! | [`core`] (`gpuhash-core`) | device, streams, buffers, kernel loading, errors, hashes, workload |
//! | [`slab_alloc`] (`gpuhash-slab-alloc`, feature `slab-alloc`) | SlabAlloc: warp-synchronous allocator of 128-byte slabs |
//! | [`slab_list`] (`gpuhash-slab-list`, feature `slab-list`) | slab lists: concurrent lists of 128-byte slabs read by one warp, the slab hash's buckets |
//! | [`slab_hash`] (`gpuhash-slab-hash`, feature `slab-hash`, on by default) | slab hash map, set and multimap: dynamic, fully concurrent, chained |
//! | [`cuckoo`] (`gpuhash-cuckoo`, feature `cuckoo`, on by default) | DyHash: dynamic cuckoo subtables resized one at a time |
//! | [`swap`] (`gpuhash-swap`, feature `swap`, on by default) | Starfish: a map larger than GPU memory, child tables paged between device and host |
//! | `shard` (`gpuhash-shard`, feature `shard`) | a map sharded over GPUs, of one process or one rank a process over several hosts: batches split by owner on the GPU, exchanged through NCCL |
//! | `hyperspace` (`gpuhash-hyperspace`, feature `hyperspace`) | GHSH: tuples `(key, A1..Ap, value)` searched by key or by any conjunction of attributes |
//!
//! Every crate's error converts into [`Error`], so one `?` serves them all:
//!
//! ```no_run
//! use gpuhash::prelude::*;
//! # fn main() -> gpuhash::Result<()> {
//! let device = Device::default()?;
//! println!("{} with {} SMs", device.properties().name, device.properties().multiprocessors);
//! let map = SlabHashMap::<u64, u32>::new(&device, SlabHashOptions::with_capacity(1 << 20))?;
//! map.insert(&[1, u64::MAX], &[10, 20])?;
//! assert_eq!(map.get(&[u64::MAX, 2])?, vec![Some(20), None]);
//! # Ok(()) }
//! ```
//!
//! ## Features
#![doc = document_features::document_features!()]
#![deny(unsafe_code)]

mod error;

#[doc = include_str!("../docs/choosing-a-table.md")]
pub mod choosing_a_table {}

pub use error::{Error, Result};
pub use gpuhash_core as core;
#[cfg(feature = "cuckoo")]
pub use gpuhash_cuckoo as cuckoo;
#[cfg(feature = "hyperspace")]
pub use gpuhash_hyperspace as hyperspace;
#[cfg(feature = "shard")]
pub use gpuhash_shard as shard;
#[cfg(feature = "slab-alloc")]
pub use gpuhash_slab_alloc as slab_alloc;
#[cfg(feature = "slab-hash")]
pub use gpuhash_slab_hash as slab_hash;
#[cfg(feature = "slab-list")]
pub use gpuhash_slab_list as slab_list;
#[cfg(feature = "swap")]
pub use gpuhash_swap as swap;

/// The types most programs use.
pub mod prelude {
    pub use crate::{Error, Result};
    pub use gpuhash_core::image::Image;
    pub use gpuhash_core::last_copy::DuplicateKeys;
    pub use gpuhash_core::table::{
        Combine, CombiningMap, ErrorKind, Map, MultiMap, Set, Table, TableError,
    };
    pub use gpuhash_core::{Device, DeviceBuffer, EventTimer, HostRegistered, Stream};
    #[cfg(feature = "cuckoo")]
    pub use gpuhash_cuckoo::{CuckooOptions, CuckooTable};
    #[cfg(feature = "hyperspace")]
    pub use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Query};
    #[cfg(feature = "slab-hash")]
    pub use gpuhash_slab_hash::{SlabHashMap, SlabHashMultiMap, SlabHashOptions, SlabHashSet};
    #[cfg(feature = "swap")]
    pub use gpuhash_swap::{SwapMap, SwapOptions, SwapTable};
}
