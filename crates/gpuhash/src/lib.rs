//! # gpuhash
//!
//! GPU hash tables for Rust. This facade re-exports the crates of the workspace; each
//! table also stands alone as a crate of its own:
//!
//! | crate | holds |
//! | --- | --- |
//! | [`core`] (`gpuhash-core`) | device, streams, buffers, kernel loading, errors, hashes, workload |
//! | [`cuckoo`] (`gpuhash-cuckoo`, feature `cuckoo`, on by default) | DyHash: dynamic cuckoo subtables resized one at a time |
//!
//! The other tables (slab hash, out-of-core swap, hyperspace) join as their crates land.
//!
//! ```no_run
//! use gpuhash::prelude::*;
//! # fn main() -> gpuhash::Result<()> {
//! let device = Device::default()?;
//! println!("{} with {} SMs", device.properties().name, device.properties().multiprocessors);
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]

pub use gpuhash_core as core;
pub use gpuhash_core::{Error, Result};
#[cfg(feature = "cuckoo")]
pub use gpuhash_cuckoo as cuckoo;

/// The types most programs use.
pub mod prelude {
    pub use gpuhash_core::{Device, DeviceBuffer, Error, EventTimer, Result, Stream};
    #[cfg(feature = "cuckoo")]
    pub use gpuhash_cuckoo::{CuckooOptions, CuckooTable};
}
