//! The map's device view (`gpuhash/slab_hash_view.cuh`) probed from kernels compiled at
//! run time with NVRTC, every answer held against the map's own `get`. The compile test
//! needs the NVRTC library only; the probes a CUDA device too. Run on a GPU machine with
//! `--include-ignored` (see docs/gpu-testing.md).

use gpuhash_core::table::{Key, Map};
use gpuhash_slab_hash::{SlabHashMap, SlabHashOptions, view};
use gpuhash_test_support::{
    SeededRng, ViewSizes, assert_includes_are_shipped, device, key_from_bits,
    probe_through_view as probe_with, shared_memory, view_scenario,
};

/// Kernels that answer each query as `get` does: `found[i]` and the value's words (as many
/// as the view says). The `_u64` kernel also serves a map of `u32` keys, where it must
/// find nothing.
const PROBES: &str = r#"
#include "gpuhash/slab_hash_view.cuh"

template <typename K, typename Find>
__device__ void probe_all(const GhSlabView &view, const K *keys, unsigned long long n,
                          unsigned char *found, uint32_t *values, Find find) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        found[i] = find(&view, keys[i], values + i * view.value_words) ? 1 : 0;
    }
}

extern "C" __global__ void probe_u32(GhSlabView view, const uint32_t *keys, unsigned long long n,
                                     unsigned char *found, uint32_t *values) {
    probe_all(view, keys, n, found, values, gh_slab_find_u32);
}

extern "C" __global__ void probe_u64(GhSlabView view, const uint64_t *keys, unsigned long long n,
                                     unsigned char *found, uint32_t *values) {
    probe_all(view, keys, n, found, values, gh_slab_find_u64);
}
"#;

#[test]
#[ignore = "needs the NVRTC library"]
fn the_public_header_compiles_with_nvrtc() {
    let ptx = view::HEADERS
        .compile_ptx_for((9, 0), PROBES)
        .expect("the probes compile");
    let text = ptx.to_src();
    assert!(text.contains(".entry probe_u32"), "{text}");
    assert!(text.contains(".entry probe_u64"), "{text}");
}

#[test]
fn every_quoted_include_of_a_shipped_header_is_shipped() {
    assert_includes_are_shipped(&view::HEADERS);
}

/// `found` and values of `queries` (keys of the kernel's width) as the NVRTC kernel
/// `kernel` answers them through a view of `map`.
fn probe_through_view<K: Key, V: Key, Q: Key>(
    map: &SlabHashMap<K, V>,
    kernel: &str,
    queries: &[Q],
) -> (Vec<u8>, Vec<V>) {
    let stream = device().new_stream().unwrap();
    let view = map.device_view(&stream).unwrap();
    probe_with(&view::HEADERS, PROBES, kernel, &stream, view.raw(), queries)
}

/// Probes `queries` through the view and through `get`, and holds them equal.
fn assert_view_answers_as_get<K: Key, V: Key>(map: &SlabHashMap<K, V>, queries: &[K], what: &str) {
    let kernel = if K::WORDS == 1 {
        "probe_u32"
    } else {
        "probe_u64"
    };
    let (found, values) = probe_through_view(map, kernel, queries);
    let expected = map.get(queries).unwrap();
    for (i, want) in expected.iter().enumerate() {
        let got = (found[i] != 0).then_some(values[i]);
        assert_eq!(got, *want, "{what}: key {:?} (query {i})", queries[i]);
    }
}

/// Present keys (random and adversarial: the three reserved words among them), absent
/// keys, then the same after removes left tombstones and after growth linked more slabs.
fn view_matches_get<K: Key, V: Key>() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(u64::from(K::WORDS * 2 + V::WORDS));
    // Few buckets, so that lists run several slabs long.
    let map = SlabHashMap::<K, V>::new(device(), SlabHashOptions::with_capacity(1 << 12)).unwrap();
    let reserved: Vec<K> = (0..3)
        .map(|below| key_from_bits(u64::MAX - below))
        .collect();
    let sizes = ViewSizes {
        first: 100_000,
        absent: 30_000,
        growth: 300_000,
    };
    view_scenario(&map, &mut rng, &reserved, sizes, assert_view_answers_as_get);
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_view_answers_as_get_for_u32_keys_and_values() {
    view_matches_get::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_view_answers_as_get_for_u32_keys_and_u64_values() {
    view_matches_get::<u32, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_view_answers_as_get_for_u64_keys() {
    view_matches_get::<u64, u32>();
    view_matches_get::<u64, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_view_probed_at_the_other_key_width_finds_nothing() {
    let _memory = shared_memory();
    let map = SlabHashMap::<u32, u32>::with_capacity(device(), 1024).unwrap();
    let keys: Vec<u32> = (0..1000).chain([u32::MAX]).collect();
    map.insert(&keys, &keys).unwrap();
    let widened: Vec<u64> = keys.iter().map(|&k| u64::from(k)).collect();
    let (found, _) = probe_through_view(&map, "probe_u64", &widened);
    assert!(found.iter().all(|&f| f == 0));
}
