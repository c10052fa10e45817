//! `gpuhash-bench`: the benchmark command of gpuhash.
//!
//! Reports the device, then times each workload with CUDA events after warm-up and prints
//! the median of the timed runs as markdown tables (M items/s; bandwidth where it counts).
//!
//! ```text
//! gpuhash-bench [core] [slab-alloc] [slab-hash] [slab-hash-w2] [slab-hash-curve] [cuckoo]
//!               [contract] [swap] [upsert] [hyperspace] [shard]
//!               [--log2-n N] [--runs R] [--w4-batches B] [--svg PATH] [--csv PATH]
//!               [--w6-tables T,..] [--w6-p P,..] [--w6-card C,..] [--w6-no-cpu]
//!               [--w6-cpu-runs R] [--w6-cpu-batch B] [--w6-standalone-budget S]
//!               [--w5-parts P,..] [--w5-forms F,..] [--w5-batches B,..] [--w5-svg PATH]
//! gpuhash-bench anchors [--logs DIR] [--out DIR]
//! ```
//!
//! - `core`: the device's copy bandwidth and DESIGN.md's workload generator (n = 2^N
//!   pairs, default 2^26), the generator's write rate against the copy bandwidth; then
//!   the bus: 256 MiB host to device and device to host from pinned and from pageable
//!   memory, and both ways at once from pinned memory on two streams (GB/s).
//! - `slab-alloc`: one slab allocation per thread, 1M and 16M threads, SlabAlloc regular
//!   and light against device-side malloc.
//! - `slab-hash`: W1 (build, find hit, find miss at memory utilization 0.5 and 0.9, and
//!   memory after build and flush) and W3 (mixes G0, G1, G2 in one launch).
//! - `slab-hash-w2`: W2, incremental insertion into an empty table sized to end at memory
//!   utilization 0.5: 2^21 pairs in batches of 32k, 64k and 128k, and n pairs (when
//!   n > 2^21) in batches of 2^20; each batch timed, median of 5 passes (`--runs` does not
//!   apply); the total rate, the rates of the first and the last batch, and the mean
//!   device time and host enqueue time of a batch; then the same with 1024 batches of 32
//!   pairs, the fixed cost of a batch, and that cost step by step.
//! - `slab-hash-curve`: W1 (build, find hit, find miss) at memory utilization 0.2 to 0.93
//!   with min(n, 2^24) pairs; prints the table, writes the points as CSV to `--csv PATH`
//!   (default `slab-hash-curve.csv`) and as an SVG line chart to `--svg PATH` (default
//!   `slab-hash-curve.svg`), both relative to the current directory.
//! - `swap`: W5, Starfish (gpuhash-swap) on a table 4x its device budget (`swap_bench`):
//!   the bus and the zero-copy random-read rate measured in the same run; inserts and
//!   lookups of hits and misses in batches of 2^10 to 2^26 keys from registered host
//!   memory and from device buffers, each against its PCIe bound; probing children in
//!   place against paging them in, with the crossover, plotted to `--w5-svg PATH`
//!   (default `swap-w5.svg`); the same table fully resident. The `--w5-*` flags pick its
//!   pieces (`swap_bench::parts`), so that it can run as several commands at large n.
//! - `upsert`: a counting batch of n keys (upsert adding 1 per key) beside plain inserts
//!   of the same keys, uniform and Zipf-skewed (exponent 1.0), on the slab hash map and
//!   DyHash.
//! - `hyperspace`: W6, the hyperspace index (gpuhash-hyperspace) beside a CPU hyperspace
//!   index on every core and stand-alone secondary indexes (`hyperspace_bench`); the
//!   `--w6-*` flags pick its pieces (tables, attribute counts, cardinalities, the CPU
//!   index's part: `hyperspace_bench::parts`), so that it can run as several commands.
//! - `shard`: W1 on the sharded table (gpuhash-shard, `shard_bench`) over 1, 2, 4 and 8
//!   GPUs as visible: weak scaling (n pairs a GPU) and strong scaling (4n in all), inserts
//!   and lookups from device buffers on GPU 0, each against linear scaling and against the
//!   exchange's bound from the scatter bandwidth measured in the same run. Over several
//!   GPUs it needs NCCL on the loader path (docs/gpu-testing.md); without it, one GPU.
//! - `cuckoo`: DyHash (gpuhash-cuckoo) on W1 at loads 0.5 to 0.95 (u32 pairs in packed
//!   buckets, the default, and in split buckets forced, each row with its table bytes a
//!   pair) and W4 with B batches a phase (`--w4-batches`, default 16; 0 skips it).
//!
//! With no workload named, all run. Progress goes to stderr (see [`progress`]): each
//! workload as it starts, its steps, and the seconds since it started.
//!
//! Without a usable GPU it prints one line saying why and exits with status 1.
//!
//! The criterion benchmarks of the tables' main operations are a bench target beside this
//! command, `benches/tables.rs` (`cargo bench -p gpuhash-bench`).
//!
//! `anchors` needs no GPU: it reads the logs of one run of the anchor harness (the public
//! GPU hash tables timed on W1 beside `gpuhash-bench slab-hash cuckoo`) from `--logs DIR`
//! (default `target/anchors/out`) and writes `anchors.md` and `anchors.svg` into `--out
//! DIR` (default: the logs folder); see [`anchors`] and `benches/anchors.sh`.

mod anchors;
mod args;
mod contract_bench;
mod core_bench;
mod cuckoo;
mod hyperspace;
mod hyperspace_bench;
mod measure;
mod plot;
mod progress;
mod shard_bench;
mod slab_alloc_bench;
mod slab_hash_bench;
mod swap_bench;
mod upsert_bench;

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use gpuhash_core::{Device, Stream};
use gpuhash_cuckoo::CuckooTable;
use gpuhash_slab_alloc::{Claim, Variant};
use gpuhash_slab_hash::SlabHashMap;
use measure::{Measurement, Runs};
use progress::Progress;

const USAGE: &str = "usage: gpuhash-bench [core] [slab-alloc] [slab-hash] [slab-hash-w2] [slab-hash-curve] [cuckoo] [contract] [swap] [upsert] [hyperspace] [shard] [--log2-n N] [--runs R] [--w4-batches B] [--svg PATH] [--csv PATH] [--w6-tables T,..] [--w6-p P,..] [--w6-card C,..] [--w6-no-cpu] [--w6-cpu-runs R] [--w6-cpu-batch B] [--w6-standalone-budget S] [--w5-parts P,..] [--w5-forms F,..] [--w5-batches B,..] [--w5-svg PATH]\n   or: gpuhash-bench anchors [--logs DIR] [--out DIR]";
/// The report that reads a run of the anchors instead of timing anything.
const ANCHORS: &str = "anchors";
const WORKLOADS: [&str; 11] = [
    "core",
    "slab-alloc",
    "slab-hash",
    "slab-hash-w2",
    "slab-hash-curve",
    "cuckoo",
    "contract",
    "swap",
    "upsert",
    "hyperspace",
    "shard",
];

/// Command-line options.
struct Options {
    workloads: Vec<String>,
    log2_n: u32,
    runs: usize,
    w4_batches: u32,
    /// W5's pieces.
    w5: swap_bench::parts::Parts,
    /// W6's pieces.
    w6: hyperspace_bench::parts::Parts,
    svg: PathBuf,
    csv: PathBuf,
    /// `anchors`: write the anchor report instead of running workloads.
    anchors: bool,
    /// Where the anchor logs are.
    logs: PathBuf,
    /// Where the anchor report goes; the logs folder if not given.
    out: Option<PathBuf>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        workloads: Vec::new(),
        log2_n: 26,
        runs: 11,
        w4_batches: 16,
        w5: swap_bench::parts::Parts::default(),
        w6: hyperspace_bench::parts::Parts::default(),
        svg: PathBuf::from("slab-hash-curve.svg"),
        csv: PathBuf::from("slab-hash-curve.csv"),
        anchors: false,
        logs: PathBuf::from("target/anchors/out"),
        out: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if WORKLOADS.contains(&arg.as_str()) {
            options.workloads.push(arg);
            continue;
        }
        if arg == ANCHORS {
            options.anchors = true;
            continue;
        }
        if hyperspace_bench::parts::Parts::is_switch(&arg) {
            options.w6.switch(&arg)?;
            continue;
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{arg} needs a value; {USAGE}"))?;
        let number = |max: u32| match value.parse::<u32>() {
            Ok(v) if (1..=max).contains(&v) => Ok(v),
            _ => Err(format!(
                "{arg} takes a number from 1 to {max}, not {value:?}"
            )),
        };
        if hyperspace_bench::parts::Parts::takes_value(&arg) {
            options.w6.flag(&arg, &value)?;
            continue;
        }
        if swap_bench::parts::Parts::takes_value(&arg) {
            options.w5.flag(&arg, &value)?;
            continue;
        }
        match arg.as_str() {
            "--log2-n" => options.log2_n = number(30)?,
            "--runs" => options.runs = number(1000)? as usize,
            "--w4-batches" => options.w4_batches = if value == "0" { 0 } else { number(64)? },
            "--svg" => options.svg = PathBuf::from(&value),
            "--csv" => options.csv = PathBuf::from(&value),
            "--logs" => options.logs = PathBuf::from(&value),
            "--out" => options.out = Some(PathBuf::from(&value)),
            _ => return Err(format!("unknown argument {arg}; {USAGE}")),
        }
    }
    if options.anchors && !options.workloads.is_empty() {
        return Err(format!(
            "{ANCHORS} reads logs and runs no workload; name it alone. {USAGE}"
        ));
    }
    if options.workloads.is_empty() {
        options.workloads = WORKLOADS.iter().map(|w| w.to_string()).collect();
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

fn run(options: &Options) -> Result<(), Box<dyn Error>> {
    if options.anchors {
        let out = options.out.as_ref().unwrap_or(&options.logs);
        for path in anchors::write(&options.logs, out)? {
            println!("written: {}", path.display());
        }
        return Ok(());
    }
    let device = Device::default()?;
    let p = device.properties();
    println!(
        "device: {} (compute {}.{}, {} SMs, {:.1} GiB); median of {} timed runs after 3 warm-up runs",
        p.name,
        p.compute_capability.0,
        p.compute_capability.1,
        p.multiprocessors,
        p.total_memory as f64 / f64::from(1 << 30),
        options.runs
    );
    let stream = device.new_stream()?;
    let n = 1usize << options.log2_n;
    let runs = Runs {
        warm_up: measure::WARM_UP_RUNS,
        timed: options.runs,
    };
    // An idle GPU runs at low clocks until it has been busy for a while: keep it busy
    // for a second before timing anything.
    core_bench::keep_busy(&stream, n, std::time::Duration::from_secs(1))?;
    // Every bandwidth is compared with the copy bandwidth measured in this same run.
    let copy = core_bench::device_copy(&stream, n, runs)?;
    let copy_rate = copy.bytes_per_second().unwrap_or(f64::NAN);
    let print = |row: Measurement| println!("{}", row.row(copy_rate));
    for workload in &options.workloads {
        println!();
        let progress = Progress::start(workload);
        match workload.as_str() {
            "core" => {
                println!(
                    "## core: n = 2^{} pairs, u32 keys and values",
                    options.log2_n
                );
                println!("{}", Measurement::HEADER);
                print(core_bench::device_copy(&stream, n, runs)?);
                print(core_bench::generator(&stream, n, runs, true)?);
                print(core_bench::generator(&stream, n, runs, false)?);
                for row in core_bench::bus(&stream, runs)? {
                    print(row);
                }
            }
            "contract" => contract(&device, &stream, n, runs, &progress)?,
            "slab-alloc" => {
                println!(
                    "## slab-alloc: one 128-byte slab per thread; allocators reserve twice the count"
                );
                println!("{}", Measurement::HEADER);
                slab_alloc_bench::reserve_malloc_heap(&device)?;
                let steps = slab_alloc_bench::COUNTS.len() + 1;
                for (i, count) in slab_alloc_bench::COUNTS.into_iter().enumerate() {
                    progress.step(&format!("{count} threads"), i + 1, steps);
                    for variant in [Variant::Regular, Variant::Light] {
                        for claim in [Claim::One, Claim::Runs] {
                            print(slab_alloc_bench::slab_alloc(
                                &stream, variant, claim, count, runs,
                            )?);
                        }
                    }
                }
                progress.step("device malloc", steps, steps);
                // One timed run after one warm-up run that also sets up the heap.
                let malloc_runs = Runs {
                    warm_up: 1,
                    timed: 1,
                };
                print(slab_alloc_bench::device_malloc(
                    &stream,
                    slab_alloc_bench::MALLOC_COUNT,
                    malloc_runs,
                )?);
            }
            "slab-hash" => {
                println!(
                    "## slab-hash W1: n = 2^{} pairs, u32 keys and values, light allocator",
                    options.log2_n
                );
                println!("{}", Measurement::HEADER);
                let mut memory = Vec::new();
                let steps = slab_hash_bench::SIZINGS.len() + slab_hash_bench::MIXES.len();
                for (i, sizing) in slab_hash_bench::SIZINGS.into_iter().enumerate() {
                    progress.step(&format!("W1 {}", sizing.label()), i + 1, steps);
                    let bulk = slab_hash_bench::bulk(&stream, n, sizing, runs)?;
                    bulk.rows.into_iter().for_each(print);
                    memory.push(bulk.memory_line);
                }
                println!();
                println!(
                    "## slab-hash memory (MiB): after build, after removing half, after flush"
                );
                println!(
                    "| sizing | pair bytes | slabs in use | reserved | pair bytes after removal | in use after removal | in use after flush |"
                );
                println!("| --- | --- | --- | --- | --- | --- | --- |");
                memory.iter().for_each(|line| println!("{line}"));
                let mix_n = n.min(1 << 24);
                println!();
                println!(
                    "## slab-hash W3: {mix_n} operations in one launch, table of {} pairs at utilization 0.5",
                    mix_n / 2
                );
                println!("{}", Measurement::HEADER);
                for (i, (name, shares)) in slab_hash_bench::MIXES.into_iter().enumerate() {
                    let step = slab_hash_bench::SIZINGS.len() + i + 1;
                    progress.step(&format!("W3 {name}"), step, steps);
                    print(slab_hash_bench::mixed(&stream, mix_n, name, shares, runs)?);
                }
            }
            "slab-hash-w2" => {
                println!(
                    "## slab-hash W2: incremental insertion into an empty table sized to end at memory utilization 0.5; u32 keys and values, light allocator; each batch timed, median of {} passes",
                    slab_hash_bench::W2_PASSES
                );
                println!("{}", slab_hash_bench::Incremental::HEADER);
                let mut sizes = vec![(1 << 21, 1 << 15), (1 << 21, 1 << 16), (1 << 21, 1 << 17)];
                if n > 1 << 21 {
                    sizes.push((n, 1 << 20));
                }
                let steps = sizes.len() + 2;
                for (i, &(total, batch)) in sizes.iter().enumerate() {
                    progress.step(
                        &format!("W2 {total} pairs, batches of {batch}"),
                        i + 1,
                        steps,
                    );
                    let w2 = slab_hash_bench::incremental(&stream, total, batch)?;
                    println!("{}", w2.row());
                }
                // Batches too small to matter on the device: what remains is the fixed
                // cost of one batch.
                println!();
                progress.step("W2 batches of 32 pairs", steps - 1, steps);
                println!("## slab-hash W2 fixed cost: the same with batches of 32 pairs");
                println!("{}", slab_hash_bench::Incremental::HEADER);
                println!(
                    "{}",
                    slab_hash_bench::incremental(&stream, 1 << 15, 32)?.row()
                );
                println!();
                println!(
                    "## slab-hash W2 fixed cost, step by step: median of 101 runs after 3 warm-up runs, µs"
                );
                progress.step("W2 fixed cost step by step", steps, steps);
                println!("| step | device (CUDA events) | host (the call) |\n| --- | --- | --- |");
                for (step, device_us, host_us) in slab_hash_bench::batch_overhead(&stream, 101)? {
                    println!("| {step} | {device_us:.1} | {host_us:.1} |");
                }
            }
            "slab-hash-curve" => {
                let curve_n = n.min(1 << 24);
                println!(
                    "## slab-hash rate against memory utilization: W1 with n = 2^{} pairs, u32 keys and values, light allocator",
                    curve_n.trailing_zeros()
                );
                println!("{}", slab_hash_bench::CurvePoint::HEADER);
                let mut points = Vec::new();
                let steps = slab_hash_bench::CURVE_TARGETS.len();
                for (i, target) in slab_hash_bench::CURVE_TARGETS.into_iter().enumerate() {
                    progress.step(&format!("memory utilization {target}"), i + 1, steps);
                    let point =
                        slab_hash_bench::CurvePoint::measure(&stream, curve_n, target, runs)?;
                    println!("{}", point.row());
                    points.push(point);
                }
                let mut csv = String::from(slab_hash_bench::CurvePoint::CSV_HEADER);
                csv.push('\n');
                for point in &points {
                    csv.push_str(&point.csv());
                    csv.push('\n');
                }
                std::fs::write(&options.csv, csv)
                    .map_err(|e| format!("cannot write {}: {e}", options.csv.display()))?;
                let chart = slab_hash_bench::curve_chart(&points, curve_n, &p.name);
                std::fs::write(&options.svg, chart.svg())
                    .map_err(|e| format!("cannot write {}: {e}", options.svg.display()))?;
                println!();
                println!(
                    "points written to {} and {}",
                    options.csv.display(),
                    options.svg.display()
                );
            }
            "upsert" => upsert(&device, &stream, n, runs, &progress)?,
            "cuckoo" => cuckoo::run(
                &device,
                options.log2_n,
                options.runs,
                options.w4_batches,
                &progress,
            )?,
            "swap" => swap_bench::run(
                &device,
                options.log2_n,
                options.runs,
                &options.w5,
                &progress,
            )?,
            "hyperspace" => hyperspace_bench::run(
                &device,
                options.log2_n,
                options.runs,
                &options.w6,
                &progress,
            )?,
            "shard" => shard_bench::run(options.log2_n, runs, &progress)?,
            _ => unreachable!("parse_options admits only known workloads"),
        }
        println!();
        println!("({workload}: {:.1} s wall clock)", progress.elapsed_s());
        progress.finish();
    }
    Ok(())
}

/// The contract workload: fixed batch costs, then host-slice batches against the bus.
fn contract(
    device: &Device,
    stream: &Stream,
    n: usize,
    runs: Runs,
    progress: &Progress,
) -> Result<(), Box<dyn Error>> {
    progress.step("fixed batch cost", 1, 4);
    let bus = contract_bench::Bus::measure(stream, runs.timed)?;
    println!("## contract: fixed cost of one 1024-key batch (insert + get), microseconds");
    println!("| table | host slices | device buffers |\n| --- | --- | --- |");
    {
        let slab = SlabHashMap::<u32, u32>::with_capacity(device, 1 << 20)?;
        contract_bench::print_batch_cost("slab hash map u32/u32", &slab, stream)?;
        let cuckoo = CuckooTable::<u32, u32>::with_capacity(device, 1 << 20)?;
        contract_bench::print_batch_cost("DyHash u32/u32", &cuckoo, stream)?;
    }
    println!();
    contract_bench::header(device, n, bus);
    progress.step("parts", 2, 4);
    contract_bench::parts(stream, n, bus, runs)?;
    {
        progress.step("slab hash map end to end", 3, 4);
        let slab = SlabHashMap::<u32, u32>::with_capacity(device, n)?;
        contract_bench::end_to_end("slab hash map", &slab, n, bus, runs)?;
        contract_bench::end_to_end_registered("slab hash map", &slab, n, bus, runs)?;
    }
    progress.step("DyHash end to end", 4, 4);
    let cuckoo = CuckooTable::<u32, u32>::with_capacity(device, n)?;
    contract_bench::end_to_end("DyHash", &cuckoo, n, bus, runs)?;
    contract_bench::end_to_end_registered("DyHash", &cuckoo, n, bus, runs)?;
    Ok(())
}

/// The upsert workload: counting batches beside inserts of the same keys.
fn upsert(
    device: &Device,
    stream: &Stream,
    n: usize,
    runs: Runs,
    progress: &Progress,
) -> Result<(), Box<dyn Error>> {
    println!(
        "## upsert: n = 2^{} keys, u32 keys and values, into an emptied map sized for n",
        n.trailing_zeros()
    );
    println!("{}", Measurement::HEADER);
    let slab = SlabHashMap::<u32, u32>::with_capacity(device, n)?;
    let cuckoo = CuckooTable::<u32, u32>::with_capacity(device, n)?;
    let key_sets = upsert_bench::key_sets(stream, n)?;
    for (i, keys) in key_sets.iter().enumerate() {
        progress.step(keys.name, i + 1, key_sets.len());
        for row in upsert_bench::rows(stream, "slab hash map", &slab, keys, runs)? {
            println!("{}", row.row(f64::NAN));
        }
        for row in upsert_bench::rows(stream, "DyHash", &cuckoo, keys, runs)? {
            println!("{}", row.row(f64::NAN));
        }
    }
    Ok(())
}
