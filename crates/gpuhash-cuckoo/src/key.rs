//! Key types a table accepts and the kernels compiled for each.

use std::fmt::Debug;
use std::hash::Hash;

use gpuhash_core::launch::{Kernel, KernelImage, KernelParams};
use gpuhash_core::table::Key;

use crate::layouts::{
    GhCuckooExportParams, GhCuckooFillParams, GhCuckooFindParams, GhCuckooInsertParams,
    GhCuckooPartitionParams, GhCuckooPlaceParams, GhCuckooRemoveParams, GhCuckooResizeParams,
    GhCuckooUpdateParams,
};

static TABLE_IMAGE: KernelImage = gpuhash_core::kernel_image!("table");

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take, holding raw device
// pointers and integers only.
unsafe impl KernelParams for GhCuckooFindParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooUpdateParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooPlaceParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooInsertParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooRemoveParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooResizeParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooExportParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooFillParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooPartitionParams {}

pub(crate) static FILL: Kernel<GhCuckooFillParams> = Kernel::new(&TABLE_IMAGE, "gh_cuckoo_fill");
/// The middle pass of sorting a batch by partition, the same for every key width.
pub(crate) static PARTITION_SCAN: Kernel<GhCuckooPartitionParams> =
    Kernel::new(&TABLE_IMAGE, "gh_cuckoo_partition_scan");

/// The kernels of one key width.
#[derive(Debug)]
pub struct KeyKernels {
    pub(crate) find: Kernel<GhCuckooFindParams>,
    pub(crate) update: Kernel<GhCuckooUpdateParams>,
    /// The lock-free first pass of an insert batch.
    pub(crate) place: Kernel<GhCuckooPlaceParams>,
    pub(crate) insert: Kernel<GhCuckooInsertParams>,
    /// The insert kernel for one-word values, which needs fewer registers.
    pub(crate) insert1: Kernel<GhCuckooInsertParams>,
    pub(crate) remove: Kernel<GhCuckooRemoveParams>,
    pub(crate) resize: Kernel<GhCuckooResizeParams>,
    pub(crate) export: Kernel<GhCuckooExportParams>,
    /// The first and last passes of sorting an insert batch by partition.
    pub(crate) partition_count: Kernel<GhCuckooPartitionParams>,
    pub(crate) partition_scatter: Kernel<GhCuckooPartitionParams>,
}

macro_rules! key_kernels {
    ($name:ident, $suffix:literal) => {
        static $name: KeyKernels = KeyKernels {
            find: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_find_", $suffix)),
            update: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_update_", $suffix)),
            place: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_place_", $suffix)),
            insert: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_insert_", $suffix)),
            insert1: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_insert1_", $suffix)),
            remove: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_remove_", $suffix)),
            resize: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_resize_", $suffix)),
            export: Kernel::new(&TABLE_IMAGE, concat!("gh_cuckoo_export_", $suffix)),
            partition_count: Kernel::new(
                &TABLE_IMAGE,
                concat!("gh_cuckoo_partition_count_", $suffix),
            ),
            partition_scatter: Kernel::new(
                &TABLE_IMAGE,
                concat!("gh_cuckoo_partition_scatter_", $suffix),
            ),
        };
    };
}

key_kernels!(U32_KERNELS, "u32");
key_kernels!(U64_KERNELS, "u64");

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// A key type of a [`CuckooTable`](crate::CuckooTable): `u32` or `u64`. Every value is a
/// valid key; the all-ones value, which marks empty slots on the device, is kept in a side
/// slot of its own.
pub trait CuckooKey: Key + Eq + Hash + Debug + Send + Sync + sealed::Sealed {
    /// The key value that marks an empty slot (all ones); the table keeps its pair apart.
    const RESERVED: Self;
    /// Keys in one 128-byte bucket: 32 for u32, 16 for u64.
    const SLOTS: u64;
    #[doc(hidden)]
    fn kernels() -> &'static KeyKernels;
}

impl CuckooKey for u32 {
    const RESERVED: Self = u32::MAX;
    const SLOTS: u64 = 32;
    fn kernels() -> &'static KeyKernels {
        &U32_KERNELS
    }
}

impl CuckooKey for u64 {
    const RESERVED: Self = u64::MAX;
    const SLOTS: u64 = 16;
    fn kernels() -> &'static KeyKernels {
        &U64_KERNELS
    }
}
