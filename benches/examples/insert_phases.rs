//! Probe behind docs/benchmarks/cuckoo.md: where a DyHash bulk insert spends its time. For
//! each size and load given, the W1 insert (the standard u32 pairs into an empty table of
//! the default layout, sized for the load) runs 3 times untimed and 5 times timed with CUDA
//! events; the median is printed with the rate. Run it under a kernel profiler to split
//! the time by kernel; the difference between the median and the kernels' sum is what the
//! host adds (launches and the waits between passes).
//!
//! `cargo run --release -p gpuhash-bench --example insert_phases -- [LOG2_N,..] [LOAD,..]
//! [packed|split|u64]` (default `22,26 0.5,0.8,0.95 packed`; `u64` widens the keys, whose
//! buckets are split).

use gpuhash_core::table::{Key, Map, Table};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, EventTimer, Stream};
use gpuhash_cuckoo::{BucketLayout, CuckooOptions, CuckooTable};

fn list<T: std::str::FromStr>(arg: Option<String>, default: &str) -> Vec<T> {
    arg.as_deref()
        .unwrap_or(default)
        .split(',')
        .map(|x| x.parse().ok().expect("a comma-separated list of numbers"))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let sizes: Vec<u32> = list(args.next(), "22,26");
    let loads: Vec<f64> = list(args.next(), "0.5,0.8,0.95");
    let shape = args.next().unwrap_or_else(|| "packed".into());
    let device = Device::new(0)?;
    let stream = device.new_stream()?;
    println!("{shape} buckets");
    println!("| log2 n | load | insert ms (median of 5) | M pairs/s |");
    println!("| --- | --- | --- | --- |");
    for log2_n in sizes {
        for &load in &loads {
            let ms = match shape.as_str() {
                "split" => insert_ms(&device, &stream, log2_n, load, BucketLayout::Split, |k| k)?,
                "u64" => insert_ms(&device, &stream, log2_n, load, BucketLayout::Auto, |k| {
                    (u64::from(k) << 32) | u64::from(k ^ 0x9e37_79b9)
                })?,
                _ => insert_ms(&device, &stream, log2_n, load, BucketLayout::Auto, |k| k)?,
            };
            let n = 1usize << log2_n;
            println!(
                "| {log2_n} | {load} | {ms:.3} | {:.0} |",
                n as f64 / ms / 1e3
            );
        }
    }
    Ok(())
}

/// The median milliseconds of the W1 insert of 2^`log2_n` pairs (keys widened by `key`)
/// into an empty table of `layout` sized for `load`.
fn insert_ms<K: Key>(
    device: &Device,
    stream: &Stream,
    log2_n: u32,
    load: f64,
    layout: BucketLayout,
    key: fn(u32) -> K,
) -> Result<f64, Box<dyn std::error::Error>> {
    let n = 1usize << log2_n;
    let (keys, values) = workload::host_pairs(KeySet::Hits, 0, n as u32);
    let keys: Vec<K> = keys.into_iter().map(key).collect();
    let keys = DeviceBuffer::from_host(stream, &keys)?;
    let values = DeviceBuffer::from_host(stream, &values)?;
    let slots = CuckooTable::<K, u32>::bucket_slots(layout)? as f64;
    let buckets = (n as f64 / load / slots / 3.0).ceil() as u64;
    let options = CuckooOptions::default()
        .initial_buckets(buckets)
        .alpha(0.0)
        .beta(0.99)
        .layout(layout);
    let table = CuckooTable::<K, u32>::new(device, options)?;
    let mut times = Vec::new();
    for run in 0..8 {
        table.clear_on(stream)?;
        stream.synchronize()?;
        let timer = EventTimer::start(stream)?;
        table.insert_async(stream, &keys, &values)?;
        let ms = f64::from(timer.stop()?);
        if run >= 3 {
            times.push(ms);
        }
    }
    if table.len()? != n {
        return Err(format!("the table holds {} pairs, not {n}", table.len()?).into());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
