//! Without `native-kernels`, nothing: the committed fat binaries are embedded. With it,
//! compiles this crate's `cuda-src` kernels into `OUT_DIR` for `GPUHASH_CUDA_ARCH`.

fn main() {
    #[cfg(feature = "native-kernels")]
    gpuhash_kernel_build::build_script();
    #[cfg(not(feature = "native-kernels"))]
    println!("cargo::rerun-if-changed=build.rs");
}
