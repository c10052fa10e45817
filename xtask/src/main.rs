//! `cargo xtask`: the project's own tasks.
//!
//! - `build-kernels [--check]`: compile `cuda-src/<crate>/*.cu` into the fat binaries each
//!   crate embeds, and regenerate the Rust layouts from `cuda-src/include/gpuhash/*_layouts.h`.
//!   With `--check`, build nothing and fail if anything committed is stale.
//! - `gpu-test`: build every test binary and the benchmark in release mode and bundle them,
//!   with runner scripts, under `target/gpu-bundle/` for a GPU machine; and the criterion
//!   benchmarks, with theirs, under `target/gpu-bench-bundle/`.

mod bindings;
mod bundle;
mod kernels;
mod nvcc;
mod workspace;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <build-kernels [--check] | gpu-test>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["build-kernels"] => kernels::build(),
        ["build-kernels", "--check"] => kernels::check(),
        ["gpu-test"] => bundle::build(),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
