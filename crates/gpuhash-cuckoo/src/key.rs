//! The kernels compiled for each key width, and what the table derives from a key type.

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
pub(crate) struct KeyKernels {
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

/// What the table needs of a key type beyond [`Key`], derived from [`Key::WORDS`] so that
/// every key type of the contract has it: users name [`Key`] only, and code generic over
/// `K: Key` makes a `CuckooTable<K, V>` without a bound of this crate's own.
pub(crate) trait KeyLayout: Key {
    /// Keys in one 128-byte bucket: 32 for u32, 16 for u64.
    const SLOTS: u64 = 32 / Self::WORDS as u64;

    /// The key value that marks an empty slot (all ones); the table keeps its pair apart.
    fn reserved() -> Self {
        let mut key = Self::zeroed();
        bytemuck::bytes_of_mut(&mut key).fill(0xff);
        key
    }

    /// The kernels compiled for this key width.
    fn kernels() -> &'static KeyKernels {
        if Self::WORDS == 1 {
            &U32_KERNELS
        } else {
            &U64_KERNELS
        }
    }
}

impl<K: Key> KeyLayout for K {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_key_width() {
        assert_eq!((u32::SLOTS, u64::SLOTS), (32, 16));
        assert_eq!((u32::reserved(), u64::reserved()), (u32::MAX, u64::MAX));
        assert!(std::ptr::eq(u32::kernels(), &U32_KERNELS));
        assert!(std::ptr::eq(u64::kernels(), &U64_KERNELS));
    }
}
