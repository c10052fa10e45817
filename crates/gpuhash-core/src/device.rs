//! The device: one GPU's context, its properties, and the kernel images loaded on it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute, cudaError_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, result};
use cudarc::nvrtc::Ptx;
use parking_lot::{Mutex, MutexGuard};

use crate::launch::KernelImage;
use crate::pinned::RegisteredRanges;
use crate::{Error, PinnedPool, Result, Stream};

/// The oldest driver the kernels are built for (CUDA 13.0, as `cuDriverGetVersion` counts).
const MIN_DRIVER_VERSION: i32 = 13000;
/// The oldest GPU architecture the embedded PTX (compute_75) can be compiled for.
const MIN_COMPUTE_CAPABILITY: (i32, i32) = (7, 5);

/// What gpuhash needs to know of a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProperties {
    /// The ordinal the driver gives the device.
    pub ordinal: usize,
    /// The marketing name, `NVIDIA H100 80GB HBM3` say.
    pub name: String,
    /// Number of streaming multiprocessors.
    pub multiprocessors: u32,
    /// Most resident threads one multiprocessor holds.
    pub max_threads_per_multiprocessor: u32,
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Bytes of L2 cache.
    pub l2_cache_bytes: usize,
    /// Compute capability as (major, minor), (9, 0) for Hopper.
    pub compute_capability: (i32, i32),
}

/// A kernel launched with a block size: (image, kernel, threads per block).
type KernelKey = (&'static str, &'static str, u32);

/// One GPU, ready for work. Cheap to clone; every clone shares the context and the kernel
/// images loaded so far. `Send + Sync`: several host threads may use one device, each on
/// its own [`Stream`].
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

struct DeviceInner {
    context: Arc<CudaContext>,
    properties: DeviceProperties,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    /// Each kernel once looked up, with how many of its blocks of the size it was
    /// launched with one multiprocessor keeps resident.
    functions: Mutex<HashMap<KernelKey, (CudaFunction, u32)>>,
    /// Streams lent by [`Device::lend_stream`] and given back, for the next borrower.
    idle_streams: Mutex<Vec<Arc<CudaStream>>>,
    /// The shared pool of pinned host buffers, made on first use.
    pinned_pool: OnceLock<PinnedPool>,
    /// Host memory registered through [`Device::register`].
    registered: Mutex<RegisteredRanges>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("properties", &self.inner.properties)
            .finish()
    }
}

impl Device {
    /// Opens the device with this ordinal.
    ///
    /// Returns [`Error::NoDriver`] where no CUDA driver is installed, [`Error::DriverTooOld`]
    /// for a driver before CUDA 13.0, and [`Error::NoDevice`] where the driver sees no such
    /// device. Never panics.
    pub fn new(ordinal: usize) -> Result<Self> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let context = CudaContext::new(ordinal)?;
        // SAFETY: every allocation the library makes on this context is a DeviceBuffer,
        // which orders its uses across streams and its free itself (buffer.rs); cudarc's
        // own events, recorded and waited for at every use, would only add driver calls.
        // Code that makes cudarc allocations through `Stream::cuda_stream` orders them
        // itself, as that method says.
        unsafe { context.disable_event_tracking() };
        let properties = read_properties(&context)?;
        Ok(Self {
            inner: Arc::new(DeviceInner {
                context,
                properties,
                modules: Mutex::new(HashMap::new()),
                functions: Mutex::new(HashMap::new()),
                idle_streams: Mutex::new(Vec::new()),
                pinned_pool: OnceLock::new(),
                registered: Mutex::new(RegisteredRanges::default()),
            }),
        })
    }

    /// Opens device 0, with the errors of [`Device::new`].
    #[allow(
        clippy::should_implement_trait,
        reason = "opening a device can fail; Default cannot"
    )]
    pub fn default() -> Result<Self> {
        Self::new(0)
    }

    /// How many CUDA devices the driver sees, with the errors of [`Device::new`] when
    /// there is no usable driver.
    pub fn count() -> Result<usize> {
        // SAFETY: loading libcuda runs only the driver's own initialisers; cudarc would
        // panic on its first call without this check, so it must come first.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let mut version = 0;
        // SAFETY: the library is present (checked above); the call writes one int.
        let status = unsafe { sys::cuDriverGetVersion(&mut version) };
        if status != cudaError_enum::CUDA_SUCCESS {
            return Err(Error::NoDriver);
        }
        if version < MIN_DRIVER_VERSION {
            return Err(Error::DriverTooOld { version });
        }
        match result::init() {
            Ok(()) => Ok(usize::try_from(result::device::get_count()?).unwrap_or(0)),
            Err(e) if e.0 == cudaError_enum::CUDA_ERROR_NO_DEVICE => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// The device's properties, read once when it was opened.
    pub fn properties(&self) -> &DeviceProperties {
        &self.inner.properties
    }

    /// Free device memory in bytes, now. Memory that dropped buffers gave back to the
    /// stream-ordered pool counts only after a synchronize (of this device or a stream)
    /// has returned it to the driver.
    pub fn free_memory(&self) -> Result<usize> {
        Ok(self.inner.context.mem_get_info()?.0)
    }

    /// A new stream of its own, for work that may overlap work on other streams.
    pub fn new_stream(&self) -> Result<Stream> {
        Ok(Stream::new(self.inner.context.new_stream()?, self.clone()))
    }

    /// A stream lent from the device's pool, given back when the guard drops: for blocking
    /// calls that need a stream of their own (so that calls from several host threads
    /// overlap) without creating one each time. The pool keeps every stream it ever lent,
    /// so it holds as many as were ever lent at once.
    pub fn lend_stream(&self) -> Result<LentStream> {
        let idle = self.inner.idle_streams.lock().pop();
        let inner = match idle {
            Some(stream) => stream,
            None => self.inner.context.new_stream()?,
        };
        Ok(LentStream {
            stream: Stream::new(inner, self.clone()),
        })
    }

    /// The device's default stream.
    pub fn default_stream(&self) -> Stream {
        Stream::new(self.inner.context.default_stream(), self.clone())
    }

    /// Sets the heap that device-side `malloc` draws from to `bytes`. Takes effect only
    /// before the first launch of a kernel that calls `malloc`; the driver refuses it after.
    pub fn set_malloc_heap_bytes(&self, bytes: usize) -> Result<()> {
        Ok(self
            .inner
            .context
            .set_limit(sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE, bytes)?)
    }

    /// The device's shared pool of pinned host buffers, for staging copies; made on first
    /// use, with no cap until [`PinnedPool::set_cap`] sets one. Its buffers are mapped into
    /// the device's address space, so that copies of a few words into them are made by a
    /// kernel rather than queued behind large copies on a copy engine.
    pub fn pinned_pool(&self) -> &PinnedPool {
        self.inner
            .pinned_pool
            .get_or_init(|| PinnedPool::for_context_mapped(self.inner.context.clone()))
    }

    /// The cudarc context.
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.inner.context
    }

    /// The host memory registered through this device, locked.
    pub(crate) fn registered_ranges(&self) -> MutexGuard<'_, RegisteredRanges> {
        self.inner.registered.lock()
    }

    /// Blocks until all work on every stream of this device has finished.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.inner.context.synchronize()?)
    }

    /// The kernel `name` of `image`, loading the image on first use, with the number of its
    /// blocks of `threads` threads (and `shared_bytes` of dynamic shared memory) that one
    /// multiprocessor keeps resident. Loading and the occupancy query happen once per
    /// device; later calls only look the kernel up.
    pub(crate) fn function(
        &self,
        image: &'static KernelImage,
        name: &'static str,
        threads: u32,
        shared_bytes: u32,
    ) -> Result<(CudaFunction, u32)> {
        let key = (image.name, name, threads);
        if let Some(found) = self.inner.functions.lock().get(&key) {
            return Ok(found.clone());
        }
        let module = {
            let mut modules = self.inner.modules.lock();
            match modules.get(image.name) {
                Some(module) => module.clone(),
                None => {
                    let module = self.load(image)?;
                    modules.insert(image.name, module.clone());
                    module
                }
            }
        };
        let function = module.load_function(name)?;
        let resident = function.occupancy_max_active_blocks_per_multiprocessor(
            threads,
            shared_bytes as usize,
            None,
        )?;
        let entry = (function, resident.max(1));
        self.inner.functions.lock().insert(key, entry.clone());
        Ok(entry)
    }

    fn load(&self, image: &'static KernelImage) -> Result<Arc<CudaModule>> {
        let properties = &self.inner.properties;
        let unsupported = |reason: String| Error::UnsupportedDevice {
            image: image.name,
            device: properties.name.clone(),
            major: properties.compute_capability.0,
            minor: properties.compute_capability.1,
            reason,
        };
        if properties.compute_capability < MIN_COMPUTE_CAPABILITY {
            let (major, minor) = MIN_COMPUTE_CAPABILITY;
            return Err(unsupported(format!(
                "gpuhash needs compute capability {major}.{minor} or newer"
            )));
        }
        let fatbin = Ptx::from_binary(image.fatbin.to_vec());
        self.inner
            .context
            .load_module(fatbin)
            .map_err(|e| match e.0 {
                cudaError_enum::CUDA_ERROR_NO_BINARY_FOR_GPU
                | cudaError_enum::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                | cudaError_enum::CUDA_ERROR_INVALID_PTX
                | cudaError_enum::CUDA_ERROR_INVALID_IMAGE => unsupported(e.to_string()),
                _ => e.into(),
            })
    }
}

fn read_properties(context: &Arc<CudaContext>) -> Result<DeviceProperties> {
    let attribute = |a: CUdevice_attribute| -> Result<i32> { Ok(context.attribute(a)?) };
    let to_u32 = |v: i32| u32::try_from(v).unwrap_or(0);
    Ok(DeviceProperties {
        ordinal: context.ordinal(),
        name: context.name()?,
        multiprocessors: to_u32(attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?),
        max_threads_per_multiprocessor: to_u32(attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
        )?),
        total_memory: context.total_mem()?,
        l2_cache_bytes: to_u32(attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
        )?) as usize,
        compute_capability: context.compute_capability()?,
    })
}

/// A stream lent by [`Device::lend_stream`]; derefs to [`Stream`] and goes back to the
/// device's pool when dropped.
#[derive(Debug)]
pub struct LentStream {
    stream: Stream,
}

impl std::ops::Deref for LentStream {
    type Target = Stream;

    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl Drop for LentStream {
    fn drop(&mut self) {
        let inner = Arc::clone(&self.stream.inner);
        self.stream.device().inner.idle_streams.lock().push(inner);
    }
}
