//! A native build: find nvcc through `cc`, compile the crate's kernels into `OUT_DIR`.

use std::env;
use std::path::{Path, PathBuf};

use crate::{ARCH_VARIABLE, DEFAULT_TARGETS, nvcc_command, nvcc_flags, parse_targets};

/// Compiles every `cuda-src/<crate>/*.cu` of the package being built into
/// `OUT_DIR/<file>.fatbin`.
pub(crate) fn build() -> Result<(), String> {
    let manifest_dir = PathBuf::from(variable("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(variable("OUT_DIR")?);
    let package = variable("CARGO_PKG_NAME")?;
    for watched in [ARCH_VARIABLE, "NVCC", "CUDA_PATH", "PATH"] {
        println!("cargo::rerun-if-env-changed={watched}");
    }
    let cuda_src = cuda_src(&manifest_dir)?;
    println!("cargo::rerun-if-changed={}", cuda_src.display());

    let list = env::var(ARCH_VARIABLE).unwrap_or_else(|_| DEFAULT_TARGETS.to_string());
    let targets = parse_targets(&list)?;
    let flags = nvcc_flags(&targets);
    let nvcc = find_nvcc()?;

    let sources = kernel_sources(&crate::source_folder(&cuda_src, &package))?;
    for source in &sources {
        let stem = source.file_stem().unwrap_or_default().to_string_lossy();
        let output = out_dir.join(format!("{stem}.fatbin"));
        let result = nvcc_command(&nvcc, &flags, &cuda_src, source, &output)
            .output()
            .map_err(|e| {
                format!(
                    "cannot run nvcc at `{}` for {ARCH_VARIABLE}={list} ({e}); install a CUDA \
                     toolkit, or point NVCC or CUDA_PATH at one",
                    nvcc.display()
                )
            })?;
        if !result.status.success() {
            return Err(format!(
                "nvcc at `{}` failed on {} for {ARCH_VARIABLE}={list}\n{}{}",
                nvcc.display(),
                source.display(),
                String::from_utf8_lossy(&result.stdout),
                String::from_utf8_lossy(&result.stderr)
            ));
        }
    }
    Ok(())
}

fn variable(name: &str) -> Result<String, String> {
    env::var(name).map_err(|_| format!("cargo did not set {name}"))
}

/// The repository's `cuda-src`, two folders above the crate: the headers are shared by every
/// crate, so they are not inside any package.
fn cuda_src(manifest_dir: &Path) -> Result<PathBuf, String> {
    let cuda_src = manifest_dir.join("../../cuda-src");
    if cuda_src.join("include").is_dir() {
        return cuda_src
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", cuda_src.display()));
    }
    Err(format!(
        "no CUDA sources at {}: the feature builds from a checkout of the gpuhash repository",
        cuda_src.display()
    ))
}

/// nvcc as `cc` finds it (the `NVCC` variable, else `nvcc` on `PATH`), or
/// `$CUDA_PATH/bin/nvcc` when `NVCC` is unset and `CUDA_PATH` is.
fn find_nvcc() -> Result<PathBuf, String> {
    if env::var_os("NVCC").is_none()
        && let Some(cuda_path) = env::var_os("CUDA_PATH")
    {
        return Ok(Path::new(&cuda_path).join("bin").join("nvcc"));
    }
    let tool = cc::Build::new()
        .cuda(true)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .try_get_compiler()
        .map_err(|e| format!("cc cannot find nvcc: {e}"))?;
    Ok(tool.path().to_path_buf())
}

/// The `.cu` files of a kernel folder, sorted.
fn kernel_sources(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut sources = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "cu") {
            sources.push(path);
        }
    }
    sources.sort();
    Ok(sources)
}
