//! The standard workload of DESIGN.md, one definition for every test and benchmark.
//!
//! Pair `i` is the key `fmix32(i)` with the value `i + 1`; since fmix32 is a bijection,
//! distinct indices give distinct keys. Misses use the same generator offset by 2^31, so
//! a miss set never meets a hit set as long as both use indices below 2^31.

use crate::hash::fmix32;
use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::GhWorkloadParams;
use crate::{DeviceBuffer, Error, Result, Stream};

static WORKLOAD_IMAGE: KernelImage = crate::kernel_image!("workload");
static GENERATE: Kernel<GhWorkloadParams> = Kernel::new(&WORKLOAD_IMAGE, "gh_generate_workload");

// SAFETY: bindgen's repr(C) copy of the C struct the kernel takes.
unsafe impl KernelParams for GhWorkloadParams {}

/// Pairs a thread of the generator kernel writes.
const PAIRS_PER_THREAD: u64 = 4;

/// Indices of either key set stay below this, so hits and misses never meet.
pub const INDEX_LIMIT: u32 = 1 << 31;

/// Which keys to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySet {
    /// Keys that a table built from the workload holds: `fmix32(i)`.
    Hits,
    /// Keys that no such table holds: `fmix32(i + 2^31)`.
    Misses,
}

impl KeySet {
    fn index_offset(self) -> u32 {
        match self {
            KeySet::Hits => 0,
            KeySet::Misses => INDEX_LIMIT,
        }
    }

    /// The key of index `i`, computed on the host.
    pub fn key(self, i: u32) -> u32 {
        fmix32(i.wrapping_add(self.index_offset()))
    }
}

/// The value paired with index `i`.
pub fn value(i: u32) -> u32 {
    i.wrapping_add(1)
}

/// The keys and values of indices `first..first + count`, computed on the host.
pub fn host_pairs(set: KeySet, first: u32, count: u32) -> (Vec<u32>, Vec<u32>) {
    (first..first.saturating_add(count))
        .map(|i| (set.key(i), value(i)))
        .unzip()
}

/// Queues, on `stream`, the keys of indices `first..first + keys.len()` into `keys` and,
/// when given, their values into `values` (which must have the keys' length).
pub fn generate(
    stream: &Stream,
    set: KeySet,
    first: u32,
    keys: &mut DeviceBuffer<u32>,
    values: Option<&mut DeviceBuffer<u32>>,
) -> Result<()> {
    let count = keys.len();
    if let Some(values) = &values
        && values.len() != count
    {
        return Err(Error::LengthMismatch {
            what: "workload::generate: keys and values",
            left: count,
            right: values.len(),
        });
    }
    if u64::from(first) + count as u64 > u64::from(INDEX_LIMIT) {
        return Err(Error::InvalidInput(format!(
            "workload indices {first}..{first}+{count} pass 2^31, where hit and miss keys would meet"
        )));
    }
    if count == 0 {
        return Ok(());
    }
    let shape = LaunchShape::grid_stride(
        stream.device(),
        (count as u64).div_ceil(PAIRS_PER_THREAD),
        256,
    );
    let key_address = keys.address_mut(stream);
    let value_address = values.map(|v| v.address_mut(stream));
    let params = GhWorkloadParams {
        keys: key_address.address as *mut u32,
        values: value_address
            .as_ref()
            .map_or(std::ptr::null_mut(), |v| v.address as *mut u32),
        count: count as u64,
        first_index: first,
        index_offset: set.index_offset(),
    };
    // SAFETY: keys (and values, when not null) are live buffers of `count` u32 values,
    // held by their guards until the launch is queued; whole allocations are 256-byte
    // aligned, as the kernel's 16-byte stores need, and it writes indices below count only.
    unsafe { GENERATE.launch(stream, shape, params) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_and_misses_are_disjoint_and_unique() {
        let (hits, values) = host_pairs(KeySet::Hits, 0, 1 << 16);
        let (misses, _) = host_pairs(KeySet::Misses, 0, 1 << 16);
        let mut all: Vec<u32> = hits.iter().chain(&misses).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 2 << 16);
        assert_eq!(values[0], 1);
        assert_eq!(values[(1 << 16) - 1], 1 << 16);
    }
}
