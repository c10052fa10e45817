//! The contract's conformance suite on swap tables whose children page on every batch,
//! one pair type and one way of reaching children on the host a test, and exports beside
//! threads that remove and reinsert keys.
//!
//! The suite takes the device-memory guards itself (its last check fills the device), so
//! these tests take none around it: a thread that held one would wait for itself.

use gpuhash_swap::SwapMap;
use gpuhash_test_support::{device, exports_under_churn, map_conformance, shared_memory};

use crate::common::{always_page, always_probe, paging, paging_options, slab_hash_children};

#[test]
#[ignore = "needs a CUDA device"]
fn two_of_eight_children_resident_u32_u64() {
    map_conformance(paging::<u32, u64>);
}

/// u32 keys with u32 values: DyHash children of packed buckets.
#[test]
#[ignore = "needs a CUDA device"]
fn two_of_eight_children_resident_u32_u32_packed() {
    map_conformance(paging::<u32, u32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn two_of_eight_children_resident_u64_u64() {
    map_conformance(paging::<u64, u64>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_always_page_u32_u64() {
    map_conformance(|device, capacity| {
        SwapMap::<u32, u64>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_page()),
        )
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_always_page_u32_u32_packed() {
    map_conformance(|device, capacity| {
        SwapMap::<u32, u32>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_page()),
        )
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_always_probe_u64_u64() {
    map_conformance(|device, capacity| {
        SwapMap::<u64, u64>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_probe()),
        )
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn lookups_always_probe_u32_u32_packed() {
    map_conformance(|device, capacity| {
        SwapMap::<u32, u32>::new(
            device,
            paging_options(device, capacity)?.cost_model(always_probe()),
        )
    });
}

/// Slab hash children cannot be probed in place: lookups always page them.
#[test]
#[ignore = "needs a CUDA device"]
fn slab_hash_children_which_always_page() {
    map_conformance(slab_hash_children);
}

/// Exports while two threads remove and reinsert keys on their own streams: each child's
/// export must hold only pairs someone inserted (the children's removals may still run on
/// the device while the next batch exports them).
#[test]
#[ignore = "needs a CUDA device"]
fn exports_beside_removals_and_reinserts_u32_u64() {
    let _memory = shared_memory();
    let table = paging::<u32, u64>(device(), 1 << 14).unwrap();
    exports_under_churn(&table, 8_000, 4).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn exports_beside_removals_and_reinserts_u32_u32_packed() {
    let _memory = shared_memory();
    let table = paging::<u32, u32>(device(), 1 << 14).unwrap();
    exports_under_churn(&table, 8_000, 4).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn exports_beside_removals_and_reinserts_slab_hash() {
    let _memory = shared_memory();
    let table = slab_hash_children(device(), 1 << 14).unwrap();
    exports_under_churn(&table, 8_000, 4).unwrap();
}
