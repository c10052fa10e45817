//! The device view (`gpuhash/cuckoo_view.cuh`) probed from kernels compiled at run time
//! with NVRTC, every answer held against the table's own `get`. The compile tests need
//! the NVRTC library only; the probes a CUDA device too. Run on a GPU machine with
//! `--include-ignored` (see docs/gpu-testing.md).

use gpuhash_core::Error;
use gpuhash_core::table::{ErrorKind, Key, Map, Value};
use gpuhash_cuckoo::{CuckooOptions, CuckooTable, view};
use gpuhash_test_support::{
    SeededRng, ViewSizes, assert_includes_are_shipped, device, key_from_bits,
    probe_through_view as probe_with, shared_memory, view_scenario,
};

/// Kernels that answer each query as `get` does: `found[i]` and the value's words. The
/// `_u64` kernel also serves a table of `u32` keys, where it must find nothing.
const PROBES: &str = r#"
#include "gpuhash/cuckoo_view.cuh"

template <typename K, typename Find>
__device__ void probe_all(const GhCuckooView &view, const K *keys, unsigned long long n,
                          unsigned char *found, uint32_t *values, Find find) {
    __shared__ GhCuckooView table;
    gh_cuckoo_share_view(view, &table);
    const uint32_t words = table.table.value_words;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        found[i] = find(&table, keys[i], values + i * words) ? 1 : 0;
    }
}

extern "C" __global__ void probe_u32(GhCuckooView view, const uint32_t *keys, unsigned long long n,
                                     unsigned char *found, uint32_t *values) {
    probe_all(view, keys, n, found, values, gh_cuckoo_find_u32);
}

extern "C" __global__ void probe_u64(GhCuckooView view, const uint64_t *keys, unsigned long long n,
                                     unsigned char *found, uint32_t *values) {
    probe_all(view, keys, n, found, values, gh_cuckoo_find_u64);
}
"#;

/// Compute capability the compile-only tests aim at (the H100's).
const HOPPER: (i32, i32) = (9, 0);

#[test]
#[ignore = "needs the NVRTC library"]
fn the_public_header_compiles_with_nvrtc() {
    let ptx = view::HEADERS
        .compile_ptx_for(HOPPER, PROBES)
        .expect("the probes compile");
    let text = ptx.to_src();
    assert!(text.contains(".entry probe_u32"), "{text}");
    assert!(text.contains(".entry probe_u64"), "{text}");
}

#[test]
#[ignore = "needs the NVRTC library"]
fn a_kernel_that_does_not_compile_is_an_error_with_the_log() {
    let error = view::HEADERS
        .compile_ptx_for(HOPPER, "extern \"C\" __global__ void k() { nope(); }")
        .expect_err("undefined function");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    match error {
        Error::Compile(log) => assert!(log.contains("nope"), "{log}"),
        other => panic!("not a compile error: {other}"),
    }
}

#[test]
fn a_source_with_a_nul_byte_is_refused_before_nvrtc() {
    let error = view::HEADERS
        .compile_ptx_for(HOPPER, "int x;\0")
        .expect_err("NUL byte");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
}

#[test]
fn the_headers_are_shipped_and_written_out() {
    let dir = std::env::temp_dir().join(format!("gpuhash-view-test-{}", std::process::id()));
    view::HEADERS
        .write(&dir)
        .expect("writable temporary directory");
    for (name, source) in view::HEADERS.0 {
        assert_eq!(&std::fs::read_to_string(dir.join(name)).unwrap(), source);
    }
    assert_includes_are_shipped(&view::HEADERS);
    std::fs::remove_dir_all(dir).unwrap();
}

/// `found` and values of `queries` (keys of the kernel's width) as the NVRTC kernel
/// `kernel` (`probe_u32` or `probe_u64`) answers them through a view of `table`.
fn probe_through_view<K: Key, V: Value, Q: Key>(
    table: &CuckooTable<K, V>,
    kernel: &str,
    queries: &[Q],
) -> (Vec<u8>, Vec<V>) {
    let stream = device().new_stream().unwrap();
    let view = table.device_view(&stream).unwrap();
    probe_with(&view::HEADERS, PROBES, kernel, &stream, view.raw(), queries)
}

/// Probes `queries` through the view and through `get`, and holds them equal.
fn assert_view_answers_as_get<K: Key, V: Value>(
    table: &CuckooTable<K, V>,
    queries: &[K],
    what: &str,
) {
    let kernel = if K::WORDS == 1 {
        "probe_u32"
    } else {
        "probe_u64"
    };
    let (found, values) = probe_through_view(table, kernel, queries);
    let expected = table.get(queries).unwrap();
    for (i, want) in expected.iter().enumerate() {
        let got = (found[i] != 0).then_some(values[i]);
        assert_eq!(got, *want, "{what}: key {:?} (query {i})", queries[i]);
    }
}

/// Present keys (random and adversarial, the reserved all-ones key among them), absent
/// keys, then the same after removes turned buckets dirty and after growth resized.
fn view_matches_get<K: Key, V: Value>() {
    let _memory = shared_memory();
    let mut rng = SeededRng::new(K::WORDS.into());
    let table = CuckooTable::<K, V>::new(device(), CuckooOptions::with_capacity(0)).unwrap();
    // The reserved all-ones key goes in; the other adversarial keys half in, half not.
    let reserved = [key_from_bits::<K>(u64::MAX)];
    let sizes = ViewSizes {
        first: 200_000,
        absent: 50_000,
        growth: 400_000,
    };
    view_scenario(
        &table,
        &mut rng,
        &reserved,
        sizes,
        assert_view_answers_as_get,
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_view_answers_as_get_for_u32_keys() {
    view_matches_get::<u32, u32>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_view_answers_as_get_for_u64_keys() {
    view_matches_get::<u64, u64>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_view_answers_as_get_for_wide_values() {
    view_matches_get::<u32, [u32; 4]>();
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_view_probed_at_the_other_key_width_finds_nothing() {
    let _memory = shared_memory();
    let table = CuckooTable::<u32, u32>::with_capacity(device(), 1024).unwrap();
    let keys: Vec<u32> = (0..1000).chain([u32::MAX]).collect();
    table.insert(&keys, &keys).unwrap();
    let widened: Vec<u64> = keys.iter().map(|&k| u64::from(k)).collect();
    let (found, _) = probe_through_view(&table, "probe_u64", &widened);
    assert!(found.iter().all(|&f| f == 0));
}
