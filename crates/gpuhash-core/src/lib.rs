//! # gpuhash-core
//!
//! The ground every gpuhash table stands on: a [`Device`] and its [`Stream`]s, typed
//! device memory ([`DeviceBuffer`]), pinned host memory and copies to and from it that run
//! at the bus's speed ([`pinned`]; the caller's own memory pinned in place is a
//! [`HostRegistered`]), event timing ([`EventTimer`]), loading and launching
//! the CUDA kernels each crate embeds ([`launch`]) and compiling the caller's own at run time
//! against a table's headers ([`nvrtc`]), one [`Error`] type, and the pieces all
//! tables share: the [`table`] contract (the traits every table implements, their host forms
//! staged through pinned memory by [`staging`]), table [`image`]s, the [`hash`] functions, the
//! standard benchmark [`workload`], and [`last_copy`], which finds the last copy of each key
//! in a batch.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::workload::{self, KeySet};
//! use gpuhash_core::{Device, DeviceBuffer};
//!
//! # fn main() -> gpuhash_core::Result<()> {
//! let device = Device::default()?;
//! let stream = device.new_stream()?;
//! let mut keys = DeviceBuffer::<u32>::zeroed(&stream, 1 << 20)?;
//! let mut values = DeviceBuffer::<u32>::zeroed(&stream, 1 << 20)?;
//! workload::generate(&stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
//! let keys = keys.to_host(&stream)?;
//! assert_eq!(keys[5], KeySet::Hits.key(5));
//! # Ok(()) }
//! ```
//!
//! The host half runs anywhere:
//!
//! ```
//! use gpuhash_core::hash::{fmix32, Universal32};
//! let bucket = Universal32::from_seed(42, 1024)?.hash(fmix32(7));
//! assert!(bucket < 1024);
//! # Ok::<(), gpuhash_core::Error>(())
//! ```
//!
//! ## Structure
//!
//! Three layers, as in cudarc:
//! - CUDA C in `cuda-src/`, compiled by `cargo xtask build-kernels` into fat binaries
//!   (sm_90 machine code plus compute_75 PTX) that each crate embeds, so building needs no
//!   CUDA toolkit. Kernel parameter structs live in `cuda-src/include/gpuhash/*_layouts.h`;
//!   bindgen turns them into each crate's `layouts` module.
//! - [`launch`]: [`KernelImage`]s loaded once per device, [`Kernel<P>`] typed by its
//!   parameter struct, and the one `unsafe` launch call.
//! - Safe types: [`Device`], [`Stream`], [`DeviceBuffer`], [`PinnedBuffer`] and its
//!   [`PinnedPool`], the caller's own memory pinned in place ([`HostRegistered`], from
//!   [`Device::register`]), and the tables of higher crates.
//!
//! cudarc is loaded at run time, so a binary built here runs, and fails cleanly, on a
//! machine without a GPU: [`Device::new`] returns [`Error::NoDriver`] or
//! [`Error::NoDevice`] instead of panicking.
//!
//! ## Features
#![doc = document_features::document_features!()]

mod buffer;
mod device;
mod error;
pub mod hash;
pub mod hits;
pub mod image;
pub mod last_copy;
pub mod launch;
pub mod layouts;
pub mod nvrtc;
pub mod pinned;
pub mod scan;
pub mod staging;
mod stream;
pub mod table;
mod timer;
pub mod workload;

pub use buffer::{DeviceAddress, DeviceBuffer};
pub use device::{Device, DeviceProperties, LentStream};
pub use error::{Error, Result};
pub use launch::{Kernel, KernelImage, LaunchShape};
pub use pinned::{HostRegistered, MappedAddress, PinnedBuffer, PinnedPool, PooledPinned};
pub use stream::Stream;
pub use timer::EventTimer;
