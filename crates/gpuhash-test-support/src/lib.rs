//! # gpuhash-test-support
//!
//! What the GPU tests of every gpuhash table share (dev-only, never published):
//!
//! - [`device`] and [`stream`], opened once per process; [`shared_memory`] and
//!   [`all_memory`], the guards that keep a test that fills the device's memory
//!   ([`fill_device_except`]) apart from the others: a thread that asks for the whole
//!   device while it holds a guard panics at once, and a wait for a holder that does not
//!   let go panics after 10 minutes, so a misused or hung guard fails a test instead of
//!   hanging the binary.
//! - Inputs: [`adversarial_keys`] (every word a table reserves, its neighbours, zero, keys
//!   equal in their low or high bits, hashed keys), [`value_of`] (the one value stored
//!   under a key, never all zeros or all ones, at any width), and [`SeededRng`].
//! - The conformance suite of the table contract ([`gpuhash_core::table`]):
//!   [`map_conformance`], [`set_conformance`] and [`multimap_conformance`] run the same
//!   checks on any table through a constructor, each against a host model, through the
//!   host forms and the device forms, and the `_into` forms into reused and registered
//!   caller buffers ([`PageAlone`]); [`image_round_trip`] checks a table's images;
//!   [`combining_conformance`] checks the upserts and `insert_or_find` of a
//!   [`gpuhash_core::table::CombiningMap`] against a `HashMap` fold. Host inserts and
//!   upserts of many chunks ([`gpuhash_core::table::insert_in_chunks`]) are checked
//!   through a wrapper that cuts them into chunks of a few thousand keys and can make a
//!   chosen chunk fail; [`last_copy_in_chunks`] checks that a map of
//!   `DuplicateKeys::LastCopy` keeps each key's last copy across chunks.
//! - [`exports_under_churn`]: every export form, again and again, while two threads
//!   remove and reinsert keys on their own streams; no answer may hold a pair nobody
//!   inserted, a value nobody wrote, or a key twice.
//! - [`batch_cost`], the fixed cost of a batch of 1024 keys, for benchmarks.
//!
//! ## Example
//!
//! A table crate's GPU test, with its own constructor:
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_core::image::Image;
//! use gpuhash_core::table::Map;
//! use gpuhash_test_support::{image_round_trip, map_conformance};
//!
//! fn a_map_conforms<M: Map + Image>(make: impl Fn(&Device, usize) -> Result<M, M::Error> + Copy) {
//!     map_conformance(make);
//!     image_round_trip(make);
//! }
//! ```
//!
//! Called from a test marked `#[ignore = "needs a CUDA device"]` as
//! `a_map_conforms(|device, capacity| SomeMap::<u32, u64>::with_capacity(device, capacity))`.

mod batch_cost;
mod caller_buffers;
mod chunked;
mod churn;
mod combining;
mod conformance;
mod export_into;
mod gpu;
mod images;
mod inputs;
mod memory_lock;
mod model;
mod shape;
mod small_chunks;
mod steps;
mod view_probe;
mod view_scenario;

pub use batch_cost::{BATCH_KEYS, BatchCost, batch_cost};
pub use caller_buffers::PageAlone;
pub use chunked::last_copy_in_chunks;
pub use churn::exports_under_churn;
pub use combining::combining_conformance;
pub use conformance::{map_conformance, multimap_conformance, set_conformance};
pub use gpu::{all_memory, device, fill_device_except, shared_memory, stream};
pub use images::{damaged_images, foreign_headers, image_round_trip};
pub use inputs::{SeededRng, adversarial_keys, key_from_bits, value_in_round, value_of, values_of};
pub use memory_lock::MemoryGuard;
pub use model::Rule;
pub use shape::{ExportedInto, MapShape, MultiMapShape, SetShape, Shape, Via};
pub use view_probe::{assert_includes_are_shipped, probe_through_view};
pub use view_scenario::{ViewSizes, view_scenario};
