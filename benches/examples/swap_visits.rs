//! Probe behind docs/benchmarks/swap.md: what one visit of a swap table's batch costs the
//! host and the device, piece by piece, on a DyHash child of 2^22 pairs. Each piece runs
//! `CALLS` times after a warm-up; the host time to queue them and the time until the
//! stream has run them are printed, in microseconds a call.
//!
//! `cargo run --release -p gpuhash-bench --example swap_visits -- [KEYS,..]` (keys a
//! visit, default `1024,65536`).

use std::time::Instant;

use gpuhash_core::image::{Image, ProbeInPlace};
use gpuhash_core::pinned::PinnedPool;
use gpuhash_core::table::Map;
use gpuhash_core::{Device, DeviceBuffer, Stream};
use gpuhash_cuckoo::{CuckooOptions, CuckooTable};

const CALLS: usize = 200;

/// Queues `piece` `CALLS` times after one untimed call: (host us a call to queue, us a
/// call until the stream has run them).
fn time(stream: &Stream, mut piece: impl FnMut()) -> (f64, f64) {
    piece();
    stream.synchronize().expect("sync");
    let start = Instant::now();
    for _ in 0..CALLS {
        piece();
    }
    let queued = start.elapsed().as_secs_f64();
    stream.synchronize().expect("sync");
    let done = start.elapsed().as_secs_f64();
    let per_call = |s: f64| s * 1e6 / CALLS as f64;
    (per_call(queued), per_call(done))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "1024,65536".into())
        .split(',')
        .map(|s| s.parse().expect("a list of key counts"))
        .collect();
    let device = Device::new(0)?;
    let stream = device.new_stream()?;
    let n = 1usize << 22;
    let table = CuckooTable::<u32, u32>::new(&device, CuckooOptions::with_capacity(n))?;
    let keys: Vec<u32> = (1..=n as u32)
        .map(|k| k.wrapping_mul(2_654_435_761))
        .collect();
    let on_device = DeviceBuffer::from_host(&stream, &keys)?;
    table.insert_async(&stream, &on_device, &on_device)?;
    stream.synchronize()?;
    let pool = PinnedPool::new_mapped(&device, None);
    let image = table.to_pinned_image(&pool)?;
    println!("| keys a visit | piece | host us a call to queue | us a call, run |");
    println!("| --- | --- | --- | --- |");
    for &len in &sizes {
        let probe = DeviceBuffer::from_host(&stream, &keys[..len])?;
        let mut found = DeviceBuffer::<u8>::zeroed(&stream, len)?;
        let mut values = DeviceBuffer::<u32>::zeroed(&stream, len)?;
        let mut rows: Vec<(&str, (f64, f64))> = Vec::new();
        rows.push((
            "alloc and free",
            time(&stream, || {
                drop(DeviceBuffer::<u32>::unfilled(&stream, len).expect("alloc"));
            }),
        ));
        rows.push((
            "device copy",
            time(&stream, || {
                values.copy_from(&stream, &probe).expect("copy");
            }),
        ));
        rows.push((
            "resident get_async",
            time(&stream, || {
                table
                    .get_async(&stream, &probe, &mut found, &mut values)
                    .expect("get");
            }),
        ));
        let mut probe_in_place = || {
            CuckooTable::<u32, u32>::get_in_place(
                &stream,
                &image,
                &probe,
                &mut found,
                Some(&mut values),
            )
            .expect("probe");
        };
        rows.push(("get_in_place", time(&stream, &mut probe_in_place)));
        // Whether a small upload from pageable memory waits for the stream: queued behind
        // this size's probe in place, its host time is the probe's if it does.
        let addresses = vec![0u64; 16];
        rows.push((
            "get_in_place, then an upload of 16 words from pageable memory",
            time(&stream, || {
                probe_in_place();
                drop(DeviceBuffer::from_host(&stream, &addresses).expect("upload"));
            }),
        ));
        for (piece, (queued, run)) in rows {
            println!("| {len} | {piece} | {queued:.1} | {run:.1} |");
        }
    }
    Ok(())
}
