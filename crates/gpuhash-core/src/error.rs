//! The one error type of gpuhash-core, which every higher crate converts into.

use cudarc::driver::DriverError;
use cudarc::driver::sys::cudaError_enum;

/// What can go wrong between the host and the GPU.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library (libcuda) could be loaded on this machine.
    #[error("no CUDA driver found: gpuhash needs the NVIDIA driver for CUDA 13.0 or newer")]
    NoDriver,
    /// The driver is older than the CUDA release the kernels are built for.
    #[error("the CUDA driver supports CUDA {}.{}, gpuhash needs 13.0 or newer", .version / 1000, .version % 1000 / 10)]
    DriverTooOld {
        /// The driver's version as `cuDriverGetVersion` reports it (13000 for 13.0).
        version: i32,
    },
    /// The driver found no device with this ordinal.
    #[error("no CUDA device with ordinal {ordinal} ({count} found)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// The device has too little free memory for an allocation or a launch.
    #[error("out of device memory")]
    OutOfDeviceMemory,
    /// Page-locked host memory could not be had: the host refused to pin more, or a
    /// [`PinnedPool`](crate::PinnedPool) reached its cap.
    #[error("out of pinned host memory")]
    OutOfPinnedMemory,
    /// A crate's embedded kernels cannot run on this GPU.
    #[error(
        "kernel image {image} cannot run on {device} (compute capability {major}.{minor}): {reason}"
    )]
    UnsupportedDevice {
        /// The kernel image, as `crate/file`.
        image: &'static str,
        /// The device's name.
        device: String,
        /// Compute capability, major part.
        major: i32,
        /// Compute capability, minor part.
        minor: i32,
        /// Why, in words.
        reason: String,
    },
    /// Two inputs of one call that must have equal lengths do not.
    #[error("{what}: lengths differ ({left} and {right})")]
    LengthMismatch {
        /// Which inputs, in words.
        what: &'static str,
        /// Length of the first.
        left: usize,
        /// Length of the second.
        right: usize,
    },
    /// An input is outside what the call accepts.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A kernel source did not compile at run time ([`crate::nvrtc`]), or no NVRTC library
    /// could be loaded: NVRTC's log, or what failed.
    #[error("NVRTC could not compile the kernel: {0}")]
    Compile(String),
    /// Any other error the CUDA driver reported.
    #[error("CUDA driver error: {0}")]
    Driver(DriverError),
}

impl From<DriverError> for Error {
    fn from(error: DriverError) -> Self {
        match error.0 {
            cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfDeviceMemory,
            _ => Error::Driver(error),
        }
    }
}

/// The result type of gpuhash-core.
pub type Result<T, E = Error> = std::result::Result<T, E>;
