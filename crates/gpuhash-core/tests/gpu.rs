//! gpuhash-core on a real GPU, every result held against a host model.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use gpuhash_core::hash::{self, DeviceHash, Hash32, Hash64, Universal32, Universal64};
use gpuhash_core::image::{ImageHeader, PinnedImage, TableImage};
use gpuhash_core::layouts::{GH_PRIME32, GH_PRIME61, GH_SCAN_THREADS};
use gpuhash_core::table::Key;
use gpuhash_core::workload::{self, INDEX_LIMIT, KeySet};
use gpuhash_core::{Device, DeviceBuffer, Error, EventTimer, PinnedBuffer, PinnedPool, Stream};
use gpuhash_core::{last_copy, scan, staging};
use quickcheck::{QuickCheck, TestResult};
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

fn gpu() -> (Device, Stream) {
    let device = Device::default().expect("these tests need a CUDA device");
    let stream = device.new_stream().expect("new stream");
    (device, stream)
}

#[test]
fn opening_a_device_never_panics() {
    match Device::default() {
        Ok(device) => assert!(device.properties().multiprocessors > 0),
        Err(Error::NoDriver | Error::NoDevice { .. } | Error::DriverTooOld { .. }) => {}
        Err(other) => panic!("unexpected error opening device 0: {other}"),
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_reports_properties_and_rejects_missing_ordinals() {
    let (device, _) = gpu();
    let p = device.properties();
    assert!(!p.name.is_empty());
    assert!(p.multiprocessors > 0 && p.max_threads_per_multiprocessor >= 1024);
    assert!(p.compute_capability >= (7, 5));
    assert!(p.total_memory > (1 << 30) && p.l2_cache_bytes > 0);
    let free = device.free_memory().unwrap();
    assert!(free > 0 && free <= p.total_memory);
    let count = Device::count().unwrap();
    assert!(matches!(Device::new(count), Err(Error::NoDevice { ordinal, .. }) if ordinal == count));
}

#[test]
#[ignore = "needs a CUDA device"]
fn buffers_round_trip_and_check_lengths() {
    let (_, stream) = gpu();
    let data: Vec<u64> = (0..100_003u64).map(hash::fmix64).collect();
    let buffer = DeviceBuffer::from_host(&stream, &data).unwrap();
    assert_eq!(buffer.len(), data.len());
    assert_eq!(buffer.to_host(&stream).unwrap(), data);

    let mut copy = DeviceBuffer::<u64>::zeroed(&stream, data.len()).unwrap();
    assert!(copy.to_host(&stream).unwrap().iter().all(|&v| v == 0));
    copy.copy_from(&stream, &buffer).unwrap();
    assert_eq!(copy.to_host(&stream).unwrap(), data);

    let short = DeviceBuffer::<u64>::zeroed(&stream, 10).unwrap();
    assert!(matches!(
        copy.copy_from(&stream, &short),
        Err(Error::LengthMismatch { .. })
    ));
    assert!(matches!(
        copy.copy_from_host(&stream, &data[1..]),
        Err(Error::LengthMismatch { .. })
    ));
    let mut out = vec![0u64; 5];
    assert!(matches!(
        buffer.copy_to_host(&stream, &mut out),
        Err(Error::LengthMismatch { .. })
    ));
    assert_eq!(
        copy.to_host(&stream).unwrap(),
        data,
        "a refused copy changed nothing"
    );

    let empty = DeviceBuffer::<u32>::from_host(&stream, &[]).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.to_host(&stream).unwrap(), Vec::<u32>::new());
}

#[test]
#[ignore = "needs a CUDA device"]
fn allocating_more_than_the_device_holds_is_an_error_value() {
    let (device, stream) = gpu();
    let too_many = device.properties().total_memory / 4 * 2;
    assert!(matches!(
        DeviceBuffer::<u32>::zeroed(&stream, too_many),
        Err(Error::OutOfDeviceMemory)
    ));
    // The device stays usable afterwards.
    let after = DeviceBuffer::from_host(&stream, &[1u32, 2, 3]).unwrap();
    assert_eq!(after.to_host(&stream).unwrap(), vec![1, 2, 3]);
}

fn generated(stream: &Stream, set: KeySet, first: u32, count: usize) -> (Vec<u32>, Vec<u32>) {
    let mut keys = DeviceBuffer::from_host(stream, &vec![0xdead_beef; count]).unwrap();
    let mut values = DeviceBuffer::from_host(stream, &vec![0xdead_beef; count]).unwrap();
    workload::generate(stream, set, first, &mut keys, Some(&mut values)).unwrap();
    (
        keys.to_host(stream).unwrap(),
        values.to_host(stream).unwrap(),
    )
}

#[test]
#[ignore = "needs a CUDA device"]
fn generator_matches_the_host_model() {
    let (_, stream) = gpu();
    let cases = [
        (0, 1),
        (0, 3),
        (7, 5),
        (0, 1023),
        (12_345, 1 << 20),
        (0, (1 << 22) + 3),
        (INDEX_LIMIT - 9, 9),
    ];
    for set in [KeySet::Hits, KeySet::Misses] {
        for (first, count) in cases {
            let got = generated(&stream, set, first, count as usize);
            assert_eq!(
                got,
                workload::host_pairs(set, first, count),
                "{set:?} from {first}, {count} pairs"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn generator_refuses_bad_input_and_writes_nothing() {
    let (_, stream) = gpu();
    let poison = vec![7u32; 16];
    let mut keys = DeviceBuffer::from_host(&stream, &poison).unwrap();
    let mut values = DeviceBuffer::from_host(&stream, &poison[..15]).unwrap();
    let mismatch = workload::generate(&stream, KeySet::Hits, 0, &mut keys, Some(&mut values));
    assert!(matches!(mismatch, Err(Error::LengthMismatch { .. })));
    let past_limit = workload::generate(&stream, KeySet::Hits, INDEX_LIMIT - 15, &mut keys, None);
    assert!(matches!(past_limit, Err(Error::InvalidInput(_))));
    assert_eq!(keys.to_host(&stream).unwrap(), poison);

    workload::generate(&stream, KeySet::Misses, 4, &mut keys, None).unwrap();
    assert_eq!(
        keys.to_host(&stream).unwrap(),
        workload::host_pairs(KeySet::Misses, 4, 16).0
    );
    let mut empty = DeviceBuffer::<u32>::zeroed(&stream, 0).unwrap();
    workload::generate(&stream, KeySet::Hits, 0, &mut empty, None).unwrap();
}

fn device_hashes<H: DeviceHash>(stream: &Stream, h: H, keys: &[H::Key]) -> Vec<H::Key> {
    let input = DeviceBuffer::from_host(stream, keys).unwrap();
    let mut output = DeviceBuffer::<H::Key>::zeroed(stream, keys.len()).unwrap();
    hash::hash_on_device(stream, h, &input, &mut output).unwrap();
    output.to_host(stream).unwrap()
}

fn agrees<H: DeviceHash>(stream: &Stream, h: H, keys: &[H::Key]) -> bool
where
    H::Key: PartialEq,
{
    let host: Vec<H::Key> = keys.iter().map(|&k| h.hash(k)).collect();
    device_hashes(stream, h, keys) == host
}

const ADVERSARIAL32: [u32; 9] = [
    0,
    1,
    u32::MAX,
    u32::MAX - 1,
    GH_PRIME32 - 1,
    GH_PRIME32,
    GH_PRIME32 + 1,
    1 << 31,
    0xffff_0000,
];
const ADVERSARIAL64: [u64; 10] = [
    0,
    1,
    u64::MAX,
    u64::MAX - 1,
    GH_PRIME61 - 1,
    GH_PRIME61,
    GH_PRIME61 + 1,
    2 * GH_PRIME61 + 5,
    1 << 32,
    u32::MAX as u64,
];

#[test]
#[ignore = "needs a CUDA device"]
fn device_hashes_match_host_hashes_on_adversarial_keys() {
    let (_, stream) = gpu();
    let extreme32 =
        Hash32::Universal(Universal32::new(GH_PRIME32 - 1, GH_PRIME32 - 1, u32::MAX).unwrap());
    for h in [
        Hash32::Fmix,
        Hash32::Universal(Universal32::from_seed(1, 1 << 20).unwrap()),
        extreme32,
    ] {
        assert!(agrees(&stream, h, &ADVERSARIAL32), "{h:?}");
    }
    let extreme64 =
        Hash64::Universal(Universal64::new(GH_PRIME61 - 1, GH_PRIME61 - 1, u64::MAX).unwrap());
    for h in [
        Hash64::Fmix,
        Hash64::Universal(Universal64::from_seed(1, 1 << 40).unwrap()),
        extreme64,
    ] {
        assert!(agrees(&stream, h, &ADVERSARIAL64), "{h:?}");
    }
    let many: Vec<u32> = (0..(1u32 << 22) + 1).collect();
    assert!(agrees(&stream, Hash32::Fmix, &many));
    assert!(agrees(&stream, Hash32::Fmix, &[]));
}

/// One stream for the quickcheck properties, which must be plain functions.
fn shared_stream() -> &'static Stream {
    static STREAM: OnceLock<Stream> = OnceLock::new();
    STREAM.get_or_init(|| gpu().1)
}

fn random_keys_agree32(keys: Vec<u32>, seed: u64, buckets: u32) -> TestResult {
    let Ok(universal) = Universal32::from_seed(seed, buckets) else {
        return TestResult::discard();
    };
    let stream = shared_stream();
    TestResult::from_bool(
        agrees(stream, Hash32::Fmix, &keys) && agrees(stream, Hash32::Universal(universal), &keys),
    )
}

fn random_keys_agree64(keys: Vec<u64>, seed: u64, buckets: u64) -> TestResult {
    let Ok(universal) = Universal64::from_seed(seed, buckets) else {
        return TestResult::discard();
    };
    let stream = shared_stream();
    TestResult::from_bool(
        agrees(stream, Hash64::Fmix, &keys) && agrees(stream, Hash64::Universal(universal), &keys),
    )
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_hashes_match_host_hashes_on_random_keys() {
    QuickCheck::new()
        .tests(200)
        .quickcheck(random_keys_agree32 as fn(Vec<u32>, u64, u32) -> TestResult);
    QuickCheck::new()
        .tests(200)
        .quickcheck(random_keys_agree64 as fn(Vec<u64>, u64, u64) -> TestResult);
}

#[test]
#[ignore = "needs a CUDA device"]
fn hashing_refuses_mismatched_buffers() {
    let (_, stream) = gpu();
    let input = DeviceBuffer::from_host(&stream, &[1u32, 2, 3]).unwrap();
    let mut output = DeviceBuffer::from_host(&stream, &[9u32, 9]).unwrap();
    let result = hash::hash_on_device(&stream, Hash32::Fmix, &input, &mut output);
    assert!(matches!(result, Err(Error::LengthMismatch { .. })));
    assert_eq!(output.to_host(&stream).unwrap(), vec![9, 9]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn threads_share_a_device_each_on_its_own_stream() {
    let (device, _) = gpu();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let device = device.clone();
            scope.spawn(move || {
                let stream = device.new_stream().unwrap();
                let first = t * (1 << 20);
                for _ in 0..5 {
                    let got = generated(&stream, KeySet::Hits, first, 1 << 18);
                    assert_eq!(got, workload::host_pairs(KeySet::Hits, first, 1 << 18));
                }
            });
        }
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn event_timer_measures_device_work() {
    let (_, stream) = gpu();
    let mut keys = DeviceBuffer::<u32>::zeroed(&stream, 1 << 24).unwrap();
    let timer = EventTimer::start(&stream).unwrap();
    workload::generate(&stream, KeySet::Hits, 0, &mut keys, None).unwrap();
    let ms = timer.stop().unwrap();
    assert!(ms > 0.0 && ms < 10_000.0, "{ms} ms");
}

/// The last-copy tests run in parallel; the one that takes nearly all device memory runs
/// alone among them.
static MEMORY: RwLock<()> = RwLock::new(());

fn shared_memory() -> RwLockReadGuard<'static, ()> {
    MEMORY.read().unwrap_or_else(|e| e.into_inner())
}

fn all_memory() -> RwLockWriteGuard<'static, ()> {
    MEMORY.write().unwrap_or_else(|e| e.into_inner())
}

/// The host model of `last_copy::mark_repeated`: element `i` is repeated when a later
/// element holds its key.
fn repeated_model<K: Copy + Eq + std::hash::Hash>(keys: &[K]) -> Vec<u8> {
    let last: HashMap<K, usize> = keys.iter().enumerate().map(|(i, &k)| (k, i)).collect();
    keys.iter()
        .enumerate()
        .map(|(i, k)| u8::from(last[k] != i))
        .collect()
}

/// Both forms of the last-copy primitive against the model, with values that name their
/// element (its index, and its complement so that a value is checked whole).
fn last_copy_matches_the_model<K>(stream: &Stream, keys: &[K])
where
    K: Key,
{
    let model = repeated_model(keys);
    let d_keys = DeviceBuffer::from_host(stream, keys).unwrap();
    let mut repeated = DeviceBuffer::from_host(stream, &vec![7u8; keys.len()]).unwrap();
    last_copy::mark_repeated(stream, &d_keys, &mut repeated).unwrap();
    assert_eq!(
        repeated.to_host(stream).unwrap(),
        model,
        "{} keys",
        keys.len()
    );

    let values: Vec<[u32; 2]> = (0..keys.len() as u32).map(|i| [i, !i]).collect();
    let d_values = DeviceBuffer::from_host(stream, &values).unwrap();
    let (out_keys, out_values) = last_copy::last_copies(stream, &d_keys, &d_values).unwrap();
    let expected: Vec<(K, [u32; 2])> = keys
        .iter()
        .zip(&values)
        .zip(&model)
        .filter(|&(_, &r)| r == 0)
        .map(|((&k, &v), _)| (k, v))
        .collect();
    let got: Vec<(K, [u32; 2])> = out_keys
        .to_host(stream)
        .unwrap()
        .into_iter()
        .zip(out_values.to_host(stream).unwrap())
        .collect();
    assert_eq!(got.len(), expected.len(), "{} keys", keys.len());
    assert!(
        got == expected,
        "{} keys: compacted batch differs",
        keys.len()
    );
}

/// `n` keys drawn from `distinct` values (so most repeat), 0 and the all-ones key among
/// them, by a deterministic xorshift.
fn keys_with_repeats(n: usize, distinct: u64, seed: u64) -> Vec<u64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 101 {
                0 => 0,
                1 => u64::MAX,
                _ => hash::fmix64(state % distinct),
            }
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn last_copy_keeps_the_last_of_each_u32_key() {
    let _memory = shared_memory();
    let (_, stream) = gpu();
    let narrow = |keys: Vec<u64>| -> Vec<u32> { keys.into_iter().map(|k| k as u32).collect() };
    // Sizes around a tile (2048) and a scan chunk (256 tiles), and past both.
    for (n, distinct) in [
        (1, 1),
        (2047, 100),
        (2049, 3000),
        (300_000, 20_000),
        ((1 << 22) + 5, 1 << 20),
    ] {
        last_copy_matches_the_model(
            &stream,
            &narrow(keys_with_repeats(n, distinct, n as u64 + 1)),
        );
    }
    let distinct: Vec<u32> = (0..100_000u32).map(hash::fmix32).collect();
    last_copy_matches_the_model(&stream, &distinct);
    for key in [0u32, 7, u32::MAX] {
        last_copy_matches_the_model(&stream, &vec![key; 100_000]);
    }
    last_copy_matches_the_model(&stream, &[0u32, u32::MAX, 0, u32::MAX, 5]);
    last_copy_matches_the_model::<u32>(&stream, &[]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn last_copy_keeps_the_last_of_each_u64_key() {
    let _memory = shared_memory();
    let (_, stream) = gpu();
    for (n, distinct) in [
        (1, 1),
        (2049, 3000),
        (300_000, 20_000),
        ((1 << 22) + 5, 1 << 20),
    ] {
        last_copy_matches_the_model(&stream, &keys_with_repeats(n, distinct, n as u64 + 3));
    }
    // Keys equal in their low 32 bits, or in their high 32 bits, are different keys.
    let halves: Vec<u64> = (0..50_000u64)
        .flat_map(|i| [i, i | 1 << 40, i << 32, (i << 32) | 9, i])
        .collect();
    last_copy_matches_the_model(&stream, &halves);
    for key in [0u64, u64::MAX, u64::from(u32::MAX)] {
        last_copy_matches_the_model(&stream, &vec![key; 100_000]);
    }
    last_copy_matches_the_model::<u64>(&stream, &[]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn last_copy_refuses_bad_input_with_error_values() {
    let _memory = all_memory();
    let (device, stream) = gpu();
    let keys = DeviceBuffer::from_host(&stream, &[1u32, 2, 3]).unwrap();
    let mut flags = DeviceBuffer::from_host(&stream, &[9u8, 9]).unwrap();
    let mismatch = last_copy::mark_repeated(&stream, &keys, &mut flags);
    assert!(matches!(mismatch, Err(Error::LengthMismatch { .. })));
    assert_eq!(flags.to_host(&stream).unwrap(), vec![9, 9]);
    let short = DeviceBuffer::from_host(&stream, &[1u32, 2]).unwrap();
    let mismatch = last_copy::last_copies(&stream, &keys, &short);
    assert!(matches!(mismatch, Err(Error::LengthMismatch { .. })));
    let odd = DeviceBuffer::from_host(&stream, &[[1u8; 3]; 3]).unwrap();
    let odd_values = last_copy::last_copies(&stream, &keys, &odd);
    assert!(matches!(odd_values, Err(Error::InvalidInput(_))));

    // A batch of 2^26 u64 keys needs 1 GB for its scratch table's keys alone; 768 MB stay
    // free, for the tests beside this one too.
    let n = 1usize << 26;
    let big = DeviceBuffer::<u64>::zeroed(&stream, n).unwrap();
    let mut big_flags = DeviceBuffer::<u8>::zeroed(&stream, n).unwrap();
    device.synchronize().unwrap();
    let free = device.free_memory().unwrap();
    let hog = DeviceBuffer::<u8>::zeroed(&stream, free - (768 << 20)).expect("memory to hold back");
    let out_of_memory = last_copy::mark_repeated(&stream, &big, &mut big_flags);
    drop(hog);
    assert!(
        matches!(out_of_memory, Err(Error::OutOfDeviceMemory)),
        "{out_of_memory:?}"
    );
    // The device stays usable afterwards.
    last_copy_matches_the_model(&stream, &[3u64, 4, 3]);
}

/// `last_copy::reduce` (each way), `Reduced::spread` and `last_copy::fold_held` against a
/// host model, for keys `keys` and values made from `value_of(i)`.
fn reduce_matches_the_model<K: Key, V: Key>(
    stream: &Stream,
    keys: &[K],
    value_of: impl Fn(u64) -> V,
) {
    use gpuhash_core::table::Combine;
    use last_copy::Reduce;
    let bits = 32 * V::WORDS;
    let values: Vec<V> = (0..keys.len() as u64).map(&value_of).collect();
    let d_keys = DeviceBuffer::from_host(stream, keys).unwrap();
    let d_values = DeviceBuffer::from_host(stream, &values).unwrap();
    let how_list = [
        Reduce::Combined(Combine::Add),
        Reduce::Combined(Combine::Min),
        Reduce::Combined(Combine::Max),
        Reduce::First,
    ];
    for how in how_list {
        // The model: keys in the order of their winning copy, and each key's value.
        let mut acc: HashMap<K, (usize, u64)> = HashMap::new();
        for (i, (&k, &v)) in keys.iter().zip(&values).enumerate() {
            let v = v.widen();
            acc.entry(k)
                .and_modify(|(at, held)| match how {
                    Reduce::Combined(c) => {
                        *at = i;
                        *held = c.apply(*held, v, bits);
                    }
                    Reduce::First => {}
                })
                .or_insert((i, v));
        }
        let mut expected: Vec<(usize, K, u64)> =
            acc.iter().map(|(&k, &(at, v))| (at, k, v)).collect();
        expected.sort_unstable();
        let expected: Vec<(K, u64)> = expected.into_iter().map(|(_, k, v)| (k, v)).collect();

        let mut reduced = last_copy::reduce(stream, &d_keys, &d_values, how).unwrap();
        let got: Vec<(K, u64)> = reduced
            .keys
            .to_host(stream)
            .unwrap()
            .into_iter()
            .zip(reduced.values.to_host(stream).unwrap())
            .map(|(k, v)| (k, v.widen()))
            .collect();
        assert!(
            got == expected,
            "{how:?}, {} keys: reduced batch differs",
            keys.len()
        );

        // Spread: every copy gets its key's result (here the reduced value plus one).
        let results: Vec<V> = expected
            .iter()
            .map(|&(_, v)| value_of(v.wrapping_add(1)))
            .collect();
        let d_results = DeviceBuffer::from_host(stream, &results).unwrap();
        let mut out = DeviceBuffer::<V>::zeroed(stream, keys.len()).unwrap();
        reduced
            .spread(stream, &d_results, &d_keys, &mut out)
            .unwrap();
        let by_key: HashMap<K, V> = expected
            .iter()
            .map(|&(k, _)| k)
            .zip(results.iter().copied())
            .collect();
        let spread: Vec<V> = keys.iter().map(|k| by_key[k]).collect();
        assert!(
            out.to_host(stream).unwrap() == spread,
            "{how:?}, {} keys: spread differs",
            keys.len()
        );

        // Fold: every other key held, with a value of its own.
        let n = expected.len();
        let found: Vec<u8> = (0..n).map(|j| (j % 2) as u8).collect();
        let held: Vec<V> = (0..n as u64)
            .map(|j| value_of(j.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect();
        let combine = match how {
            Reduce::Combined(c) => Some(c),
            Reduce::First => None,
        };
        let folded: Vec<u64> = (0..n)
            .map(|j| {
                let v = expected[j].1;
                match (found[j], combine) {
                    (0, _) => v,
                    (_, Some(c)) => c.apply(held[j].widen(), v, bits),
                    (_, None) => held[j].widen(),
                }
            })
            .collect();
        let d_found = DeviceBuffer::from_host(stream, &found).unwrap();
        let d_held = DeviceBuffer::from_host(stream, &held).unwrap();
        last_copy::fold_held(stream, &d_held, &d_found, &mut reduced.values, combine).unwrap();
        let got: Vec<u64> = reduced
            .values
            .to_host(stream)
            .unwrap()
            .into_iter()
            .map(Key::widen)
            .collect();
        assert!(got == folded, "{how:?}, {} keys: fold differs", keys.len());
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn reduce_combines_the_copies_of_each_key() {
    let _memory = shared_memory();
    let (_, stream) = gpu();
    let narrow = |keys: Vec<u64>| -> Vec<u32> { keys.into_iter().map(|k| k as u32).collect() };
    // Values near the top of their width, so that sums wrap.
    let v32 = |i: u64| (hash::fmix64(i) as u32) | 0x8000_0000;
    let v64 = |i: u64| hash::fmix64(i) | 1 << 63;
    for (n, distinct) in [
        (1, 1),
        (2049, 3000),
        (300_000, 20_000),
        ((1 << 22) + 5, 1 << 20),
    ] {
        let keys = keys_with_repeats(n, distinct, n as u64 + 5);
        reduce_matches_the_model(&stream, &narrow(keys.clone()), v32);
        reduce_matches_the_model(&stream, &narrow(keys.clone()), v64);
        reduce_matches_the_model(&stream, &keys, v32);
        reduce_matches_the_model(&stream, &keys, v64);
    }
    reduce_matches_the_model(&stream, &vec![0u32; 100_000], v64);
    reduce_matches_the_model(&stream, &vec![u64::MAX; 100_000], v32);
    reduce_matches_the_model::<u32, u32>(&stream, &[], v32);
}

/// Host slice to pinned buffer to device and back to a second pinned buffer, whole; reading
/// the second buffer right after queuing the copy waits for it.
fn pinned_round_trip<T>(device: &Device, stream: &Stream, data: &[T])
where
    T: bytemuck::Pod + PartialEq + std::fmt::Debug,
{
    let source = PinnedBuffer::from_slice(device, data).unwrap();
    assert_eq!(&source[..], data);
    let mut on_device = DeviceBuffer::<T>::unfilled(stream, data.len()).unwrap();
    on_device.copy_from_pinned_async(stream, &source).unwrap();
    let mut back = PinnedBuffer::<T>::zeroed(device, data.len()).unwrap();
    on_device.copy_to_pinned_async(stream, &mut back).unwrap();
    assert!(&back[..] == data, "{} values differ", data.len());
    assert_eq!(on_device.to_host(stream).unwrap(), data);
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_buffers_round_trip_u32_and_u64() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    for n in [0usize, 1, 1023, 100_003, 1 << 22] {
        let narrow: Vec<u32> = (0..n as u32).map(hash::fmix32).collect();
        pinned_round_trip(&device, &stream, &narrow);
        let wide: Vec<u64> = (0..n as u64).map(hash::fmix64).collect();
        pinned_round_trip(&device, &stream, &wide);
    }
    let edges = [0u64, u64::MAX, 1 << 63, 7];
    pinned_round_trip(&device, &stream, &edges);
    let empty = PinnedBuffer::<u64>::zeroed(&device, 0).unwrap();
    assert!(empty.is_empty() && empty.capacity_bytes() == 0);
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_sub_ranges_copy_chunks_on_both_sides() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    let n = 1usize << 20;
    let data: Vec<u64> = (0..n as u64).map(hash::fmix64).collect();
    let staging = PinnedBuffer::from_slice(&device, &data).unwrap();
    // Upload in uneven chunks, last chunk first, each to where it belongs.
    let cuts = [0, 1, 4095, 4096, 100_000, 524_289, n - 1, n];
    let mut on_device = DeviceBuffer::<u64>::zeroed(&stream, n).unwrap();
    for pair in cuts.windows(2).rev() {
        on_device
            .copy_from_pinned_range_async(&stream, pair[0], &staging, pair[0]..pair[1])
            .unwrap();
    }
    assert_eq!(on_device.to_host(&stream).unwrap(), data);

    // Download chunks of it to other places of a larger pinned buffer; the rest keeps its
    // values.
    let mut back = PinnedBuffer::from_slice(&device, &vec![9u64; n + 10]).unwrap();
    let mut model = vec![9u64; n + 10];
    for (range, offset) in [
        (0..10, 5),
        (1000..5000, n - 3990),
        (n - 7..n, n + 3),
        (7..7, 0),
    ] {
        on_device
            .copy_to_pinned_range_async(&stream, range.clone(), &mut back, offset)
            .unwrap();
        model[offset..offset + range.len()].copy_from_slice(&data[range]);
    }
    assert!(back[..] == model[..], "chunks landed in the wrong places");

    // A chunk from one place of the pinned buffer to another place on the device.
    let mut small = DeviceBuffer::from_host(&stream, &[1u64; 100]).unwrap();
    small
        .copy_from_pinned_range_async(&stream, 40, &staging, 7..27)
        .unwrap();
    let mut expected = vec![1u64; 100];
    expected[40..60].copy_from_slice(&data[7..27]);
    assert_eq!(small.to_host(&stream).unwrap(), expected);
}

/// The keys of `set` for indices `first..first + n`, on the host.
fn workload_keys(set: KeySet, first: u32, n: usize) -> Vec<u32> {
    workload::host_pairs(set, first, n as u32).0
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_buffers_order_their_uses_across_streams() {
    let _memory = shared_memory();
    let (device, a) = gpu();
    let (b, c) = (device.new_stream().unwrap(), device.new_stream().unwrap());
    // Large enough that a kernel on one stream is still running when the host queues the
    // next use on another.
    let n = 1usize << 24;
    let hits = workload_keys(KeySet::Hits, 0, n);
    let misses = workload_keys(KeySet::Misses, 0, n);
    for round in 0..3 {
        // A write on one stream, a read on another with no host wait between.
        let mut keys = DeviceBuffer::<u32>::unfilled(&a, n).unwrap();
        workload::generate(&a, KeySet::Hits, 0, &mut keys, None).unwrap();
        assert!(
            keys.to_host(&b).unwrap() == hits,
            "round {round}: read after write"
        );
        // Reads on two streams, then a write on a third: the reads keep what they read.
        workload::generate(&c, KeySet::Misses, 0, &mut keys, None).unwrap();
        let mut seen_b = PinnedBuffer::<u32>::zeroed(&device, n).unwrap();
        let mut seen_a = PinnedBuffer::<u32>::zeroed(&device, n).unwrap();
        keys.copy_to_pinned_async(&b, &mut seen_b).unwrap();
        keys.copy_to_pinned_async(&a, &mut seen_a).unwrap();
        keys.fill_zero(&c).unwrap();
        assert!(
            seen_b[..] == misses[..],
            "round {round}: a read overtaken by a write"
        );
        assert!(
            seen_a[..] == misses[..],
            "round {round}: a read overtaken by a write"
        );
        assert!(
            keys.to_host(&b).unwrap().iter().all(|&k| k == 0),
            "round {round}"
        );
        // A buffer dropped while another stream still reads it: its memory, which the
        // stream it was allocated on may hand out again at once, is freed only after
        // the read.
        let mut last = PinnedBuffer::<u32>::zeroed(&device, n).unwrap();
        {
            let mut doomed = DeviceBuffer::<u32>::unfilled(&a, n).unwrap();
            workload::generate(&b, KeySet::Hits, 0, &mut doomed, None).unwrap();
            doomed.copy_to_pinned_async(&b, &mut last).unwrap();
        }
        let mut reused = DeviceBuffer::<u32>::unfilled(&a, n).unwrap();
        workload::generate(&a, KeySet::Misses, 0, &mut reused, None).unwrap();
        assert!(
            last[..] == hits[..],
            "round {round}: a buffer freed under a read"
        );
        assert!(reused.to_host(&a).unwrap() == misses, "round {round}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_copies_on_two_streams_are_ordered_on_one_buffer() {
    let _memory = shared_memory();
    let (device, first) = gpu();
    let second = device.new_stream().unwrap();
    let n = 1usize << 22;
    let data: Vec<u32> = (0..n as u32).map(hash::fmix32).collect();
    let source = DeviceBuffer::from_host(&first, &data).unwrap();
    let mut staging = PinnedBuffer::<u32>::zeroed(&device, n).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(&second, n).unwrap();
    for round in 0..3 {
        // Device to pinned on one stream, pinned to device on another, with no host wait
        // between: the second copy must wait for the first on the device.
        source.copy_to_pinned_async(&first, &mut staging).unwrap();
        target.copy_from_pinned_async(&second, &staging).unwrap();
        assert!(target.to_host(&second).unwrap() == data, "round {round}");
        // Host writes wait for both copies.
        staging.fill(0);
        target.fill_zero(&second).unwrap();
    }
    // Halves on two streams into one pinned buffer, read at once.
    let half = n / 2;
    source
        .copy_to_pinned_range_async(&first, 0..half, &mut staging, 0)
        .unwrap();
    source
        .copy_to_pinned_range_async(&second, half..n, &mut staging, half)
        .unwrap();
    assert!(staging[..] == data[..]);
}

#[test]
#[ignore = "needs a CUDA device"]
#[allow(
    clippy::reversed_empty_ranges,
    reason = "backwards ranges are among the refused inputs"
)]
fn pinned_copies_check_lengths_and_ranges() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    let mut on_device = DeviceBuffer::from_host(&stream, &[5u32; 10]).unwrap();
    let mut short = PinnedBuffer::from_slice(&device, &[1u32; 9]).unwrap();
    assert!(matches!(
        on_device.copy_from_pinned_async(&stream, &short),
        Err(Error::LengthMismatch {
            left: 10,
            right: 9,
            ..
        })
    ));
    assert!(matches!(
        on_device.copy_to_pinned_async(&stream, &mut short),
        Err(Error::LengthMismatch {
            left: 10,
            right: 9,
            ..
        })
    ));
    for (offset, range) in [(0, 0..10), (2, 0..9), (11, 0..0), (0, 5..4)] {
        assert!(
            matches!(
                on_device.copy_from_pinned_range_async(&stream, offset, &short, range.clone()),
                Err(Error::InvalidInput(_))
            ),
            "{offset} {range:?}"
        );
    }
    for (range, offset) in [(0..10, 0), (0..5, 5), (8..11, 0), (0..0, 10), (3..2, 0)] {
        assert!(
            matches!(
                on_device.copy_to_pinned_range_async(&stream, range.clone(), &mut short, offset),
                Err(Error::InvalidInput(_))
            ),
            "{range:?} {offset}"
        );
    }
    assert_eq!(on_device.to_host(&stream).unwrap(), vec![5; 10]);
    assert_eq!(&short[..], &[1; 9], "a refused copy changed nothing");
}

#[test]
#[ignore = "needs a CUDA device"]
fn mapped_pinned_buffers_have_a_device_address_that_copies_reach() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    let data: Vec<u64> = (0..4096u64).map(hash::fmix64).collect();
    let mut mapped = PinnedBuffer::<u64>::zeroed_mapped(&device, data.len()).unwrap();
    assert!(mapped.is_mapped());
    let on_device = DeviceBuffer::from_host(&stream, &data).unwrap();
    {
        let target = mapped.mapped_address_mut(&stream).unwrap();
        assert_ne!(target.address, 0);
        let source = on_device.address(&stream);
        stream.cuda_stream().context().bind_to_thread().unwrap();
        // SAFETY: both addresses hold `data.len()` u64 values and stay allocated until the
        // copy has run; the guards order the copy with other work on both buffers, and the
        // pinned buffer waits for it before the host reads it below.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                target.address,
                source.address,
                data.len() * 8,
                stream.cuda_stream().cu_stream(),
            )
        }
        .unwrap();
    }
    assert!(
        mapped[..] == data[..],
        "the device wrote through the mapping"
    );

    let plain = PinnedBuffer::<u64>::zeroed(&device, 4).unwrap();
    assert!(!plain.is_mapped());
    assert!(matches!(
        plain.mapped_address(&stream),
        Err(Error::InvalidInput(_))
    ));
    let empty = PinnedBuffer::<u64>::zeroed_mapped(&device, 0).unwrap();
    assert_eq!(empty.mapped_address(&stream).unwrap().address, 0);
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_pool_reuses_buffers_of_a_class() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    let pool = PinnedPool::new(&device, None);
    let first = pool.take::<u64>(100_000).unwrap(); // 800 000 bytes: the 1 MiB class
    assert_eq!(first.len(), 100_000);
    assert_eq!(first.capacity_bytes(), 1 << 20);
    let address = first.as_ptr() as usize;
    drop(first);
    assert_eq!((pool.pinned_bytes(), pool.idle_bytes()), (1 << 20, 1 << 20));
    let mut second = pool.take::<u32>(250_000).unwrap(); // 1 000 000 bytes: the same class
    assert_eq!(second.as_ptr() as usize, address, "the same pinned memory");
    assert_eq!((pool.pinned_bytes(), pool.idle_bytes()), (1 << 20, 0));
    let other = pool.take::<u32>(250_000).unwrap();
    assert_ne!(other.as_ptr() as usize, address);
    assert_eq!(pool.pinned_bytes(), 2 << 20);

    // A pooled buffer with a copy still queued goes back only once the copy has run.
    let data: Vec<u32> = (0..250_000u32).map(hash::fmix32).collect();
    let on_device = DeviceBuffer::from_host(&stream, &data).unwrap();
    on_device
        .copy_to_pinned_async(&stream, &mut second)
        .unwrap();
    drop(second);
    let third = pool.take::<u32>(250_000).unwrap();
    assert_eq!(third.as_ptr() as usize, address);
    assert!(
        third[..] == data[..],
        "a reused buffer holds what its last user left"
    );

    let empty = pool.take::<u64>(0).unwrap();
    assert!(empty.is_empty());
    drop((other, third, empty));
    assert_eq!(pool.idle_bytes(), 2 << 20);
    pool.trim();
    assert_eq!((pool.pinned_bytes(), pool.idle_bytes()), (0, 0));

    // Buffers swapped between classes are unpinned when they come back, never shelved in
    // the wrong class.
    let mut small = pool.take::<u8>(4096).unwrap();
    let mut large = pool.take::<u8>(8192).unwrap();
    std::mem::swap(&mut *small, &mut *large);
    assert_eq!(small.len(), 8192);
    drop((small, large));
    assert_eq!((pool.pinned_bytes(), pool.idle_bytes()), (0, 0));

    // The device's shared pool is one pool.
    let shared = device.pinned_pool().take::<u8>(5000).unwrap();
    let address = shared.as_ptr() as usize;
    drop(shared);
    let again = device.clone().pinned_pool().take::<u8>(8000).unwrap();
    assert_eq!(again.as_ptr() as usize, address);
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_pool_cap_gives_out_of_pinned_memory() {
    let (device, _) = gpu();
    let pool = PinnedPool::new(&device, Some(3 << 20));
    let held = pool.take::<u8>(2 << 20).unwrap();
    let small = pool.take::<u8>(1 << 20).unwrap();
    assert!(matches!(pool.take::<u8>(1), Err(Error::OutOfPinnedMemory)));
    assert!(matches!(
        pool.take::<u8>(4 << 20),
        Err(Error::OutOfPinnedMemory)
    ));
    assert_eq!(pool.pinned_bytes(), 3 << 20);
    drop(small);
    // The idle 1 MiB is unpinned to make room for a buffer of another class.
    let other = pool.take::<u8>(4096).unwrap();
    assert_eq!(
        (pool.pinned_bytes(), pool.idle_bytes()),
        ((2 << 20) + 4096, 0)
    );
    drop((held, other));
    pool.set_cap(Some(1 << 20));
    assert!(pool.pinned_bytes() <= 1 << 20);
    assert!(matches!(
        pool.take::<u8>(2 << 20),
        Err(Error::OutOfPinnedMemory)
    ));
    assert_eq!(pool.cap(), Some(1 << 20));
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_images_move_sections_by_dma_and_map_them() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    let pool = PinnedPool::new_mapped(&device, None);
    assert!(pool.is_mapped());
    let header = ImageHeader {
        table: "test/pinned".into(),
        key_bytes: 4,
        value_bytes: 8,
        layout_version: 1,
    };
    let words: Vec<u32> = (0..3000u32).map(hash::fmix32).collect();
    let wide: Vec<u64> = (0..1000u64).map(hash::fmix64).collect();
    let mut host = TableImage::new(header.clone());
    host.push_section(vec![7, 8, 9]);
    host.push_section(bytemuck::cast_slice(&words).to_vec());
    host.push_section(Vec::new());
    host.push_section(bytemuck::cast_slice(&wide).to_vec());
    let pinned = PinnedImage::from_image(&pool, &host).unwrap();
    assert_eq!(pinned.to_image().unwrap(), host);
    assert_eq!(pinned.bytes(), 3 + 12000 + 8000);
    assert!(pinned.section(4).is_err());
    assert!(matches!(
        pinned.upload_section::<u64>(&stream, 0),
        Err(Error::InvalidInput(_))
    ));
    // Sections up to the device and back into a second image, one DMA each.
    let words_on_device = pinned.upload_section::<u32>(&stream, 1).unwrap();
    let wide_on_device = pinned.upload_section::<u64>(&stream, 3).unwrap();
    assert_eq!(words_on_device.to_host(&stream).unwrap(), words);
    assert_eq!(wide_on_device.to_host(&stream).unwrap(), wide);
    let mut copy = PinnedImage::with_sections(&pool, header, &[3, 12000, 0, 8000]).unwrap();
    copy.section_mut(0).unwrap().copy_from_slice(&[7, 8, 9]);
    copy.download_section(&stream, 1, &words_on_device).unwrap();
    copy.download_section(&stream, 3, &wide_on_device).unwrap();
    assert!(matches!(
        copy.download_section(&stream, 1, &wide_on_device),
        Err(Error::LengthMismatch { .. })
    ));
    assert_eq!(copy.to_image().unwrap(), host);
    // Mapped: every section has a device address the device copies from.
    let (guard, addresses) = pinned.mapped_sections(&stream).unwrap();
    assert_eq!(addresses.len(), 4);
    assert!(addresses.iter().all(|a| a % 256 == 0 && *a != 0));
    let mut through_mapping = DeviceBuffer::<u64>::zeroed(&stream, wide.len()).unwrap();
    {
        let target = through_mapping.address_mut(&stream);
        stream.cuda_stream().context().bind_to_thread().unwrap();
        // SAFETY: section 3 holds `wide.len()` u64 values at its mapped address, kept by
        // `guard`; the target buffer holds as many and stays allocated until the copy runs.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                target.address,
                addresses[3],
                wide.len() * 8,
                stream.cuda_stream().cu_stream(),
            )
        }
        .unwrap();
    }
    drop(guard);
    assert_eq!(through_mapping.to_host(&stream).unwrap(), wide);
    // An image from a pool that is not mapped has no device addresses; a capped pool
    // refuses an image past its cap.
    let plain = PinnedImage::from_image(&PinnedPool::new(&device, None), &host).unwrap();
    assert!(matches!(
        plain.mapped_sections(&stream),
        Err(Error::InvalidInput(_))
    ));
    let capped = PinnedPool::new_mapped(&device, Some(16 << 10));
    assert!(matches!(
        PinnedImage::from_image(&capped, &host),
        Err(Error::OutOfPinnedMemory)
    ));
}

#[test]
#[ignore = "needs a CUDA device"]
fn huge_pinned_allocations_are_an_error_value() {
    let (device, stream) = gpu();
    let tebibyte = 1usize << 40;
    assert!(matches!(
        PinnedBuffer::<u8>::zeroed(&device, tebibyte),
        Err(Error::OutOfPinnedMemory)
    ));
    assert!(matches!(
        PinnedBuffer::<u64>::zeroed_mapped(&device, tebibyte / 8),
        Err(Error::OutOfPinnedMemory)
    ));
    let pool = PinnedPool::new(&device, None);
    assert!(matches!(
        pool.take::<u32>(tebibyte / 4),
        Err(Error::OutOfPinnedMemory)
    ));
    assert_eq!(pool.pinned_bytes(), 0, "a failed pin reserves nothing");
    assert!(matches!(
        PinnedBuffer::<u64>::zeroed(&device, usize::MAX / 4),
        Err(Error::InvalidInput(_))
    ));
    // Pinning and copying still work afterwards.
    pinned_round_trip(&device, &stream, &[1u32, 2, 3]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn threads_stage_batches_through_the_shared_pool() {
    let _memory = shared_memory();
    let (device, _) = gpu();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let device = device.clone();
            scope.spawn(move || {
                let stream = device.new_stream().unwrap();
                for batch in 0..8u32 {
                    let n = 1usize << (14 + batch % 4);
                    let data: Vec<u32> = (0..n as u32)
                        .map(|i| hash::fmix32(i ^ (t << 24) ^ (batch << 16)))
                        .collect();
                    let mut staging = device.pinned_pool().take::<u32>(n).unwrap();
                    staging.copy_from_slice(&data);
                    let mut on_device = DeviceBuffer::<u32>::unfilled(&stream, n).unwrap();
                    on_device.copy_from_pinned_async(&stream, &staging).unwrap();
                    staging.fill(0);
                    on_device
                        .copy_to_pinned_async(&stream, &mut staging)
                        .unwrap();
                    assert!(staging[..] == data[..], "thread {t} batch {batch}");
                }
            });
        }
    });
    assert!(device.pinned_pool().idle_bytes() > 0);
}

/// Found flags and values of a made-up lookup: every third query, and the last, hit.
fn made_up_answers(n: usize) -> (Vec<u8>, Vec<[u32; 2]>) {
    let found = (0..n).map(|i| u8::from(i % 3 == 0 || i + 1 == n)).collect();
    let values = (0..n as u32).map(|i| [i, !i]).collect();
    (found, values)
}

#[test]
#[ignore = "needs a CUDA device"]
fn hits_gather_exactly_the_found_answers_across_chunks() {
    let s = shared_stream();
    for n in [0usize, 1, 31, 33, 100_000, 3_000_001] {
        let (found, values) = made_up_answers(n);
        let mut hits = gpuhash_core::hits::DeviceHits::<[u32; 2]>::with_capacity(s, n).unwrap();
        // Two chunks, as staged batches gather them.
        let half = n / 2;
        for (base, range) in [(0, 0..half), (half, half..n)] {
            let f = DeviceBuffer::from_host(s, &found[range.clone()]).unwrap();
            let v = DeviceBuffer::from_host(s, &values[range]).unwrap();
            hits.gather(s, base, &f, &v).unwrap();
        }
        let got = hits.to_host(s).unwrap().sorted();
        let expected: Vec<u32> = (0..n as u32).filter(|&i| found[i as usize] != 0).collect();
        assert_eq!(got.index, expected, "n = {n}");
        assert!(
            got.index
                .iter()
                .zip(&got.values)
                .all(|(&i, v)| *v == [i, !i])
        );
        let mut total = DeviceBuffer::<u64>::zeroed(s, 1).unwrap();
        gpuhash_core::hits::count_hits(s, &DeviceBuffer::from_host(s, &found).unwrap(), &mut total)
            .unwrap();
        assert_eq!(total.to_host(s).unwrap()[0] as usize, expected.len());
    }
    let mut small = gpuhash_core::hits::DeviceHits::<u32>::with_capacity(s, 4).unwrap();
    let f = DeviceBuffer::from_host(s, &[1u8; 5]).unwrap();
    let v = DeviceBuffer::from_host(s, &[7u32; 5]).unwrap();
    assert!(matches!(
        small.gather(s, 0, &f, &v),
        Err(Error::InvalidInput(_))
    ));
}

/// `len` values of a vector whose pages hold nothing else, so that a registration of them
/// never shares a page with another: the vector and where the values start in it.
fn page_alone<T: bytemuck::Pod>(values: &[T]) -> (Vec<T>, usize) {
    let pad = 8192 / size_of::<T>();
    let mut storage: Vec<T> = bytemuck::zeroed_vec(values.len() + 2 * pad);
    let start = storage.as_ptr().align_offset(4096).min(pad);
    storage[start..start + values.len()].copy_from_slice(values);
    (storage, start)
}

#[test]
#[ignore = "needs a CUDA device"]
fn registered_memory_is_copied_straight_both_ways() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    for n in [1usize, 1000, 100_003, 3 * staging::CHUNK + 5] {
        let data: Vec<u32> = (0..n as u32).map(hash::fmix32).collect();
        let (mut input_storage, at) = page_alone(&data);
        let input = device.register(&mut input_storage[at..at + n]).unwrap();
        assert!(device.is_registered(&input[..]) && device.is_registered(&input[n / 2..]));
        let (mut output, out_at) = page_alone(&vec![7u32; n]);
        let mut output = device.register(&mut output[out_at..out_at + n]).unwrap();

        // Through the staging entry points, which take the direct path.
        let on_device = staging::upload(&stream, &input).unwrap();
        staging::download(&stream, &on_device, &mut output).unwrap();
        assert!(output[..] == data[..], "n = {n}: upload and download");
        // Through the buffer's own copies.
        output.fill(7);
        let mut again = DeviceBuffer::<u32>::zeroed(&stream, n).unwrap();
        again.copy_from_host(&stream, &input).unwrap();
        again.copy_to_host(&stream, &mut output).unwrap();
        assert!(
            output[..] == data[..],
            "n = {n}: copy_from_host and copy_to_host"
        );
        // A short output is refused and left alone.
        output.fill(7);
        assert!(matches!(
            staging::download(&stream, &on_device, &mut output[1..]),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(output.iter().all(|&v| v == 7));
        drop((input, output));
        assert!(
            !device.is_registered(&input_storage[at..at + n]),
            "forgotten once dropped"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn registering_memory_twice_is_an_error_value() {
    let _memory = shared_memory();
    let (device, stream) = gpu();
    let data: Vec<u64> = (0..100_000u64).map(hash::fmix64).collect();
    let (storage, at) = page_alone(&data);
    let values = &storage[at..at + data.len()];
    let first = device.register(values).unwrap();
    assert!(matches!(
        device.register(values),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        device.register(&values[10..20]),
        Err(Error::InvalidInput(_))
    ));
    // The first registration still works, and the slice reads as before.
    assert_eq!(
        staging::upload(&stream, &first)
            .unwrap()
            .to_host(&stream)
            .unwrap(),
        data
    );
    drop(first);
    // Registered again after the first is gone; owned memory too; empty memory pins nothing.
    drop(device.register(values).unwrap());
    let owned = device.register(data.clone()).unwrap();
    assert!(owned[..] == data[..] && device.is_registered(&owned));
    let empty = device.register(&[] as &[u64]).unwrap();
    assert!(empty.is_empty() && !device.is_registered(&empty));
}

/// The device scan of `counts` against the host's prefix sums, the total last.
fn check_scan<C: gpuhash_core::scan::ScanCount + Into<u64>>(stream: &Stream, counts: &[C]) {
    let on_device = DeviceBuffer::from_host(stream, counts).unwrap();
    // Junk in the offsets first, so that one left unwritten shows.
    let mut offsets = DeviceBuffer::from_host(stream, &vec![u64::MAX; counts.len() + 1]).unwrap();
    scan::exclusive_scan(stream, &on_device, &mut offsets).unwrap();
    let total = scan::scanned_total(stream, &offsets).unwrap();
    let got = offsets.to_host(stream).unwrap();
    let mut expected = Vec::with_capacity(counts.len() + 1);
    let mut sum = 0u64;
    for &c in counts {
        expected.push(sum);
        sum = sum.wrapping_add(c.into());
    }
    expected.push(sum);
    if let Some(i) = (0..expected.len()).find(|&i| got[i] != expected[i]) {
        panic!(
            "scan of {} counts: offset {i} is {}, the host says {}",
            counts.len(),
            got[i],
            expected[i]
        );
    }
    assert_eq!(total, sum, "scanned total of {} counts", counts.len());
}

#[test]
#[ignore = "needs a CUDA device"]
fn device_scans_match_host_prefix_sums_at_every_level() {
    let (device, stream) = gpu();
    let tile = scan::TILE;
    // The most blocks of the scan's kernels the device keeps resident, which is the most a
    // launch runs: tiles past them are scanned by blocks that loop.
    let properties = device.properties();
    let resident = properties.multiprocessors as usize
        * (properties.max_threads_per_multiprocessor / GH_SCAN_THREADS) as usize;
    let mut rng = 0x5ca7_u64;
    let mut next = move || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    // Empty, one, around one tile, past the resident blocks, around a tile of tiles (two
    // levels), and past it (three levels).
    let lengths = [
        0,
        1,
        2,
        255,
        256,
        257,
        tile - 1,
        tile,
        tile + 1,
        3 * tile + 17,
        resident * tile - 1,
        resident * tile,
        (resident + 1) * tile,
        (2 * resident + 3) * tile + 7,
        tile * tile - 1,
        tile * tile,
        tile * tile + 1,
        tile * tile + 3 * tile + 5,
    ];
    for len in lengths {
        let small: Vec<u32> = (0..len).map(|_| (next() % 40) as u32).collect();
        check_scan(&stream, &small);
    }
    // Words that fill 32 bits, and 64-bit counts that wrap the total.
    let wide: Vec<u32> = (0..3 * tile + 1)
        .map(|_| u32::MAX - (next() % 3) as u32)
        .collect();
    check_scan(&stream, &wide);
    let huge: Vec<u64> = (0..2 * tile + 9)
        .map(|_| u64::MAX / 1000 * (next() % 7))
        .collect();
    check_scan(&stream, &huge);
    let zeros = vec![0u64; tile + 3];
    check_scan(&stream, &zeros);
    // A mismatched length is an error value, with nothing queued.
    let counts = DeviceBuffer::<u32>::zeroed(&stream, 5).unwrap();
    let mut offsets = DeviceBuffer::<u64>::zeroed(&stream, 5).unwrap();
    assert!(matches!(
        scan::exclusive_scan(&stream, &counts, &mut offsets),
        Err(Error::LengthMismatch { .. })
    ));
}
