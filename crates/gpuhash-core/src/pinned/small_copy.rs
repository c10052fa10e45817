//! Small copies made by kernels rather than copy engines.
//!
//! The copy engines run their queues in order: a readback of a few words (a batch's counts,
//! which the host waits for) queued behind a large copy to the host waits for all of it, a
//! millisecond behind a 52 MB page-out; an upload of a launch's list waits so behind a
//! page-in. A kernel's stores into mapped pinned memory cross the bus beside the copy
//! engines' work, so a copy of at most [`MAX_BYTES`] into a mapped buffer goes that way
//! (the buffer's pending marks treat it as the copy it replaces); and an upload of at most
//! [`MAX_INLINE_BYTES`] rides in the parameters of kernels that store it ([`upload`]),
//! which travel with the launches.

use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::{GH_INLINE_WORDS, GhCopyWordsParams, GhInlineWordsParams};
use crate::{Result, Stream};

static COPY_IMAGE: KernelImage = crate::kernel_image!("copy");
static COPY_WORDS: Kernel<GhCopyWordsParams> = Kernel::new(&COPY_IMAGE, "gh_copy_words");
static INLINE_WORDS: Kernel<GhInlineWordsParams> = Kernel::new(&COPY_IMAGE, "gh_inline_words");

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take.
unsafe impl KernelParams for GhCopyWordsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhInlineWordsParams {}

/// The largest upload carried in launch parameters: a few launches' worth.
pub(crate) const MAX_INLINE_BYTES: usize = 4 * GH_INLINE_WORDS as usize * WORD;

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

/// Whether an upload of `bytes` bytes to device address `to` rides in launch parameters
/// ([`upload`]): small, whole words, word-aligned.
pub(crate) fn inline(to: u64, bytes: usize) -> bool {
    bytes <= MAX_INLINE_BYTES && bytes.is_multiple_of(WORD) && to.is_multiple_of(WORD as u64)
}

/// Queues the upload of `bytes` (a case of [`inline`]) to device address `to` on `stream`:
/// a launch for each [`GH_INLINE_WORDS`] words, which carries them in its parameters.
///
/// # Safety
///
/// `to` addresses `bytes.len()` bytes of device memory that stay allocated, and that no
/// other work reads or writes, until the launches have run.
pub(crate) unsafe fn upload(stream: &Stream, to: u64, bytes: &[u8]) -> Result<()> {
    let chunk_bytes = GH_INLINE_WORDS as usize * WORD;
    for (at, chunk) in bytes.chunks(chunk_bytes).enumerate() {
        let mut params = GhInlineWordsParams {
            to: (to + (at * chunk_bytes) as u64) as *mut u32,
            words: (chunk.len() / WORD) as u32,
            pad: 0,
            data: [0; GH_INLINE_WORDS as usize],
        };
        bytemuck::cast_slice_mut::<u32, u8>(&mut params.data)[..chunk.len()].copy_from_slice(chunk);
        let shape = LaunchShape::grid_stride(stream.device(), u64::from(params.words), 128);
        // SAFETY: the caller's promise: the chunk's `words` words at its place hold no
        // other work's data until the launch has run; the kernel writes nothing else.
        unsafe { INLINE_WORDS.launch(stream, shape, params) }?;
    }
    Ok(())
}
