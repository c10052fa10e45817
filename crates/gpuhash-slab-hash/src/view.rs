//! The slab hash map probed from the caller's own kernels: the map's device view, its
//! headers, and a run-time compile with NVRTC.
//!
//! As DyHash's (`gpuhash_cuckoo::view`), so that a join, a filter or a sum probes the map
//! inside one fused kernel of the caller's:
//!
//! - The **view**: [`GhSlabView`], a plain `#[repr(C)]` struct (the bucket heads, the hash,
//!   the slab allocator's addresses, the key and value widths), which
//!   [`SlabHashMap::device_view`](crate::SlabHashMap::device_view) lends as a
//!   [`DeviceView`] guard. Pass [`DeviceView::raw`] by value to the kernel. It stays valid
//!   for the kernels queued on [`DeviceView::stream`] until the guard is dropped: the map
//!   neither grows, compacts, clears nor loads an image meanwhile (those wait for the
//!   guard, then for the device). Batches of other threads still run beside those kernels,
//!   as they run beside a `get`: a find sees a concurrent insert or remove or not.
//! - The **headers** ([`HEADERS`]): `gpuhash/slab_hash_view.cuh`, whose
//!   `gh_slab_find_u32(const GhSlabView *, uint32_t key, uint32_t *value_out)` and
//!   `gh_slab_find_u64` find a key from a single thread (no warp-wide call), walking its
//!   bucket's slabs as the map's own lookups do, so they answer what
//!   [`Map::get`](gpuhash_core::table::Map::get) answers; with the headers it includes
//!   (the layouts, `gpuhash/hash.cuh`, `gpuhash/warp.cuh`, `slab_alloc/slab_alloc.cuh`) and a
//!   `stdint.h` for NVRTC.
//! - The **compile**: `HEADERS.compile_ptx(&device, source)`
//!   ([`Headers::compile_ptx`]) compiles a kernel source against them with NVRTC.
//!
//! Maps only: sets and multimaps have no view. A find through `gh_slab_find_u32` on a
//! view of a map of `u64` keys (or the other way round) finds nothing.
//!
//! ## Example
//!
//! ```no_run
//! use cudarc::driver::{LaunchConfig, PushKernelArg};
//! use gpuhash_core::table::Map;
//! use gpuhash_core::{Device, DeviceBuffer};
//! use gpuhash_slab_hash::{SlabHashMap, view};
//!
//! const SOURCE: &str = r#"
//! #include "gpuhash/slab_hash_view.cuh"
//! extern "C" __global__ void count_hits(GhSlabView view, const uint32_t *keys,
//!                                       unsigned long long n, unsigned long long *hits) {
//!     for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
//!          i += gridDim.x * blockDim.x) {
//!         if (gh_slab_find_u32(&view, keys[i], nullptr)) atomicAdd(hits, 1ull);
//!     }
//! }
//! "#;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::default()?;
//! let map = SlabHashMap::<u32, u32>::with_capacity(&device, 1024)?;
//! map.insert(&[1, 2, 3], &[10, 20, 30])?;
//! let ptx = view::HEADERS.compile_ptx(&device, SOURCE)?;
//! let stream = device.new_stream()?;
//! let module = stream.cuda_stream().context().load_module(ptx)?;
//! let kernel = module.load_function("count_hits")?;
//! let keys = DeviceBuffer::from_host(&stream, &[1u32, 5, 3])?;
//! let mut hits = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
//! {
//!     let view = map.device_view(&stream)?;
//!     let (keys_at, hits_at) = (keys.address(&stream), hits.address_mut(&stream));
//!     let n = keys.len() as u64;
//!     let mut launch = stream.cuda_stream().launch_builder(&kernel);
//!     launch.arg(view.raw()).arg(&keys_at.address).arg(&n).arg(&hits_at.address);
//!     // SAFETY: the kernel reads `n` keys and writes one counter, both allocated here,
//!     // and reads the map through a view that lives until the launch is queued.
//!     unsafe { launch.launch(LaunchConfig::for_num_elems(n as u32)) }?;
//! }
//! assert_eq!(hits.to_host(&stream)?, vec![2]);
//! # Ok(()) }
//! ```

use gpuhash_core::Stream;
use gpuhash_core::nvrtc::{Headers, STDINT};
use parking_lot::RwLockReadGuard;

pub use crate::layouts::{GhSlabTable, GhSlabView};
use crate::table::Slabs;

/// The headers a kernel that probes a view needs, as `(include name, source)` pairs
/// (`gpuhash/slab_hash_view.cuh`, which a kernel includes, and those it includes in turn).
pub const HEADERS: Headers = Headers(&[
    (
        "gpuhash/slab_hash_view.cuh",
        include_str!("../../../cuda-src/include/gpuhash/slab_hash_view.cuh"),
    ),
    (
        "gpuhash/slab_hash_layouts.h",
        include_str!("../../../cuda-src/include/gpuhash/slab_hash_layouts.h"),
    ),
    (
        "gpuhash/slab_list_layouts.h",
        include_str!("../../../cuda-src/include/gpuhash/slab_list_layouts.h"),
    ),
    (
        "gpuhash/slab_alloc_layouts.h",
        include_str!("../../../cuda-src/include/gpuhash/slab_alloc_layouts.h"),
    ),
    (
        "gpuhash/core_layouts.h",
        include_str!("../../../cuda-src/include/gpuhash/core_layouts.h"),
    ),
    (
        "gpuhash/hash.cuh",
        include_str!("../../../cuda-src/include/gpuhash/hash.cuh"),
    ),
    (
        "gpuhash/warp.cuh",
        include_str!("../../../cuda-src/include/gpuhash/warp.cuh"),
    ),
    (
        "slab_alloc/slab_alloc.cuh",
        include_str!("../../../cuda-src/slab_alloc/slab_alloc.cuh"),
    ),
    STDINT,
]);

/// A map lent to the caller's kernels on one stream: the [`GhSlabView`] they take by value,
/// valid while this lives. Made by
/// [`SlabHashMap::device_view`](crate::SlabHashMap::device_view); see [`crate::view`].
///
/// While it lives, what replaces the map's memory (growth, compaction, `clear`, loading an
/// image) waits on the host, and then for the device, so the kernels queued meanwhile read
/// the memory the view points to. A thread that holds a view and then runs a batch of the
/// same map that must grow or compact it, or clears it, waits for itself forever: drop the
/// view first.
pub struct DeviceView<'a> {
    raw: GhSlabView,
    stream: Stream,
    _slabs: RwLockReadGuard<'a, Slabs>,
}

impl std::fmt::Debug for DeviceView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceView")
            .field("buckets", &self.raw.table.bucket_count)
            .field("key_words", &self.raw.key_words)
            .field("value_words", &self.raw.value_words)
            .finish_non_exhaustive()
    }
}

impl<'a> DeviceView<'a> {
    pub(crate) fn new(raw: GhSlabView, stream: &Stream, slabs: RwLockReadGuard<'a, Slabs>) -> Self {
        Self {
            raw,
            stream: stream.clone(),
            _slabs: slabs,
        }
    }

    /// The view to pass by value to a kernel that takes a `GhSlabView`
    /// (`gpuhash/slab_hash_view.cuh`); with cudarc, `builder.arg(view.raw())`.
    pub fn raw(&self) -> &GhSlabView {
        &self.raw
    }

    /// The stream the view was taken on, after the work queued there before.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
}
