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

/// `count` keys of `ranks` distinct ones, Zipf-skewed with exponent 1.0 (rank r, from 0,
/// drawn with probability about proportional to 1 / (r + 1)): the key of rank r is
/// [`KeySet::Hits`]'s key of index r. Deterministic for a `seed`; computed on the host.
pub fn zipf_keys(count: usize, ranks: u32, seed: u64) -> Vec<u32> {
    let mut state = seed;
    let log_span = f64::from(ranks).ln_1p();
    (0..count)
        .map(|_| {
            let unit = (splitmix64(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
            // The inverse of the continuous CDF ln(1 + x) / ln(1 + ranks).
            let rank = ((unit * log_span).exp() - 1.0) as u32;
            KeySet::Hits.key(rank.min(ranks - 1))
        })
        .collect()
}

/// The next word of SplitMix64.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

    #[test]
    fn zipf_keys_are_skewed_and_repeatable() {
        let keys = zipf_keys(1 << 16, 1 << 20, 7);
        assert_eq!(keys, zipf_keys(1 << 16, 1 << 20, 7));
        let top = keys.iter().filter(|&&k| k == KeySet::Hits.key(0)).count();
        // ln 2 / ln(2^20 + 1) of the draws, about 5%.
        assert!((2500..4100).contains(&top), "rank 0 drawn {top} times");
        let ranks: std::collections::HashSet<u32> = keys.iter().copied().collect();
        assert!(ranks.len() > 10_000 && ranks.len() < 1 << 16);
    }
}
