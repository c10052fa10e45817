//! # gpuhash-slab-alloc
//!
//! SlabAlloc, the warp-synchronous allocator of the SlabHash paper (Ashkiani, Farach-Colton, Owens,
//! *A Dynamic Hash Table for the GPU*, IPDPS 2018, section V), on which the slab hash and the
//! hyperspace index build.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::{Device, DeviceBuffer};
//! use gpuhash_slab_alloc::{SlabAlloc, SlabAllocOptions, INVALID_SLAB};
//!
//! # fn main() -> gpuhash_slab_alloc::Result<()> {
//! let device = Device::default()?;
//! let stream = device.new_stream()?;
//! let mut alloc = SlabAlloc::new(&stream, SlabAllocOptions { initial_slabs: 1024, ..Default::default() })?;
//! let mut slabs = DeviceBuffer::<u32>::zeroed(&stream, 100_000)?;
//! alloc.allocate(&stream, &mut slabs)?; // grows from 1024 slabs as needed
//! assert_eq!(alloc.slabs_in_use(&stream)?, 100_000);
//! assert!(slabs.to_host(&stream)?.iter().all(|&a| a != INVALID_SLAB));
//! alloc.deallocate(&stream, &slabs)?;
//! assert_eq!(alloc.slabs_in_use(&stream)?, 0);
//! # Ok(()) }
//! ```
//!
//! Addresses are plain data on the host too:
//!
//! ```
//! use gpuhash_slab_alloc::SlabAddress;
//! let address = SlabAddress { super_block: 1, memory_block: 2, slab: 3 };
//! assert_eq!(SlabAddress::decode(address.encode().unwrap()), Some(address));
//! ```
//!
//! ## Options
//!
//! Set through [`SlabAllocOptions`]: `variant` (light: one array, decoding one multiply-add;
//! regular: super blocks that grow) and `initial_slabs`.
//!
//! ## Structure
//!
//! Memory comes in **slabs** of 128 bytes, one 4-byte word for each lane of a warp. 1024
//! slabs make a **memory block**, whose 1024 in-use bits are a bitmap of 32 words. Blocks
//! live in **super blocks**, each one device allocation. A slab's 32-bit address holds its
//! super block (8 bits), memory block (14 bits) and slab (10 bits) ([`SlabAddress`]); the
//! **light** variant ([`Variant::Light`]) keeps all blocks in one array and addresses slabs
//! by index, so decoding is one multiply-add.
//!
//! On the device (`cuda-src/slab_alloc/slab_alloc.cuh`, included by other crates' kernels)
//! each warp owns a resident memory block chosen by hashing its warp index, holding one
//! bitmap word per lane in registers. `WarpAllocator::allocate()`, called by all 32 lanes,
//! ballots for a lane with a clear bit, which claims it with one `atomicOr`; a full
//! resident block makes the warp hash to another. After 64 full blocks in a row the warp
//! returns the invalid address and raises the launch's [`Exhaustion`] flag, the host grows
//! the allocator ([`SlabAlloc::grow`], which doubles the slabs reserved) and the caller
//! retries what failed ([`Fill::Invalid`]). [`SlabAlloc::allocate`] does that loop for
//! bulk allocation. `deallocate(address)` clears the slab's bit.
//!
//! The allocator starts with what it is asked for ([`SlabAllocOptions::initial_slabs`]),
//! never with most of the GPU, and frees everything on drop.
//!
//! ## Features
#![doc = document_features::document_features!()]

mod address;
mod alloc;
pub mod baseline;
mod error;
pub mod growth;
mod launch;
pub mod layouts;

pub use address::{INVALID_SLAB, SlabAddress};
pub use alloc::{
    AllocContext, Claim, Exhaustion, Fill, SlabAlloc, SlabAllocOptions, SlabDecoder, Variant,
};
pub use error::{Result, SlabAllocError};
