//! NCCL through cudarc's raw bindings: the only place this crate hands raw device pointers
//! and communicator handles to a library. The library is opened at run time (cudarc's
//! dynamic loading): [`nccl_loaded`] says whether it can be, before anything calls it.

use cudarc::driver::DriverError;
use cudarc::driver::sys::cudaError_enum;
use cudarc::nccl::result::{self, NcclError};
use cudarc::nccl::sys;
use gpuhash_core::{DeviceBuffer, Error, Result, Stream};

/// Whether `libnccl.so.2` can be opened (found on the loader path).
pub(crate) fn nccl_loaded() -> bool {
    // SAFETY: only tries to open the library and reports whether it could; calls nothing in
    // it.
    unsafe { sys::is_culib_present() }
}

/// An NCCL failure as the core error: of kind `Device` (the core error has no words for
/// NCCL's codes, so the call and its code go to standard error).
fn nccl_error(what: &str, error: NcclError) -> Error {
    device_error(&format!("NCCL {what} failed: {:?}", error.0))
}

/// A failure the core error has no words for, as an error of kind `Device`, its words
/// written to standard error.
pub(crate) fn device_error(what: &str) -> Error {
    eprintln!("gpuhash-shard: {what}");
    Error::Driver(DriverError(cudaError_enum::CUDA_ERROR_UNKNOWN))
}

/// One rank's communicator handle, owned: destroyed when dropped.
#[derive(Debug)]
pub(crate) struct RawComm(sys::ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread so long as calls on it are not
// concurrent; the table serializes every batch under one lock.
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

impl Drop for RawComm {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful init and is destroyed once, here; no
        // call on it can be in flight, since every exchange waits for its group to end.
        let _ = unsafe { result::comm_destroy(self.0) };
    }
}

/// One communicator a device, ranks in the order of `ordinals`, in this process.
pub(crate) fn init_all(ordinals: &[usize]) -> Result<Vec<RawComm>> {
    if !nccl_loaded() {
        return Err(Error::InvalidInput(NCCL_MISSING.into()));
    }
    let devices: Vec<i32> = ordinals.iter().map(|&o| o as i32).collect();
    let mut comms = vec![std::ptr::null_mut(); devices.len()];
    // SAFETY: `comms` has room for one handle a device of `devices`, both of its length.
    unsafe { result::comm_init_all(comms.as_mut_ptr(), devices.len() as i32, devices.as_ptr()) }
        .map_err(|e| nccl_error("ncclCommInitAll", e))?;
    Ok(comms.into_iter().map(RawComm).collect())
}

/// A fresh NCCL unique id (`ncclGetUniqueId`), as its bytes.
pub(crate) fn unique_id() -> Result<[u8; 128]> {
    if !nccl_loaded() {
        return Err(Error::InvalidInput(NCCL_MISSING.into()));
    }
    let id = result::get_uniqueid().map_err(|e| nccl_error("ncclGetUniqueId", e))?;
    Ok(id.internal.map(|byte| byte as u8))
}

/// Rank `rank` of `ranks` in the communicator of `id`, on `stream`'s device
/// (`ncclCommInitRank`, which waits for every rank to join).
pub(crate) fn init_rank(
    stream: &Stream,
    id: &[u8; 128],
    rank: usize,
    ranks: usize,
) -> Result<RawComm> {
    if !nccl_loaded() {
        return Err(Error::InvalidInput(NCCL_MISSING.into()));
    }
    // NCCL takes the device of the calling thread's current context.
    stream.cuda_stream().context().bind_to_thread()?;
    let id = sys::ncclUniqueId {
        internal: id.map(|byte| byte as core::ffi::c_char),
    };
    let mut comm = std::ptr::null_mut();
    // SAFETY: `comm` is one handle's room; the id is passed by value; `rank` and `ranks`
    // fit an i32 (the caller checked `ranks` does and `rank` is below it).
    unsafe { result::comm_init_rank(&mut comm, ranks as i32, id, rank as i32) }
        .map_err(|e| nccl_error("ncclCommInitRank", e))?;
    Ok(RawComm(comm))
}

/// What a failure to open NCCL says.
pub(crate) const NCCL_MISSING: &str = "the NCCL library (libnccl.so.2) could not be loaded: put \
     its directory on LD_LIBRARY_PATH (from the nvidia-nccl-cu13 Python package: \
     site-packages/nvidia/nccl/lib)";

/// The sends and receives of one exchange, queued between a group start and its end so
/// that NCCL runs them all at once (an all-to-all built from point-to-point calls).
pub(crate) struct Group {
    open: bool,
}

impl Group {
    /// Starts a group.
    pub(crate) fn start() -> Result<Self> {
        result::group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
        Ok(Self { open: true })
    }

    /// Queues a send of `buffer`'s bytes to `peer` on `stream`.
    pub(crate) fn send<T: bytemuck::Pod>(
        &mut self,
        comm: &RawComm,
        stream: &Stream,
        buffer: &DeviceBuffer<T>,
        peer: usize,
    ) -> Result<()> {
        let at = buffer.address(stream);
        // SAFETY: the address and byte count are `buffer`'s own, on `stream`'s device; the
        // caller keeps `buffer` alive until the group ends and its stream has run it.
        unsafe {
            result::send(
                at.address as *const core::ffi::c_void,
                buffer.size_bytes(),
                sys::ncclDataType_t::ncclUint8,
                peer as i32,
                comm.0,
                stream.cuda_stream().cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| nccl_error("ncclSend", e))?;
        Ok(())
    }

    /// Queues a receive from `peer` into `buffer`'s bytes on `stream`.
    pub(crate) fn recv<T: bytemuck::Pod>(
        &mut self,
        comm: &RawComm,
        stream: &Stream,
        buffer: &mut DeviceBuffer<T>,
        peer: usize,
    ) -> Result<()> {
        let bytes = buffer.size_bytes();
        let at = buffer.address_mut(stream);
        // SAFETY: as for `send`: `buffer`'s own address and bytes, kept alive by the caller.
        unsafe {
            result::recv(
                at.address as *mut core::ffi::c_void,
                bytes,
                sys::ncclDataType_t::ncclUint8,
                peer as i32,
                comm.0,
                stream.cuda_stream().cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| nccl_error("ncclRecv", e))?;
        Ok(())
    }

    /// Ends the group: NCCL queues every send and receive on its stream.
    pub(crate) fn end(mut self) -> Result<()> {
        self.open = false;
        result::group_end().map_err(|e| nccl_error("ncclGroupEnd", e))?;
        Ok(())
    }
}

impl Drop for Group {
    /// A group left by an error is still ended, so that NCCL's group depth stays balanced.
    fn drop(&mut self) {
        if self.open {
            let _ = result::group_end();
        }
    }
}
