//! `build-kernels`: every `cuda-src/<crate>/*.cu` to a fat binary in `crates/<crate>/kernels/`,
//! with a stamp file that lets `--check` tell stale output without a CUDA toolkit.
//!
//! A fat binary holds sm_90 machine code, which the H100 and H200 run as they are, and
//! compute_75 PTX, which the driver compiles at load time for any other GPU from Turing on
//! (the oldest architecture CUDA 13 supports). The kernels use no instruction newer than
//! sm_75, so the lower PTX target loses nothing and reaches the most cards. The flags and
//! targets are `gpuhash_kernel_build`'s, shared with the crates' `native-kernels` builds.

use std::path::{Path, PathBuf};

use crate::workspace::{self, KernelCrate};
use crate::{bindings, nvcc};

const STAMPS: &str = "STAMPS";

/// Compiles every kernel source and regenerates every layout file.
pub fn build() -> Result<(), String> {
    let nvcc = nvcc::find_or_install()?;
    println!("nvcc: {} ({})", nvcc.path.display(), nvcc.version);
    for krate in workspace::kernel_crates()? {
        let out_dir = krate.output_dir();
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
        remove_orphans(&krate)?;
        let mut stamps = stamp_header(&nvcc.version);
        for source in sources(&krate)? {
            let output = out_dir.join(fatbin_name(&source));
            compile(&nvcc.path, &source, &output)?;
            let bytes = workspace::read(&output)?;
            println!(
                "built {} ({} bytes)",
                workspace::relative(&output),
                bytes.len()
            );
            stamps.push_str(&stamp_line(&source, &bytes)?);
        }
        workspace::write(&out_dir.join(STAMPS), stamps.as_bytes())?;
        if krate.layouts_header().is_file() {
            let text = bindings::generate(&krate.layouts_header())?;
            workspace::write(&krate.layouts_rust(), text.as_bytes())?;
            println!("generated {}", workspace::relative(&krate.layouts_rust()));
        }
    }
    Ok(())
}

/// Fails, naming every stale file, when a source, a header, the flags or an output
/// changed since the last `build-kernels`.
pub fn check() -> Result<(), String> {
    let mut stale = Vec::new();
    for krate in workspace::kernel_crates()? {
        let stamps_path = krate.output_dir().join(STAMPS);
        let committed = std::fs::read_to_string(&stamps_path).unwrap_or_default();
        let committed_lines: Vec<&str> =
            committed.lines().filter(|l| !l.starts_with('#')).collect();
        let mut expected_lines = Vec::new();
        for source in sources(&krate)? {
            let output = krate.output_dir().join(fatbin_name(&source));
            let bytes = std::fs::read(&output).unwrap_or_default();
            let line = stamp_line(&source, &bytes)?;
            if !committed_lines.contains(&line.trim_end()) {
                stale.push(workspace::relative(&output));
            } else {
                println!("up to date {}", workspace::relative(&output));
            }
            expected_lines.push(line);
        }
        if committed_lines.len() != expected_lines.len() {
            stale.push(format!(
                "{} (lists other kernels than cuda-src/{} holds)",
                workspace::relative(&stamps_path),
                krate.name
            ));
        }
        if krate.layouts_header().is_file() {
            let generated = bindings::generate(&krate.layouts_header())?;
            let committed = std::fs::read_to_string(krate.layouts_rust()).unwrap_or_default();
            if generated != committed {
                stale.push(workspace::relative(&krate.layouts_rust()));
            } else {
                println!("up to date {}", workspace::relative(&krate.layouts_rust()));
            }
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "stale, run `cargo xtask build-kernels`: {}",
            stale.join(", ")
        ))
    }
}

fn sources(krate: &KernelCrate) -> Result<Vec<PathBuf>, String> {
    Ok(workspace::read_dir_sorted(&krate.source_dir)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect())
}

fn fatbin_name(source: &Path) -> String {
    format!(
        "{}.fatbin",
        source.file_stem().unwrap_or_default().to_string_lossy()
    )
}

/// Removes fat binaries whose source is gone, so nothing stale stays embedded.
fn remove_orphans(krate: &KernelCrate) -> Result<(), String> {
    let wanted: Vec<String> = sources(krate)?.iter().map(|s| fatbin_name(s)).collect();
    for path in workspace::read_dir_sorted(&krate.output_dir())? {
        let name = workspace::file_name(&path);
        if name.ends_with(".fatbin") && !wanted.contains(&name) {
            std::fs::remove_file(&path)
                .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            println!("removed {}", workspace::relative(&path));
        }
    }
    Ok(())
}

fn compile(nvcc: &Path, source: &Path, output: &Path) -> Result<(), String> {
    let cuda_src = workspace::root().join("cuda-src");
    let result = gpuhash_kernel_build::nvcc_command(
        nvcc,
        &gpuhash_kernel_build::default_flags(),
        &cuda_src,
        source,
        output,
    )
    .output()
    .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
    if result.status.success() {
        return Ok(());
    }
    Err(format!(
        "nvcc failed on {}:\n{}{}",
        workspace::relative(source),
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    ))
}

fn stamp_header(nvcc_version: &str) -> String {
    format!(
        "# Written by `cargo xtask build-kernels`; `--check` recomputes the fingerprints.\n\
         # nvcc: {nvcc_version}\n"
    )
}

/// `<fatbin> sources=<fingerprint of flags, source and every header> output=<fingerprint>`.
fn stamp_line(source: &Path, output: &[u8]) -> Result<String, String> {
    let flags = gpuhash_kernel_build::default_flags().join(" ");
    let mut inputs: Vec<Vec<u8>> = vec![flags.into_bytes(), workspace::read(source)?];
    for header in workspace::files_under(&workspace::root().join("cuda-src"))? {
        if header.extension().is_some_and(|e| e == "h" || e == "cuh") {
            inputs.push(workspace::relative(&header).into_bytes());
            inputs.push(workspace::read(&header)?);
        }
    }
    let chunks: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    Ok(format!(
        "{} sources={:016x} output={:016x}\n",
        fatbin_name(source),
        workspace::fingerprint(&chunks),
        workspace::fingerprint(&[output])
    ))
}
