//! `gpuhash-bench`: the benchmark command of gpuhash.
//!
//! Reports the device, then times each workload with CUDA events after warm-up and prints
//! the median of the timed runs. For now: the device's copy bandwidth and the standard
//! workload generator of DESIGN.md, whose write rate is compared with the copy bandwidth
//! measured in the same run. Table benchmarks join as their crates land.
//!
//! ```text
//! gpuhash-bench [--log2-n N] [--runs R]     (defaults: N = 26, R = 11)
//! gpuhash-bench cuckoo [--log2-n N] [--runs R] [--w4-batches B]
//! ```
//!
//! `cuckoo` measures DyHash (gpuhash-cuckoo) on workloads W1 and W4 instead (W4 with B
//! batches a phase, default 16; 0 skips it).
//!
//! Without a usable GPU it prints one line saying why and exits with status 1.

mod cuckoo;
mod measure;

use std::process::ExitCode;

use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, Result, Stream};
use measure::{Measurement, median_ms};

/// Command-line options.
struct Options {
    log2_n: u32,
    runs: usize,
    cuckoo: bool,
    w4_batches: u32,
}

fn parse_options() -> std::result::Result<Options, String> {
    let mut options = Options {
        log2_n: 26,
        runs: 11,
        cuckoo: false,
        w4_batches: 16,
    };
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "cuckoo") {
        options.cuckoo = true;
        args.next();
    }
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |max: u32| match value.parse::<u32>() {
            Ok(v) if (1..=max).contains(&v) => Ok(v),
            _ => Err(format!(
                "{flag} takes a number from 1 to {max}, not {value:?}"
            )),
        };
        match flag.as_str() {
            "--log2-n" => options.log2_n = number(30)?,
            "--runs" => options.runs = number(1000)? as usize,
            "--w4-batches" if options.cuckoo => {
                options.w4_batches = if value == "0" { 0 } else { number(64)? }
            }
            _ => {
                return Err(format!(
                    "unknown option {flag}; usage: gpuhash-bench [cuckoo] [--log2-n N] [--runs R] [--w4-batches B (cuckoo)]"
                ));
            }
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let outcome = parse_options().and_then(|options| run(&options).map_err(|e| e.to_string()));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("gpuhash-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<()> {
    let device = Device::default()?;
    let p = device.properties();
    println!(
        "device: {} (compute {}.{}, {} SMs, {:.1} GiB)",
        p.name,
        p.compute_capability.0,
        p.compute_capability.1,
        p.multiprocessors,
        p.total_memory as f64 / f64::from(1 << 30)
    );
    if options.cuckoo {
        return cuckoo::run(&device, options.log2_n, options.runs, options.w4_batches);
    }
    let stream = device.new_stream()?;
    let n = 1usize << options.log2_n;
    println!(
        "n = 2^{} pairs, u32 keys and values, median of {} timed runs after 3 warm-up runs",
        options.log2_n, options.runs
    );
    println!();

    let copy = device_copy(&stream, n, options.runs)?;
    let pairs = generator(&stream, n, options.runs, true)?;
    let keys = generator(&stream, n, options.runs, false)?;
    println!("{}", Measurement::HEADER);
    for m in [&copy, &pairs, &keys] {
        println!("{}", m.row(copy.bytes_per_second()));
    }
    Ok(())
}

/// A device-to-device copy of `n` key-value pairs: 8n bytes read and 8n written.
fn device_copy(stream: &Stream, n: usize, runs: usize) -> Result<Measurement> {
    let source = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let mut target = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let ms = median_ms(stream, runs, || target.copy_from(stream, &source))?;
    Ok(Measurement {
        name: "device copy (read + write)",
        items: n,
        bytes: 16 * n,
        ms,
    })
}

/// The workload generator writing `n` keys, and their values when `with_values`.
fn generator(stream: &Stream, n: usize, runs: usize, with_values: bool) -> Result<Measurement> {
    let mut keys = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut values = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let ms = median_ms(stream, runs, || {
        let values = with_values.then_some(&mut values);
        workload::generate(stream, KeySet::Hits, 0, &mut keys, values)
    })?;
    // Check the output once, so a broken kernel cannot post a fast time.
    let sample = keys.to_host(stream)?;
    let step = (n / 4096).max(1);
    if (0..n)
        .step_by(step)
        .any(|i| sample[i] != KeySet::Hits.key(i as u32))
    {
        return Err(gpuhash_core::Error::InvalidInput(
            "generator wrote wrong keys".into(),
        ));
    }
    let name = if with_values {
        "generator keys + values"
    } else {
        "generator keys only"
    };
    let bytes_per_pair = if with_values { 8 } else { 4 };
    Ok(Measurement {
        name,
        items: n,
        bytes: bytes_per_pair * n,
        ms,
    })
}
