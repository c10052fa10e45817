//! Small copies from the device into mapped pinned memory, made by a kernel.
//!
//! The copy engines run their queues in order: a readback of a few words (a batch's counts,
//! which the host waits for) queued behind a large copy to the host waits for all of it, a
//! millisecond behind a 52 MB page-out. A kernel's stores into mapped pinned memory cross
//! the bus beside the copy engines' work, so a copy of at most [`MAX_BYTES`] into a mapped
//! buffer goes that way; the buffer's pending marks treat it as the copy it replaces.

use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::GhCopyWordsParams;
use crate::{Result, Stream};

static COPY_IMAGE: KernelImage = crate::kernel_image!("copy");
static COPY_WORDS: Kernel<GhCopyWordsParams> = Kernel::new(&COPY_IMAGE, "gh_copy_words");

// SAFETY: bindgen's repr(C) copy of the C struct the kernel takes.
unsafe impl KernelParams for GhCopyWordsParams {}

/// The largest copy made by a kernel.
pub(crate) const MAX_BYTES: usize = 4096;

const WORD: usize = size_of::<u32>();

/// Whether a copy of `bytes` bytes from device address `from` to mapped address `to` is
/// made by a kernel: small, whole words, both ends word-aligned.
pub(crate) fn by_kernel(from: u64, to: u64, bytes: usize) -> bool {
    bytes <= MAX_BYTES
        && bytes.is_multiple_of(WORD)
        && from.is_multiple_of(WORD as u64)
        && to.is_multiple_of(WORD as u64)
}

/// Queues the copy of `bytes` bytes (a case of [`by_kernel`]) from `from` to `to` on
/// `stream`.
///
/// # Safety
///
/// `from` addresses `bytes` bytes of device memory that stay allocated, and unwritten by
/// other streams, until the kernel has run; `to` is the device address of `bytes` bytes of
/// mapped pinned memory that nothing reads, writes or frees until then.
pub(crate) unsafe fn copy_words(stream: &Stream, from: u64, to: u64, bytes: usize) -> Result<()> {
    let words = (bytes / WORD) as u64;
    let params = GhCopyWordsParams {
        from: from as *const u32,
        to: to as *mut u32,
        words,
    };
    let shape = LaunchShape::grid_stride(stream.device(), words, 128);
    // SAFETY: the caller's promise: both ranges hold `words` words for as long as the
    // kernel runs, and the kernel touches no other.
    unsafe { COPY_WORDS.launch(stream, shape, params) }
}
