//! DyHash probed from the caller's own kernels: the table's device view, its headers, and
//! a run-time compile with NVRTC.
//!
//! A join, a filter or a sum that probes a table need not ship every probe's answer to
//! the host and back: the caller's kernel reads its rows, probes the table itself and
//! keeps only what it wants, in one pass. What it needs is public and stable:
//!
//! - The **view**: [`GhCuckooView`], a plain `#[repr(C)]` struct (the subtables' arrays,
//!   their hash coefficients, the reserved key's side slot, the home policy), which
//!   [`CuckooTable::device_view`](crate::CuckooTable::device_view) lends on a stream as a
//!   [`DeviceView`] guard. Pass [`DeviceView::raw`] by value to the kernel. It stays valid
//!   for the kernels queued on [`DeviceView::stream`] until the guard is dropped: the
//!   table takes no writing batch meanwhile (writers wait for the guard), so no resize
//!   moves the arrays and no insert or remove changes them.
//! - The **headers** ([`HEADERS`]): `gpuhash/cuckoo_view.cuh`, whose
//!   `gh_cuckoo_find_u32(const GhCuckooView *, uint32_t key, uint32_t *value_out)` and
//!   `gh_cuckoo_find_u64` find a key from a single thread (no tile, no warp-wide call),
//!   with the probe order and early exits of the table's own lookups, so they answer what
//!   [`Map::get`](gpuhash_core::table::Map::get) answers; `gh_cuckoo_share_view` first
//!   copies the view into the block's shared memory. The headers it includes come along
//!   (`cuckoo/bucket.cuh`, `state.cuh`, `probe.cuh`, `locate.cuh` and the layouts), and a
//!   `stdint.h` for NVRTC, which has no C library ([`gpuhash_core::nvrtc::STDINT`]).
//! - The **compile**: `HEADERS.compile_ptx(&device, source)` ([`Headers::compile_ptx`])
//!   compiles a kernel source against those headers with NVRTC (through cudarc) for the
//!   device's architecture; `HEADERS.dir()` writes them to a directory for a compile of
//!   the caller's own (`-I` that directory). In an nvcc build, `-I cuda-src/include
//!   -I cuda-src` of a gpuhash checkout does the same.
//!
//! A find on a view of a table of `u64` keys through `gh_cuckoo_find_u32` (or the other
//! way round) finds nothing: the view says its key width.
//!
//! ## Example
//!
//! ```no_run
//! use cudarc::driver::{LaunchConfig, PushKernelArg};
//! use gpuhash_core::table::Map;
//! use gpuhash_core::{Device, DeviceBuffer};
//! use gpuhash_cuckoo::{CuckooTable, view};
//!
//! const SOURCE: &str = r#"
//! #include "gpuhash/cuckoo_view.cuh"
//! extern "C" __global__ void count_hits(GhCuckooView view, const uint32_t *keys,
//!                                       unsigned long long n, unsigned long long *hits) {
//!     __shared__ GhCuckooView table;
//!     gh_cuckoo_share_view(view, &table);
//!     for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
//!          i += gridDim.x * blockDim.x) {
//!         if (gh_cuckoo_find_u32(&table, keys[i], nullptr)) atomicAdd(hits, 1ull);
//!     }
//! }
//! "#;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::default()?;
//! let table = CuckooTable::<u32, u32>::with_capacity(&device, 1024)?;
//! table.insert(&[1, 2, 3], &[10, 20, 30])?;
//! let ptx = view::HEADERS.compile_ptx(&device, SOURCE)?;
//! let stream = device.new_stream()?;
//! let module = stream.cuda_stream().context().load_module(ptx)?;
//! let kernel = module.load_function("count_hits")?;
//! let keys = DeviceBuffer::from_host(&stream, &[1u32, 5, 3])?;
//! let mut hits = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
//! {
//!     let view = table.device_view(&stream)?;
//!     let (keys_at, hits_at) = (keys.address(&stream), hits.address_mut(&stream));
//!     let n = keys.len() as u64;
//!     let mut launch = stream.cuda_stream().launch_builder(&kernel);
//!     launch.arg(view.raw()).arg(&keys_at.address).arg(&n).arg(&hits_at.address);
//!     // SAFETY: the kernel reads `n` keys and writes one counter, both allocated here,
//!     // and reads the table through a view that lives until the launch is queued.
//!     unsafe { launch.launch(LaunchConfig::for_num_elems(n as u32)) }?;
//! }
//! assert_eq!(hits.to_host(&stream)?, vec![2]);
//! # Ok(()) }
//! ```

use gpuhash_core::nvrtc::{Headers, STDINT};

pub use crate::layouts::{GhCuckooHome, GhCuckooSubtable, GhCuckooTable, GhCuckooView};
pub use crate::table::DeviceView;

/// The headers a kernel that probes a view needs, as `(include name, source)` pairs: the
/// name is the path under an include directory (`gpuhash/cuckoo_view.cuh`, which a kernel
/// includes, and those it includes in turn), the source the text the crate was built with.
pub const HEADERS: Headers = Headers(&[
    (
        "gpuhash/cuckoo_view.cuh",
        include_str!("../../../cuda-src/include/gpuhash/cuckoo_view.cuh"),
    ),
    (
        "gpuhash/cuckoo_layouts.h",
        include_str!("../../../cuda-src/include/gpuhash/cuckoo_layouts.h"),
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
        "cuckoo/bucket.cuh",
        include_str!("../../../cuda-src/cuckoo/bucket.cuh"),
    ),
    (
        "cuckoo/state.cuh",
        include_str!("../../../cuda-src/cuckoo/state.cuh"),
    ),
    (
        "cuckoo/probe.cuh",
        include_str!("../../../cuda-src/cuckoo/probe.cuh"),
    ),
    (
        "cuckoo/locate.cuh",
        include_str!("../../../cuda-src/cuckoo/locate.cuh"),
    ),
    STDINT,
]);
