//! How gpuhash compiles its CUDA kernels, in one place for both ways of building them.
//!
//! - `cargo xtask build-kernels` compiles every `cuda-src/<crate>/*.cu` with [`nvcc_flags`]
//!   over [`DEFAULT_TARGETS`] into the fat binaries committed under `crates/<crate>/kernels/`.
//! - A kernel-carrying crate built with its `native-kernels` feature runs [`build_script`]
//!   from its `build.rs`: the same flags, the targets named by `GPUHASH_CUDA_ARCH`, the output
//!   in `OUT_DIR`, which `gpuhash_core::kernel_image!` then embeds instead.
//!
//! So a kernel built either way comes from one command line, and the flags that the
//! committed stamps fingerprint are the flags a native build uses.
//!
//! Parsing a target list is pure and tested here:
//!
//! ```
//! use gpuhash_kernel_build::{nvcc_flags, parse_targets};
//!
//! let targets = parse_targets("sm_80").unwrap();
//! assert!(nvcc_flags(&targets).ends_with(&[
//!     "-gencode".to_string(),
//!     "arch=compute_80,code=sm_80".to_string(),
//! ]));
//! assert!(parse_targets("sm_60").is_err());
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags every kernel is compiled with, before its targets.
const COMMON_FLAGS: &[&str] = &[
    "-fatbin",
    "-O3",
    "-std=c++17",
    "-lineinfo",
    "--Werror",
    "all-warnings",
];

/// The targets of the committed fat binaries: sm_90 machine code for the H100 and H200, and
/// compute_75 PTX that the driver compiles at load time for any other GPU from Turing on.
pub const DEFAULT_TARGETS: &str = "sm_90,compute_75";

/// The oldest compute capability CUDA 13 compiles for, and the oldest gpuhash runs on.
const OLDEST_ARCH: u32 = 75;

/// The variable that names a native build's targets.
pub const ARCH_VARIABLE: &str = "GPUHASH_CUDA_ARCH";

/// What one entry of a target list asks nvcc for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `sm_80`: machine code for that architecture (`80a` style suffixes kept).
    Machine(String),
    /// `compute_75`: PTX that the driver compiles for any GPU of that architecture or newer.
    Ptx(String),
    /// `native`: machine code for the GPUs of the building machine, as nvcc detects them.
    Native,
}

impl Target {
    /// The nvcc arguments that ask for this target.
    fn flags(&self) -> Vec<String> {
        match self {
            Target::Machine(arch) => gencode(&format!("arch=compute_{arch},code=sm_{arch}")),
            Target::Ptx(arch) => gencode(&format!("arch=compute_{arch},code=compute_{arch}")),
            Target::Native => vec!["-arch=native".to_string()],
        }
    }
}

fn gencode(spec: &str) -> Vec<String> {
    vec!["-gencode".to_string(), spec.to_string()]
}

/// Parses a comma-separated target list such as `sm_80`, `sm_86,compute_75` or `native`.
///
/// Each entry is `sm_<NN>` (machine code), `compute_<NN>` (PTX) or `native`, where `NN` is a
/// compute capability of 75 or more, optionally followed by nvcc's `a` or `f` suffix.
/// `native` stands alone. The error names the entry at fault.
pub fn parse_targets(list: &str) -> Result<Vec<Target>, String> {
    let entries: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(format!(
            "{ARCH_VARIABLE} is empty: name targets such as sm_80 or native"
        ));
    }
    if entries.len() > 1 && entries.contains(&"native") {
        return Err(format!(
            "{ARCH_VARIABLE}={list}: `native` cannot be combined with other targets"
        ));
    }
    entries.into_iter().map(parse_target).collect()
}

fn parse_target(entry: &str) -> Result<Target, String> {
    if entry == "native" {
        return Ok(Target::Native);
    }
    let (make, arch): (fn(String) -> Target, &str) = if let Some(arch) = entry.strip_prefix("sm_") {
        (Target::Machine, arch)
    } else if let Some(arch) = entry.strip_prefix("compute_") {
        (Target::Ptx, arch)
    } else {
        return Err(format!(
            "{ARCH_VARIABLE}: `{entry}` is not a target; write sm_<NN>, compute_<NN> or native"
        ));
    };
    let digits = arch.strip_suffix(['a', 'f']).unwrap_or(arch);
    let capability: u32 = match digits.parse() {
        Ok(n) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => {
            return Err(format!(
                "{ARCH_VARIABLE}: `{entry}` has no compute capability; write e.g. sm_80"
            ));
        }
    };
    if capability < OLDEST_ARCH {
        return Err(format!(
            "{ARCH_VARIABLE}: `{entry}` is older than sm_{OLDEST_ARCH}, the oldest architecture \
             CUDA 13 and gpuhash support"
        ));
    }
    Ok(make(arch.to_string()))
}

/// Every nvcc flag for `targets` besides the include folders, the input and the output.
pub fn nvcc_flags(targets: &[Target]) -> Vec<String> {
    let mut flags: Vec<String> = COMMON_FLAGS.iter().map(|f| f.to_string()).collect();
    flags.extend(targets.iter().flat_map(Target::flags));
    flags
}

/// The flags of the committed fat binaries.
pub fn default_flags() -> Vec<String> {
    nvcc_flags(&parse_targets(DEFAULT_TARGETS).expect("the default targets parse"))
}

/// The command that compiles `source` into the fat binary `output`: `flags` and, on the
/// include path, `cuda-src/include` and `cuda-src` itself.
pub fn nvcc_command(
    nvcc: &Path,
    flags: &[String],
    cuda_src: &Path,
    source: &Path,
    output: &Path,
) -> Command {
    let mut command = Command::new(nvcc);
    command
        .args(flags)
        .arg("-I")
        .arg(cuda_src.join("include"))
        .arg("-I")
        .arg(cuda_src)
        .arg(source)
        .arg("-o")
        .arg(output);
    command
}

/// The `cuda-src` folder that a crate's kernels come from: `cuda-src/<dir>`, where `dir` is
/// the crate's name without `gpuhash-`, dashes turned into underscores.
pub(crate) fn source_folder(cuda_src: &Path, package: &str) -> PathBuf {
    let dir = package.strip_prefix("gpuhash-").unwrap_or(package);
    cuda_src.join(dir.replace('-', "_"))
}

/// The body of a kernel crate's `build.rs` under `native-kernels`: compiles the crate's
/// kernels into `OUT_DIR`, or stops the build with a message that names nvcc, the targets and
/// what went wrong.
pub fn build_script() {
    if let Err(message) = native::build() {
        // cargo shows one line per error; nvcc's own output follows on stderr.
        let summary = message.lines().next().unwrap_or_default();
        println!("cargo::error=native-kernels: {summary}");
        eprintln!("{message}");
        std::process::exit(1);
    }
}

mod native;

#[cfg(test)]
mod tests;
