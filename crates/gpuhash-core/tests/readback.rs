//! Small readbacks on a real GPU: copies of a few words into mapped pinned memory are made
//! by a kernel (the device's pinned pool is mapped), larger or unaligned ones by a copy
//! engine; every way lands exactly what a host model says, and leaves the rest as it was.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use bytemuck::Pod;
use gpuhash_core::hash::fmix64;
use gpuhash_core::{Device, DeviceBuffer, PinnedBuffer, Stream};

fn gpu() -> (Device, Stream) {
    let device = Device::default().expect("these tests need a CUDA device");
    let stream = device.new_stream().expect("new stream");
    (device, stream)
}

/// `n` values of `T` made of hashed bytes.
fn values<T: Pod>(n: usize, seed: u64) -> Vec<T> {
    let bytes: Vec<u8> = (0..n * size_of::<T>())
        .map(|i| fmix64(seed ^ i as u64) as u8)
        .collect();
    bytemuck::pod_collect_to_vec(&bytes)
}

/// Copies `range` of `source` (holding `data`) to `offset` of a target of `len` values that
/// hold `fill`, into each kind of pinned buffer, and checks each against the model.
fn check_range<T: Pod + PartialEq + std::fmt::Debug>(
    (device, stream): (&Device, &Stream),
    (source, data): (&DeviceBuffer<T>, &[T]),
    range: std::ops::Range<usize>,
    (offset, len, fill): (usize, usize, T),
) {
    let mut model = vec![fill; len];
    model[offset..offset + range.len()].copy_from_slice(&data[range.clone()]);
    let mut pooled = device.pinned_pool().take::<T>(len).unwrap();
    pooled[..len].fill(fill);
    let mut targets = [
        PinnedBuffer::from_slice(device, &vec![fill; len]).unwrap(),
        {
            let mut mapped = PinnedBuffer::zeroed_mapped(device, len).unwrap();
            mapped.fill(fill);
            mapped
        },
    ];
    for target in &mut targets {
        source
            .copy_to_pinned_range_async(stream, range.clone(), target, offset)
            .unwrap();
    }
    source
        .copy_to_pinned_range_async(stream, range.clone(), &mut pooled, offset)
        .unwrap();
    let what = format!(
        "{} values {range:?} to {offset}",
        std::any::type_name::<T>()
    );
    assert_eq!(&pooled[..len], &model[..], "pooled (mapped): {what}");
    assert_eq!(&targets[0][..], &model[..], "plain pinned: {what}");
    assert_eq!(&targets[1][..], &model[..], "mapped pinned: {what}");
}

/// Ranges and offsets around the kernel's limit (4096 bytes) and off word alignment.
fn check_type<T: Pod + PartialEq + std::fmt::Debug>(device: &Device, stream: &Stream) {
    let per_kib = 1024 / size_of::<T>();
    let n = 6 * per_kib + 3;
    let data: Vec<T> = values(n, size_of::<T>() as u64);
    let source = DeviceBuffer::from_host(stream, &data).unwrap();
    let fill: T = values(1, 99)[0];
    let limit = 4 * per_kib;
    for (range, offset) in [
        (0..1, 0),
        (1..2, 3),
        (0..3, 1),
        (5..37, 2),
        (0..limit - 1, 1),
        (0..limit, 0),
        (1..limit + 1, 0),
        (0..limit + 1, 2),
        (3..n, 0),
        (n - 1..n, 7),
        (9..9, 4),
    ] {
        let len = offset + range.len() + 5;
        check_range(
            (device, stream),
            (&source, &data),
            range,
            (offset, len, fill),
        );
    }
    // Whole small buffers to the host, of every length up to past the limit.
    for len in (1..=limit + 2)
        .step_by(per_kib / 4 + 1)
        .chain([limit, limit + 1])
    {
        let small = DeviceBuffer::from_host(stream, &data[..len]).unwrap();
        assert_eq!(
            small.to_host(stream).unwrap(),
            data[..len],
            "to_host of {len}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn small_readbacks_land_exactly_at_every_width_size_and_alignment() {
    let (device, stream) = gpu();
    assert!(device.pinned_pool().is_mapped());
    check_type::<u8>(&device, &stream);
    check_type::<u16>(&device, &stream);
    check_type::<u32>(&device, &stream);
    check_type::<u64>(&device, &stream);
    check_type::<[u32; 3]>(&device, &stream);
}

#[test]
#[ignore = "needs a CUDA device"]
fn small_readbacks_follow_the_writes_queued_before_them() {
    // A kernel's readback runs in stream order like the copy it replaces: each reads
    // what the copy queued just before it wrote, on the same stream and across streams.
    let (device, stream) = gpu();
    let other = device.new_stream().unwrap();
    let mut counts = DeviceBuffer::<u64>::zeroed(&stream, 16).unwrap();
    for round in 0..200u64 {
        let writer = if round % 2 == 0 { &stream } else { &other };
        let words: Vec<u64> = (0..16).map(|i| fmix64(round * 16 + i)).collect();
        counts.copy_from_host(writer, &words).unwrap();
        let reader = if round % 3 == 0 { &other } else { &stream };
        assert_eq!(counts.to_host(reader).unwrap(), words, "round {round}");
    }
}
