//! SlabAlloc on a real GPU, held against a host model of which slabs are in use.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use std::collections::HashSet;
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use gpuhash_core::{Device, DeviceBuffer, Error, Stream};
use gpuhash_slab_alloc::{
    Claim, Fill, INVALID_SLAB, SlabAlloc, SlabAllocError, SlabAllocOptions, Variant,
};
use quickcheck::{QuickCheck, TestResult};

const VARIANTS: [Variant; 2] = [Variant::Regular, Variant::Light];
const CLAIMS: [Claim; 2] = [Claim::One, Claim::Runs];

/// Tests that fill the device's memory on purpose take this for writing; the others for
/// reading, so that none of them runs out of memory by accident while one does.
static DEVICE_MEMORY: RwLock<()> = RwLock::new(());

fn shared_memory() -> RwLockReadGuard<'static, ()> {
    DEVICE_MEMORY
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn all_memory() -> RwLockWriteGuard<'static, ()> {
    DEVICE_MEMORY
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn stream() -> &'static Stream {
    static STREAM: OnceLock<Stream> = OnceLock::new();
    STREAM.get_or_init(|| {
        let device = Device::default().expect("these tests need a CUDA device");
        device.new_stream().expect("new stream")
    })
}

fn allocator(variant: Variant, initial_slabs: u64) -> SlabAlloc {
    SlabAlloc::new(
        stream(),
        SlabAllocOptions {
            variant,
            initial_slabs,
        },
    )
    .unwrap()
}

/// Allocates `count` slabs once (no growth) and returns addresses and device pointers.
fn allocate_once(
    alloc: &SlabAlloc,
    count: usize,
    fill: Fill,
    start: &[u32],
    claim: Claim,
) -> (Vec<u32>, Vec<u64>, bool) {
    let s = stream();
    let mut addresses = if start.is_empty() {
        DeviceBuffer::<u32>::zeroed(s, count).unwrap()
    } else {
        DeviceBuffer::from_host(s, start).unwrap()
    };
    let mut pointers = DeviceBuffer::<u64>::zeroed(s, addresses.len()).unwrap();
    let exhaustion = alloc
        .allocate_into(s, &mut addresses, Some(&mut pointers), fill, claim)
        .unwrap();
    let exhausted = exhaustion.happened(s).unwrap();
    (
        addresses.to_host(s).unwrap(),
        pointers.to_host(s).unwrap(),
        exhausted,
    )
}

/// Every valid address is distinct, decodes on the host to the pointer the device
/// computed, and that pointer is 128-byte aligned.
fn check_addresses(alloc: &SlabAlloc, addresses: &[u32], pointers: &[u64]) -> HashSet<u32> {
    let decoder = alloc.decoder(stream());
    let mut seen = HashSet::new();
    for (&address, &pointer) in addresses.iter().zip(pointers) {
        if address == INVALID_SLAB {
            continue;
        }
        assert!(
            seen.insert(address),
            "address {address:#x} handed out twice"
        );
        assert_eq!(
            decoder.pointer(address),
            Some(pointer),
            "address {address:#x}"
        );
        assert_eq!(pointer % 128, 0);
    }
    seen
}

#[test]
#[ignore = "needs a CUDA device"]
fn many_warps_get_distinct_aligned_slabs_inside_the_allocator() {
    let _memory = shared_memory();
    for (variant, claim) in VARIANTS.into_iter().flat_map(|v| CLAIMS.map(|c| (v, c))) {
        let alloc = allocator(variant, 1 << 20);
        let count = 700_001;
        let (addresses, pointers, exhausted) = allocate_once(&alloc, count, Fill::All, &[], claim);
        assert!(!exhausted, "{variant:?} {claim:?}");
        let live = check_addresses(&alloc, &addresses, &pointers);
        assert_eq!(live.len(), count);
        assert_eq!(alloc.slabs_in_use(stream()).unwrap(), count as u64);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn freed_slabs_come_back_and_stay_distinct() {
    let _memory = shared_memory();
    let s = stream();
    for variant in VARIANTS {
        let alloc = allocator(variant, 1 << 18);
        let (addresses, _, _) = allocate_once(&alloc, 200_000, Fill::All, &[], Claim::One);
        // Free every element whose index hashes odd: half, spread over all blocks.
        let odd = |i: usize| gpuhash_core::hash::fmix32(i as u32) & 1 == 1;
        let freed: Vec<u32> = addresses
            .iter()
            .enumerate()
            .filter(|&(i, _)| odd(i))
            .map(|(_, &a)| a)
            .collect();
        let kept: HashSet<u32> = addresses
            .iter()
            .enumerate()
            .filter(|&(i, _)| !odd(i))
            .map(|(_, &a)| a)
            .collect();
        alloc
            .deallocate(s, &DeviceBuffer::from_host(s, &freed).unwrap())
            .unwrap();
        assert_eq!(alloc.slabs_in_use(s).unwrap(), kept.len() as u64);

        let (again, pointers, exhausted) =
            allocate_once(&alloc, freed.len(), Fill::All, &[], Claim::One);
        assert!(!exhausted);
        let new = check_addresses(&alloc, &again, &pointers);
        assert!(
            new.is_disjoint(&kept),
            "{variant:?}: a slab in use was handed out again"
        );
        assert_eq!(alloc.slabs_in_use(s).unwrap(), 200_000);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn exhaustion_is_reported_then_growth_serves_the_rest() {
    let _memory = shared_memory();
    let s = stream();
    for (variant, claim) in VARIANTS.into_iter().flat_map(|v| CLAIMS.map(|c| (v, c))) {
        let mut alloc = allocator(variant, 1024);
        assert_eq!(alloc.slabs_reserved(), 1024);
        let (first, pointers, exhausted) = allocate_once(&alloc, 5000, Fill::All, &[], claim);
        assert!(exhausted, "{variant:?}: 5000 slabs cannot fit in 1024");
        let got = check_addresses(&alloc, &first, &pointers);
        assert!(
            got.len() <= 1024
                && first.iter().filter(|&&a| a == INVALID_SLAB).count() == 5000 - got.len()
        );
        assert_eq!(alloc.slabs_in_use(s).unwrap(), got.len() as u64);

        while alloc.slabs_reserved() < 5000 * 4 {
            alloc.grow(s).unwrap();
        }
        let (second, pointers, exhausted) = allocate_once(&alloc, 0, Fill::Invalid, &first, claim);
        assert!(!exhausted);
        // Elements served in the first round keep their address and get no pointer
        // written; the rest are checked like any fresh allocation.
        let decoder = alloc.decoder(s);
        for (i, &address) in first.iter().enumerate() {
            if address != INVALID_SLAB {
                assert_eq!(
                    (second[i], pointers[i]),
                    (address, 0),
                    "{variant:?}: element {i} was served twice"
                );
                assert!(decoder.pointer(address).is_some());
            }
        }
        let refilled: Vec<(u32, u64)> = (0..first.len())
            .filter(|&i| first[i] == INVALID_SLAB)
            .map(|i| (second[i], pointers[i]))
            .collect();
        let (refilled, refilled_pointers): (Vec<u32>, Vec<u64>) = refilled.into_iter().unzip();
        let new = check_addresses(&alloc, &refilled, &refilled_pointers);
        assert_eq!(new.len(), 5000 - got.len());
        assert!(
            new.is_disjoint(&got),
            "{variant:?}: a slab was handed out twice"
        );
        assert_eq!(alloc.slabs_in_use(s).unwrap(), 5000);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn bulk_allocation_grows_by_doubling_and_reset_frees_all() {
    let _memory = shared_memory();
    let s = stream();
    for variant in VARIANTS {
        let mut alloc = allocator(variant, 1);
        let mut addresses = DeviceBuffer::<u32>::zeroed(s, 300_000).unwrap();
        alloc.allocate(s, &mut addresses).unwrap();
        let reserved = alloc.slabs_reserved();
        assert!(
            (300_000..=4 * 300_000).contains(&reserved),
            "{variant:?}: {reserved} slabs reserved"
        );
        assert!(alloc.bytes_reserved() as u64 >= reserved * 128);
        let list = addresses.to_host(s).unwrap();
        assert_eq!(list.iter().collect::<HashSet<_>>().len(), 300_000);
        assert!(!list.contains(&INVALID_SLAB));
        assert_eq!(alloc.slabs_in_use(s).unwrap(), 300_000);

        alloc.reset(s).unwrap();
        assert_eq!(alloc.slabs_in_use(s).unwrap(), 0);
        assert_eq!(alloc.slabs_reserved(), reserved, "reset keeps the memory");
        let (again, pointers, exhausted) = allocate_once(&alloc, 1000, Fill::All, &[], Claim::One);
        assert!(!exhausted);
        assert_eq!(check_addresses(&alloc, &again, &pointers).len(), 1000);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn foreign_and_double_freed_addresses_are_refused_and_counted() {
    let _memory = shared_memory();
    let s = stream();
    for variant in VARIANTS {
        let alloc = allocator(variant, 2048);
        let (addresses, _, _) = allocate_once(&alloc, 100, Fill::All, &[], Claim::One);
        let mut batch = addresses[..50].to_vec();
        batch.extend([
            INVALID_SLAB,
            0xfe00_0000,
            0x00ff_ffff,
            2048 * 1024,
            addresses[0],
        ]);
        let result = alloc.deallocate(s, &DeviceBuffer::from_host(s, &batch).unwrap());
        // 0xfe000000: super block 254 (absent); 0x00ffffff: block 16383 (absent);
        // 2048 * 1024: past a light array of 2048 slabs, or block 2048 of super block 0;
        // addresses[0] again: already free. The invalid word is skipped, not counted.
        assert!(
            matches!(result, Err(SlabAllocError::ForeignAddresses { count: 4 })),
            "{variant:?}: {result:?}"
        );
        assert_eq!(
            alloc.slabs_in_use(s).unwrap(),
            50,
            "the 50 real slabs were freed all the same"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn running_out_of_device_memory_is_an_error_and_changes_nothing() {
    let _memory = all_memory();
    let s = stream();
    let device = s.device();
    let too_many = device.properties().total_memory as u64 / 128 * 2;
    let refused = SlabAlloc::new(
        s,
        SlabAllocOptions {
            variant: Variant::Regular,
            initial_slabs: too_many,
        },
    );
    assert!(matches!(
        refused,
        Err(SlabAllocError::Device(Error::OutOfDeviceMemory))
    ));

    for variant in VARIANTS {
        let mut alloc = allocator(variant, 1 << 24); // 2 GiB
        let (addresses, _, _) = allocate_once(&alloc, 1000, Fill::All, &[], Claim::One);
        let reserved = alloc.slabs_reserved();
        let filler_bytes = device.free_memory().unwrap().saturating_sub(1 << 30);
        let filler = DeviceBuffer::<u8>::zeroed(s, filler_bytes).unwrap();
        assert!(
            matches!(
                alloc.grow(s),
                Err(SlabAllocError::Device(Error::OutOfDeviceMemory))
            ),
            "{variant:?}"
        );
        assert_eq!(alloc.slabs_reserved(), reserved);
        assert_eq!(alloc.slabs_in_use(s).unwrap(), 1000);
        let (more, pointers, exhausted) = allocate_once(&alloc, 1000, Fill::All, &[], Claim::One);
        assert!(!exhausted);
        let more = check_addresses(&alloc, &more, &pointers);
        assert!(more.is_disjoint(&addresses.iter().copied().collect()));
        drop(filler);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn streams_of_several_threads_share_one_allocator() {
    let _memory = shared_memory();
    let alloc = allocator(Variant::Regular, 1 << 20);
    let device = stream().device().clone();
    let lists: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (alloc, device) = (&alloc, device.clone());
                scope.spawn(move || {
                    let s = device.new_stream().unwrap();
                    let mut addresses = DeviceBuffer::<u32>::zeroed(&s, 100_000).unwrap();
                    let exhaustion = alloc
                        .allocate_into(&s, &mut addresses, None, Fill::All, Claim::One)
                        .unwrap();
                    assert!(!exhaustion.happened(&s).unwrap());
                    addresses.to_host(&s).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: HashSet<u32> = lists.iter().flatten().copied().collect();
    assert_eq!(all.len(), 400_000);
    assert_eq!(alloc.slabs_in_use(stream()).unwrap(), 400_000);
}

/// A random sequence of rounds: allocate `sizes[i]` slabs, then free the ones whose seed
/// bit is set; the allocator's count and distinctness follow a host set throughout.
fn random_rounds_match_the_model(sizes: Vec<u16>, seed: u32, light: bool) -> TestResult {
    if sizes.is_empty() {
        return TestResult::discard();
    }
    let s = stream();
    let variant = if light {
        Variant::Light
    } else {
        Variant::Regular
    };
    let mut alloc = allocator(variant, 1 + u64::from(seed % 5000));
    let mut live: HashSet<u32> = HashSet::new();
    for (round, &size) in sizes.iter().enumerate() {
        let mut addresses = DeviceBuffer::<u32>::zeroed(s, usize::from(size)).unwrap();
        alloc.allocate(s, &mut addresses).unwrap();
        let fresh = addresses.to_host(s).unwrap();
        for &address in &fresh {
            if address == INVALID_SLAB || !live.insert(address) {
                return TestResult::error(format!(
                    "round {round}: {address:#x} invalid or already live"
                ));
            }
        }
        let freed: Vec<u32> = live
            .iter()
            .copied()
            .filter(|a| gpuhash_core::hash::fmix32(a ^ seed ^ round as u32).is_multiple_of(3))
            .collect();
        alloc
            .deallocate(s, &DeviceBuffer::from_host(s, &freed).unwrap())
            .unwrap();
        for address in &freed {
            live.remove(address);
        }
        if alloc.slabs_in_use(s).unwrap() != live.len() as u64 {
            return TestResult::error(format!(
                "round {round}: device counts differ from the model's {}",
                live.len()
            ));
        }
    }
    TestResult::passed()
}

#[test]
#[ignore = "needs a CUDA device"]
fn random_allocation_rounds_match_a_host_model() {
    let _memory = shared_memory();
    QuickCheck::new()
        .tests(40)
        .quickcheck(random_rounds_match_the_model as fn(Vec<u16>, u32, bool) -> TestResult);
}
