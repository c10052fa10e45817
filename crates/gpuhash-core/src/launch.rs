//! Kernel images and typed launches: the one place where gpuhash-core hands raw device
//! pointers to the GPU.
//!
//! Each crate embeds its fat binaries with [`kernel_image!`](crate::kernel_image) and declares
//! each kernel once as a [`Kernel<P>`], where `P` is the kernel's parameter struct (a bindgen
//! layout from `cuda-src/include`). Every kernel of gpuhash takes exactly one parameter, that
//! struct by value, so a launch cannot push the wrong number or order of arguments.

use std::marker::PhantomData;

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use crate::{Device, Result, Stream};

/// A fat binary compiled from one `cuda-src/<crate>/<file>.cu`, embedded in its crate.
#[derive(Debug)]
pub struct KernelImage {
    /// `crate/file`, the key under which a device keeps the loaded image.
    pub name: &'static str,
    /// The fat binary: sm_90 machine code and compute_75 PTX.
    pub fatbin: &'static [u8],
}

/// Embeds `kernels/<file>.fatbin` of the calling crate as a [`KernelImage`].
///
/// With the calling crate's `native-kernels` feature on, embeds instead the fat binary its
/// `build.rs` compiled into `OUT_DIR` for the targets in `GPUHASH_CUDA_ARCH` (see
/// `docs/kernels.md`). The feature is the calling crate's, so a crate using this macro
/// declares `native-kernels` and has that `build.rs`.
///
/// ```text
/// static WORKLOAD: KernelImage = gpuhash_core::kernel_image!("workload");
/// ```
#[macro_export]
macro_rules! kernel_image {
    ($file:literal) => {{
        #[cfg(feature = "native-kernels")]
        const FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/", $file, ".fatbin"));
        #[cfg(not(feature = "native-kernels"))]
        const FATBIN: &[u8] = include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/kernels/",
            $file,
            ".fatbin"
        ));
        $crate::launch::KernelImage {
            name: concat!(env!("CARGO_PKG_NAME"), "/", $file),
            fatbin: FATBIN,
        }
    }};
}

/// A struct that a kernel takes by value as its only parameter.
///
/// # Safety
/// The type must be `#[repr(C)]` with the layout of the C struct the kernel declares
/// (bindgen's output is), and hold no Rust references.
pub unsafe trait KernelParams: Copy {}

/// Lets cudarc push a [`KernelParams`] value; a local wrapper because cudarc's trait is
/// foreign.
#[repr(transparent)]
struct Param<P>(P);

// SAFETY: `Param` is transparent over a `KernelParams` type, which is a plain C layout.
unsafe impl<P: KernelParams> DeviceRepr for Param<P> {}

/// A kernel of a [`KernelImage`], typed by its parameter struct.
#[derive(Debug)]
pub struct Kernel<P> {
    image: &'static KernelImage,
    name: &'static str,
    params: PhantomData<fn(P)>,
}

/// Blocks and threads of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks in the grid (one dimension).
    pub blocks: u32,
    /// Threads in a block.
    pub threads_per_block: u32,
    /// Bytes of dynamic shared memory a block gets.
    pub shared_bytes: u32,
}

impl LaunchShape {
    /// A grid for a grid-stride kernel over `items` work items: one item a thread until
    /// the grid holds as many threads as the device keeps resident, then each thread loops.
    pub fn grid_stride(device: &Device, items: u64, threads_per_block: u32) -> Self {
        let properties = device.properties();
        let resident_blocks = properties.multiprocessors.max(1)
            * (properties.max_threads_per_multiprocessor / threads_per_block).max(1);
        let needed = items.div_ceil(u64::from(threads_per_block)).max(1);
        Self {
            blocks: u32::try_from(needed)
                .unwrap_or(u32::MAX)
                .min(resident_blocks),
            threads_per_block,
            shared_bytes: 0,
        }
    }
}

impl<P: KernelParams> Kernel<P> {
    /// Declares the kernel `name` of `image`; nothing is loaded until the first launch.
    pub const fn new(image: &'static KernelImage, name: &'static str) -> Self {
        Self {
            image,
            name,
            params: PhantomData,
        }
    }

    /// Queues the kernel on `stream` with `params`.
    ///
    /// Every gpuhash kernel is a grid-stride loop, so the grid is cut to the blocks the
    /// device keeps resident at once for this kernel: a grid sized for full occupancy
    /// would, for a kernel whose registers allow fewer blocks, leave a second partial wave
    /// that doubles the tail.
    ///
    /// # Safety
    /// Every device pointer in `params` must point to memory of the stream's device that
    /// stays allocated until the kernel has finished, and is large enough for every access
    /// the kernel makes with these parameters; memory the kernel writes must not be read or
    /// written by other work that may run at the same time.
    pub unsafe fn launch(&self, stream: &Stream, shape: LaunchShape, params: P) -> Result<()> {
        let device = stream.device();
        let (function, resident_per_sm) = device.function(
            self.image,
            self.name,
            shape.threads_per_block,
            shape.shared_bytes,
        )?;
        let resident = resident_per_sm.saturating_mul(device.properties().multiprocessors.max(1));
        let config = LaunchConfig {
            grid_dim: (shape.blocks.min(resident), 1, 1),
            block_dim: (shape.threads_per_block, 1, 1),
            shared_mem_bytes: shape.shared_bytes,
        };
        let param = Param(params);
        let mut builder = stream.inner.launch_builder(&function);
        builder.arg(&param);
        // SAFETY: the caller guarantees the pointers in `params`; `Param` has the C layout
        // of the kernel's single parameter.
        unsafe { builder.launch(config) }?;
        Ok(())
    }
}

/// Whether an NVRTC library can be loaded: cudarc panics at the first NVRTC call without
/// one, so [`crate::nvrtc::compile_ptx`] asks first.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: only tries to open the library by its usual names; calls nothing in it.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
