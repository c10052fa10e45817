//! # gpuhash-slab-list
//!
//! Slab lists, the linked lists of the SlabHash paper (Ashkiani, Farach-Colton, Owens, *A Dynamic
//! Hash Table for the GPU*, IPDPS 2018, section IV), on which the slab hash builds its
//! buckets: concurrent lists whose nodes are 128-byte slabs that one warp reads together.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_slab_list::{SlabLists, SlabListsOptions};
//!
//! # fn main() -> gpuhash_slab_list::Result<()> {
//! let device = Device::default()?;
//! let stream = device.new_stream()?;
//! let lists = SlabLists::new(&device, 4, SlabListsOptions::default())?;
//! lists.append(&stream, &[0, 2, 2, 2], &[10, 20, 21, 22])?;
//! lists.append(&stream, &[0], &[11])?; // after 10 in list 0
//! assert_eq!(lists.counts(&stream)?, vec![2, 0, 3, 0]);
//! assert_eq!(lists.remove(&stream, &[2], &[21])?, vec![1]);
//! let rows = lists.collect(&stream)?;
//! assert_eq!(rows.offsets.to_host(&stream)?, vec![0, 2, 2, 4, 4]);
//! let values = rows.values.to_host(&stream)?;
//! assert_eq!(values[..2], [10, 11]);
//! assert!(values[2..] == [20, 22] || values[2..] == [22, 20]);
//! lists.clear(&stream)?;
//! assert_eq!(lists.slabs_in_use(&stream)?, 0);
//! # Ok(()) }
//! ```
//!
//! Which words a list can hold is plain host logic:
//!
//! ```
//! assert!(gpuhash_slab_list::is_reserved(u32::MAX));
//! assert!(!gpuhash_slab_list::is_reserved(7));
//! ```
//!
//! ## Options
//!
//! Set through [`SlabListsOptions`]: the allocator's options (`alloc`) and `max_slabs`, a limit
//! past which appends are refused.
//!
//! ## Structure
//!
//! A **slab** is 32 words of 4 bytes, one for each lane of a warp. A list is a chain of
//! slabs: lanes 0..30 hold data, lane 31 the 32-bit [SlabAlloc](gpuhash_slab_alloc)
//! address of the next slab, all ones at the tail. The **head** slabs of a set of lists
//! lie one after another in one array, so finding list i costs no read; every other slab
//! comes from the allocator. A word never written is all ones.
//!
//! The device building blocks live in `cuda-src/slab_list/slab_list.cuh`, which other
//! crates' kernels include (the slab hash's do): the head of list i, reading a slab with
//! one word a lane from L2, following the next address, walking a list with a visitor,
//! finding the first lane that holds something with one ballot, **appending a slab** to
//! a tail with a compare-and-swap on its next address (the warp that loses gives its slab
//! back), and freeing a chain. All 32 lanes of a warp call them together.
//!
//! This crate's own kernels (`cuda-src/slab_list/slab_list.cu`) keep plain lists of
//! 32-bit words with them, through [`SlabLists`]:
//!
//! - **append**, warp-cooperative as the SlabHash paper's inserts: the warp serves its lanes' words
//!   one after another, each walk shared by all 32 lanes, and a word takes the first empty
//!   word of its list with a compare-and-swap. A list holds an earlier batch's words
//!   before a later batch's; within a batch, in any order.
//! - **remove** swaps every copy of a word for a removed marker (the two reserved words,
//!   see [`is_reserved`], are never data); holes stay until [`SlabLists::clear`].
//! - **count** and **collect** walk every list with one warp, the latter into compressed
//!   rows ([`gpuhash_core::table::DeviceRows`]) like a multimap's `get_all`.
//! - **free** gives every slab past the heads back to the allocator.
//!
//! Before an append the host reserves the most slabs the batch may link, growing the
//! allocator while nothing runs, so a batch either fits or appends nothing; see
//! [`SlabLists::append`] for the rare device-side exhaustion. The reservation ([`room`]) is
//! public: the slab hash tables reserve room for their inserts with it.
//!
//! ## Features
#![doc = document_features::document_features!()]

mod batch;
mod error;
mod launch;
pub mod layouts;
mod lists;
pub mod room;

pub use batch::is_reserved;
pub use error::{Result, SlabListError};
pub use lists::{SlabLists, SlabListsOptions};
