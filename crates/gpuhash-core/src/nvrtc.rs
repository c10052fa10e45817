//! Kernels of the caller's own, compiled at run time with NVRTC (through cudarc) against
//! headers a table ships: how a table's device view is probed from the caller's fused
//! kernel (DyHash's `gpuhash_cuckoo::view`, the slab hash's `gpuhash_slab_hash::view`).
//!
//! A table ships its headers as [`Headers`], `(include name, source)` pairs embedded in
//! the crate; [`Headers::compile_ptx`] writes them to a directory ([`Headers::dir`]),
//! passes it as an include path, and compiles for the device's architecture. NVRTC ships
//! no C library, so the `<stdint.h>` that the layouts include comes along as [`STDINT`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{CompileOptions, Ptx};
use parking_lot::Mutex;

use crate::{Device, Error, Result};

/// The headers a table ships for kernels that probe its device view.
#[derive(Debug, Clone, Copy)]
pub struct Headers(pub &'static [Header]);

impl Headers {
    /// Writes the headers under `dir`, for a compile of the caller's own that takes
    /// `-I dir` ([`write_headers`]).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        write_headers(dir, self.0)
    }

    /// A directory holding the headers, for `-I` ([`headers_dir`]).
    pub fn dir(&self) -> Result<PathBuf> {
        headers_dir(self.0)
    }

    /// Compiles `source` (CUDA C++ that includes the table's view header) with NVRTC for
    /// `device`'s architecture, the headers on its include path; load the PTX with cudarc
    /// (`stream.cuda_stream().context().load_module(ptx)`). Errors as [`compile_ptx`]'s.
    pub fn compile_ptx(&self, device: &Device, source: &str) -> Result<Ptx> {
        compile_ptx(device.properties().compute_capability, source, self.0)
    }

    /// [`Headers::compile_ptx`] for a compute capability `(major, minor)` rather than a
    /// device's (PTX for `compute_{major}{minor}`), so that a program compiles before it
    /// opens a device.
    pub fn compile_ptx_for(&self, compute_capability: (i32, i32), source: &str) -> Result<Ptx> {
        compile_ptx(compute_capability, source, self.0)
    }
}

/// A header a kernel may include: the name it is included by (a path under an include
/// directory, such as `gpuhash/cuckoo_view.cuh`) and its text.
pub type Header = (&'static str, &'static str);

/// The fixed-width integers of `<stdint.h>`, for NVRTC, which has no C library: every
/// table's headers include it through their layouts. (An nvcc build finds the system's.)
pub const STDINT: Header = (
    "stdint.h",
    "\
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
",
);

/// Writes `headers` under `dir` (creating the folders they need), for a compile that takes
/// `-I dir`. Each file is written beside its place and renamed there, so that a compile of
/// another process reading the same directory never sees half a header.
pub fn write_headers(dir: &Path, headers: &[Header]) -> std::io::Result<()> {
    for (name, source) in headers {
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

/// A directory holding `headers`, for `-I`: under the system's temporary directory, named
/// by a fingerprint of the headers (so runs of one build share it, and other headers get
/// another), written once a process and left there.
pub fn headers_dir(headers: &[Header]) -> Result<PathBuf> {
    static WRITTEN: Mutex<Option<HashMap<u64, PathBuf>>> = Mutex::new(None);
    let fingerprint = fingerprint(headers);
    let mut written = WRITTEN.lock();
    let written = written.get_or_insert_with(HashMap::new);
    if let Some(dir) = written.get(&fingerprint) {
        return Ok(dir.clone());
    }
    let dir = std::env::temp_dir().join(format!("gpuhash-headers-{fingerprint:016x}"));
    write_headers(&dir, headers).map_err(|e| {
        Error::InvalidInput(format!("cannot write headers to {}: {e}", dir.display()))
    })?;
    written.insert(fingerprint, dir.clone());
    Ok(dir)
}

/// FNV-1a over the headers' names and texts.
fn fingerprint(headers: &[Header]) -> u64 {
    let bytes = headers
        .iter()
        .flat_map(|(name, source)| [name.as_bytes(), source.as_bytes()])
        .flatten();
    bytes.fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Compiles `source` (CUDA C++) with NVRTC to PTX for `compute_{major}{minor}`, with
/// `headers` on its include path (C++17); load the PTX with cudarc
/// (`stream.cuda_stream().context().load_module(ptx)`).
///
/// Errors: [`Error::Compile`] with NVRTC's log when the source does not compile, or when no
/// NVRTC library (`libnvrtc` of CUDA 13) can be loaded; [`Error::InvalidInput`] when the
/// headers cannot be written or the source holds a NUL byte.
pub fn compile_ptx(
    compute_capability: (i32, i32),
    source: &str,
    headers: &[Header],
) -> Result<Ptx> {
    if source.contains('\0') {
        return Err(Error::InvalidInput(
            "compile_ptx: the source holds a NUL byte".into(),
        ));
    }
    if !crate::launch::nvrtc_present() {
        return Err(Error::Compile(
            "no NVRTC library (libnvrtc of CUDA 13) could be loaded".into(),
        ));
    }
    let (major, minor) = compute_capability;
    let options = CompileOptions {
        include_paths: vec![headers_dir(headers)?.display().to_string()],
        options: vec![
            format!("--gpu-architecture=compute_{major}{minor}"),
            "--std=c++17".into(),
        ],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(source, options).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            Error::Compile(log.to_string_lossy().into_owned())
        }
        other => Error::Compile(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADERS: &[Header] = &[("a/b.h", "int b;"), STDINT];

    #[test]
    fn headers_are_written_once_under_their_fingerprint() {
        let dir = headers_dir(HEADERS).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("a/b.h")).unwrap(),
            "int b;"
        );
        assert_eq!(headers_dir(HEADERS).unwrap(), dir);
        assert_ne!(headers_dir(&HEADERS[..1]).unwrap(), dir);
    }

    #[test]
    fn a_source_with_a_nul_byte_is_refused_before_nvrtc() {
        let error = compile_ptx((9, 0), "int x;\0", HEADERS).unwrap_err();
        assert!(matches!(error, Error::InvalidInput(_)));
    }
}
