//! # gpuhash-hyperspace
//!
//! GHSH hyperspace hashing on the GPU (docs/papers.md): tuples `(key, A1..Ap, value)`
//! searched by key or by any attribute.
//!
//! ## Options
#![doc = document_features::document_features!()]

mod build;
mod error;
mod grace;
mod index;
mod launch;
#[allow(
    dead_code,
    reason = "generated from the kernels' header: not every constant is used"
)]
mod layouts;
mod options;
mod query;
mod search;
pub mod shape;
mod space;
mod tuples;

pub use error::{HyperspaceError, Result};
pub use index::{HyperspaceIndex, InsertStatus};
pub use options::{HyperspaceOptions, SearchStrategy, Subspaces};
pub use query::{DeviceMatches, Matches, Query};
pub use tuples::{DeviceTuples, Tuple, TupleBatch, Tuples, is_reserved_key};
