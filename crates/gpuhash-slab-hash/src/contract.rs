//! What the three tables share in the same words: construction, `flush`, and the
//! contract's [`gpuhash_core::table::Table`] and [`gpuhash_core::image::Image`], for a
//! struct whose `table` field is its [`crate::table::SlabTable`]; and the pair export the
//! map and the multimap share.

use crate::shape::Shape;
use crate::table::SlabTable;

/// A table type over a [`SlabTable`].
pub(crate) trait OverSlabs: Sized {
    /// What its slabs hold.
    fn shape() -> Shape;
    /// Its engine.
    fn table(&self) -> &SlabTable;
    /// The table over `table`.
    fn over(table: SlabTable) -> Self;
}

/// Implements [`OverSlabs`] (slabs of `$shape`), construction, `flush`, `Table` and `Image`
/// for `$ty` with generics `[$($generics)*]`, whose key type is `K`, fields `table` and
/// `types`; `$entries` names what it holds.
macro_rules! table_contract {
    ([$($generics:tt)*] $ty:ty, $entries:literal, $shape:expr) => {
        impl<$($generics)*> crate::contract::OverSlabs for $ty {
            fn shape() -> crate::shape::Shape {
                $shape
            }

            fn table(&self) -> &crate::table::SlabTable {
                &self.table
            }

            fn over(table: crate::table::SlabTable) -> Self {
                Self {
                    table,
                    types: std::marker::PhantomData,
                }
            }
        }

        impl<$($generics)*> $ty {
            #[doc = concat!("An empty table of ", $entries, " on `device`; waits for its memory.")]
            pub fn new(
                device: &gpuhash_core::Device,
                options: crate::SlabHashOptions,
            ) -> crate::Result<Self> {
                let shape = <Self as crate::contract::OverSlabs>::shape();
                let table = crate::table::SlabTable::new(device, shape, options)?;
                Ok(<Self as crate::contract::OverSlabs>::over(table))
            }

            #[doc = concat!("An empty table sized for `expected_entries` ", $entries, ", the other options as [`crate::SlabHashOptions::default`].")]
            pub fn with_capacity(
                device: &gpuhash_core::Device,
                expected_entries: usize,
            ) -> crate::Result<Self> {
                Self::new(device, crate::SlabHashOptions::with_capacity(expected_entries as u64))
            }

            /// Compacts every bucket's list and returns the slabs it empties to the
            /// allocator. Inserts do this on their own when they need room and removals
            /// left tombstones, so memory holds steady under churn without this call; it is
            /// for a full compaction at a time of the caller's choosing. Takes `&self`: it
            /// waits for the batches queued before it (on any stream), and batches queued
            /// by other threads meanwhile wait for it.
            pub fn flush(&self) -> crate::Result<()> {
                crate::contract::OverSlabs::table(self).flush()
            }
        }

        impl<$($generics)*> gpuhash_core::table::Table for $ty {
            type Key = K;
            type Error = crate::SlabHashError;

            fn device(&self) -> &gpuhash_core::Device {
                &crate::contract::OverSlabs::table(self).device
            }

            fn len_on(&self, stream: &gpuhash_core::Stream) -> crate::Result<usize> {
                crate::contract::OverSlabs::table(self).len(stream)
            }

            fn memory_on(
                &self,
                stream: &gpuhash_core::Stream,
            ) -> crate::Result<gpuhash_core::table::MemoryUsage> {
                crate::contract::OverSlabs::table(self).memory(stream)
            }

            /// Removes every entry, keeping the memory: after the work queued on `stream`,
            /// and, like a compaction, after every kernel queued on the device before it;
            /// batches queued by other threads meanwhile wait for it.
            fn clear_on(&self, stream: &gpuhash_core::Stream) -> crate::Result<()> {
                crate::contract::OverSlabs::table(self).clear(stream)
            }
        }

        impl<$($generics)*> gpuhash_core::image::Image for $ty {
            fn to_image(&self) -> crate::Result<gpuhash_core::image::TableImage> {
                crate::contract::OverSlabs::table(self).to_image()
            }

            fn from_image(
                device: &gpuhash_core::Device,
                image: &gpuhash_core::image::TableImage,
            ) -> crate::Result<Self> {
                let shape = <Self as crate::contract::OverSlabs>::shape();
                let table = crate::table::SlabTable::from_image(device, shape, image)?;
                Ok(<Self as crate::contract::OverSlabs>::over(table))
            }
        }
    };
}
pub(crate) use table_contract;

/// The pair export of a table over slabs holding values: `export_on` and `export_into_on`,
/// to stand inside its [`gpuhash_core::table::Map`] or [`gpuhash_core::table::MultiMap`]
/// impl (both traits ask for them in the same words), whose key and value types are `K`
/// and `V`.
macro_rules! pair_export {
    () => {
        fn export_on(
            &self,
            stream: &gpuhash_core::Stream,
        ) -> crate::Result<gpuhash_core::table::DevicePairs<K, V>> {
            let (keys, values) = self.table.export(stream)?;
            Ok(gpuhash_core::table::DevicePairs { keys, values })
        }

        /// Writes the caller's buffers straight: the export pass places the pairs there.
        fn export_into_on(
            &self,
            stream: &gpuhash_core::Stream,
            keys: &mut gpuhash_core::DeviceBuffer<K>,
            values: &mut gpuhash_core::DeviceBuffer<V>,
        ) -> crate::Result<usize> {
            let outputs = crate::scan::ExportOutputs {
                keys,
                values: Some(values),
            };
            self.table.export_into(stream, outputs)
        }
    };
}
pub(crate) use pair_export;
