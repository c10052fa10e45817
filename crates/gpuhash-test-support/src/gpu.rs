//! The device the tests of one process share, and the lock that keeps tests that fill its
//! memory apart from the others.

use std::sync::OnceLock;
use std::time::Duration;

use gpuhash_core::{Device, DeviceBuffer, Stream};

use crate::memory_lock::{MemoryGuard, MemoryLock};

/// How long a test waits for the device-memory lock before it fails: long enough for the
/// slowest test that holds it, short enough that a hung holder shows up as a failure.
const LOCK_WAIT: Duration = Duration::from_secs(600);

/// Tests that fill the device's memory on purpose take the whole of it; the others share
/// it, so that none runs out of memory by accident while one does.
static DEVICE_MEMORY: MemoryLock = MemoryLock::new(LOCK_WAIT);

/// Device 0, opened once per process. Panics where there is none: call it only from tests
/// marked `#[ignore = "needs a CUDA device"]`.
pub fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(|| Device::default().expect("these tests need a CUDA device"))
}

/// A stream of [`device`], made once per process.
pub fn stream() -> &'static Stream {
    static STREAM: OnceLock<Stream> = OnceLock::new();
    STREAM.get_or_init(|| device().new_stream().expect("a stream of the test device"))
}

/// Held by a test that uses device memory as usual: many at once, none while a test holds
/// [`all_memory`].
///
/// A thread that holds a guard already gets another at once (a plain read lock would queue
/// behind a test waiting for [`all_memory`], which waits for this thread). Panics after
/// waiting 10 minutes for a test that holds [`all_memory`].
pub fn shared_memory() -> MemoryGuard {
    DEVICE_MEMORY.shared()
}

/// Held by a test that fills the device's memory on purpose: no other test runs on the
/// device meanwhile.
///
/// Panics at once on a thread that holds a guard already (it would wait for itself), and
/// after waiting 10 minutes for the tests that hold [`shared_memory`].
pub fn all_memory() -> MemoryGuard {
    DEVICE_MEMORY.all()
}

/// The smallest piece of memory the filler holds back.
const PIECE: usize = 1 << 20;

/// Takes all of the device's free memory but `room` bytes (within 1 MiB): allocates chunks
/// of 1 GiB, 64 MiB, 4 MiB and 1 MiB until the device refuses each (so memory the
/// stream-ordered pool keeps cached is taken too), frees chunks until `room` is free, and
/// takes back what that freed beyond it. Drop the chunks to give the memory back. Hold
/// [`all_memory`] meanwhile.
pub fn fill_device_except(stream: &Stream, room: usize) -> Vec<DeviceBuffer<u8>> {
    // Frees still pending on other streams leave memory in the pool that this stream
    // cannot take yet but a later batch could: let them finish first.
    stream
        .device()
        .synchronize()
        .expect("synchronize before filling the device");
    let mut chunks = Vec::new();
    for size in [1usize << 30, 64 << 20, 4 << 20, PIECE] {
        while let Ok(chunk) = DeviceBuffer::<u8>::zeroed(stream, size) {
            chunks.push(chunk);
        }
    }
    let mut freed = 0;
    while freed < room {
        freed += chunks.pop().map_or(room, |chunk| chunk.len());
    }
    // Frees are queued on `stream`; once done, work on other streams may reuse the memory.
    stream
        .synchronize()
        .expect("synchronize after filling the device");
    // Whole chunks may free far more than `room` (a large one, where the device had few
    // small ones to give): take the excess back in small pieces, so that the room left is
    // `room` within one piece whatever the device's memory looked like before.
    while freed >= room + PIECE {
        let Ok(piece) = DeviceBuffer::<u8>::zeroed(stream, PIECE) else {
            break;
        };
        chunks.push(piece);
        freed -= PIECE;
    }
    stream
        .synchronize()
        .expect("synchronize after taking the excess back");
    chunks
}
