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
//!   `stdint.h` for NVRTC, which has no C library.
//! - The **compile**: [`compile_ptx`] compiles a kernel source against those headers with
//!   NVRTC (through cudarc) for the device's architecture; [`headers_dir`] writes them to
//!   a directory for a compile of the caller's own (`-I` that directory). In an nvcc
//!   build, `-I cuda-src/include -I cuda-src` of a gpuhash checkout does the same.
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
//! let ptx = view::compile_ptx(&device, SOURCE)?;
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

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::{CompileOptions, Ptx};
use gpuhash_core::{Device, Error};

use crate::{CuckooError, Result, launch};

pub use crate::layouts::{GhCuckooHome, GhCuckooSubtable, GhCuckooTable, GhCuckooView};
pub use crate::table::DeviceView;

/// The headers a kernel that probes a view needs, as `(include name, source)` pairs: the
/// name is the path under an include directory (`gpuhash/cuckoo_view.cuh`, which a kernel
/// includes, and those it includes in turn), the source the text the crate was built with.
pub const HEADERS: &[(&str, &str)] = &[
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
    ("stdint.h", STDINT),
];

/// The fixed-width integers of `<stdint.h>` for NVRTC, which ships no C library: the
/// layouts include it. (An nvcc build finds the system's instead.)
const STDINT: &str = "\
// Fixed-width integers for NVRTC, which has no C library headers.
#pragma once
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
";

/// Writes [`HEADERS`] under `dir` (creating the folders they need), for a compile that
/// takes `-I dir`. Each file is written beside its place and renamed there, so that a
/// compile of another process reading the same directory never sees half a header.
pub fn write_headers(dir: &Path) -> std::io::Result<()> {
    for (name, source) in HEADERS {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let partial = path.with_extension(format!("partial-{}", std::process::id()));
        std::fs::write(&partial, source)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(())
}

/// A directory holding [`HEADERS`], for `-I`: under the system's temporary directory,
/// named by a fingerprint of the headers (so runs of one build share it, and builds with
/// other headers do not), written once a process and left there.
pub fn headers_dir() -> Result<&'static Path> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let written = DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("gpuhash-cuckoo-headers-{:016x}", fingerprint()));
        write_headers(&dir)
            .map(|()| dir.clone())
            .map_err(|e| format!("cannot write the headers to {}: {e}", dir.display()))
    });
    match written {
        Ok(dir) => Ok(dir.as_path()),
        Err(e) => Err(Error::InvalidInput(e.clone()).into()),
    }
}

/// FNV-1a over the headers' names and texts.
fn fingerprint() -> u64 {
    let bytes = HEADERS
        .iter()
        .flat_map(|(name, source)| [name.as_bytes(), source.as_bytes()])
        .flatten();
    bytes.fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Compiles `source` (CUDA C++, which may include `gpuhash/cuckoo_view.cuh`) with NVRTC
/// for `device`'s architecture, the headers on its include path; load the PTX with
/// cudarc (`stream.cuda_stream().context().load_module(ptx)`).
///
/// Errors: [`CuckooError::Compile`] with NVRTC's log when the source does not compile, or
/// when no NVRTC library (`libnvrtc`, CUDA 13) can be loaded; [`Error::InvalidInput`]
/// when the headers cannot be written or the source holds a NUL byte.
pub fn compile_ptx(device: &Device, source: &str) -> Result<Ptx> {
    compile_ptx_for(device.properties().compute_capability, source)
}

/// [`compile_ptx`] for a compute capability `(major, minor)` rather than a device's (PTX
/// for `compute_{major}{minor}`), so that a program compiles before it opens a device.
pub fn compile_ptx_for(compute_capability: (i32, i32), source: &str) -> Result<Ptx> {
    if source.contains('\0') {
        return Err(Error::InvalidInput("compile_ptx: the source holds a NUL byte".into()).into());
    }
    if !launch::nvrtc_present() {
        return Err(CuckooError::Compile(
            "no NVRTC library (libnvrtc of CUDA 13) could be loaded".into(),
        ));
    }
    let (major, minor) = compute_capability;
    let options = CompileOptions {
        include_paths: vec![headers_dir()?.display().to_string()],
        options: vec![
            format!("--gpu-architecture=compute_{major}{minor}"),
            "--std=c++17".into(),
        ],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(source, options).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            CuckooError::Compile(log.to_string_lossy().into_owned())
        }
        other => CuckooError::Compile(other.to_string()),
    })
}
