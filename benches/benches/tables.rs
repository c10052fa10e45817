//! Criterion benchmarks of every table's main operations, for criterion's statistics,
//! history and HTML plots (`cargo bench -p gpuhash-bench`, reports under
//! `target/criterion/`, or `$CRITERION_HOME`).
//!
//! The slab hash map, DyHash (`CuckooTable`) and Starfish (`SwapMap`, every child
//! resident) with u32 keys and values, each made for n pairs, n = 2^`GPUHASH_BENCH_LOG2_N`
//! (default 22): insert of n pairs into the emptied table, get of n keys all held (hits)
//! and none held (misses), and, where the table is a `CombiningMap`, upsert of n keys
//! adding 1 to each (`Combine::Add`) into the emptied table.
//!
//! Every time is device time between CUDA events (`EventTimer`) inside `iter_custom`: the
//! keys, values and answer buffers are on the device before timing starts, and the table
//! is emptied (`clear_on`, queued before the start event) outside the timed span. Before
//! the gets are timed, their answers are checked once: all found for hits, none for misses. Sample
//! size and times are set so the whole run takes about a minute on an H100; criterion's
//! own options (`--sample-size`, `--measurement-time`, `--warm-up-time`, a name filter)
//! override them. Without a usable GPU it prints one line and exits with status 0.

use std::fmt::Display;
use std::time::Duration;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, measurement::WallTime};
use gpuhash_core::table::{Combine, CombiningMap, Map};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, EventTimer, Stream};
use gpuhash_cuckoo::CuckooTable;
use gpuhash_slab_hash::SlabHashMap;
use gpuhash_swap::SwapMap;

/// The environment variable that sets n = 2^value.
const LOG2_N_VARIABLE: &str = "GPUHASH_BENCH_LOG2_N";
const DEFAULT_LOG2_N: u32 = 22;
const LOG2_N_RANGE: std::ops::RangeInclusive<u32> = 10..=30;

/// The buffers every operation reads or writes, all on the device, n long.
struct Batch {
    keys: DeviceBuffer<u32>,
    values: DeviceBuffer<u32>,
    misses: DeviceBuffer<u32>,
    ones: DeviceBuffer<u32>,
    found: DeviceBuffer<u8>,
    values_out: DeviceBuffer<u32>,
}

impl Batch {
    fn new(stream: &Stream, n: usize) -> gpuhash_core::Result<Self> {
        let mut keys = DeviceBuffer::unfilled(stream, n)?;
        let mut values = DeviceBuffer::unfilled(stream, n)?;
        workload::generate(stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
        let mut misses = DeviceBuffer::unfilled(stream, n)?;
        workload::generate(stream, KeySet::Misses, 0, &mut misses, None)?;
        Ok(Self {
            keys,
            values,
            misses,
            ones: DeviceBuffer::from_host(stream, &vec![1u32; n])?,
            found: DeviceBuffer::unfilled(stream, n)?,
            values_out: DeviceBuffer::unfilled(stream, n)?,
        })
    }
}

/// Prints `message` and exits with status 1: a benchmark that cannot run, or runs wrongly,
/// has nothing to report.
fn fail(message: impl Display) -> ! {
    eprintln!("gpuhash tables bench: {message}");
    std::process::exit(1)
}

/// The value of `result`, or [`fail`] saying what failed.
fn or_exit<T, E: Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|e| fail(format_args!("{what}: {e}")))
}

/// n's exponent from the environment, or the default.
fn log2_n() -> Result<u32, String> {
    match std::env::var(LOG2_N_VARIABLE) {
        Err(_) => Ok(DEFAULT_LOG2_N),
        Ok(value) => value
            .parse()
            .ok()
            .filter(|v| LOG2_N_RANGE.contains(v))
            .ok_or_else(|| {
                format!(
                    "{LOG2_N_VARIABLE} takes a number from {} to {}, not {value:?}",
                    LOG2_N_RANGE.start(),
                    LOG2_N_RANGE.end()
                )
            }),
    }
}

/// Device time of `iters` runs of `work`, each after `reset` (queued before the start
/// event, so outside the timed span).
fn device_time<E: Display>(
    stream: &Stream,
    iters: u64,
    mut reset: impl FnMut() -> Result<(), E>,
    mut work: impl FnMut() -> Result<(), E>,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        or_exit(reset(), "reset before a timed run");
        let timer = or_exit(EventTimer::start(stream), "start event");
        or_exit(work(), "timed run");
        let ms = or_exit(timer.stop(), "stop event");
        total += Duration::from_secs_f64(f64::from(ms) / 1e3);
    }
    total
}

/// Insert, get of hits and get of misses on `table`, named by `id`.
fn bench_map<M>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    table: &M,
    stream: &Stream,
    batch: &mut Batch,
) where
    M: Map<Key = u32, Value = u32>,
{
    let clear = || table.clear_on(stream);
    group.bench_function(BenchmarkId::new("insert", id), |b| {
        b.iter_custom(|iters| {
            device_time(stream, iters, clear, || {
                table.insert_async(stream, &batch.keys, &batch.values)
            })
        })
    });
    // The gets read the table as the inserts left it: every key held.
    or_exit(
        table.insert_async(stream, &batch.keys, &batch.values),
        "fill the table",
    );
    let Batch {
        keys,
        misses,
        found,
        values_out,
        ..
    } = batch;
    for (name, queries, hits) in [("get-hits", &*keys, true), ("get-misses", &*misses, false)] {
        // A get that answers wrongly would time nothing worth knowing.
        or_exit(
            table.get_async(stream, queries, found, values_out),
            "get before timing",
        );
        let answers = or_exit(found.to_host(stream), "copy the answers");
        if !answers.iter().all(|&f| (f != 0) == hits) {
            fail(format_args!("{name} of {id} answered wrongly"));
        }
        group.bench_function(BenchmarkId::new(name, id), |b| {
            b.iter_custom(|iters| {
                device_time(
                    stream,
                    iters,
                    || Ok::<(), M::Error>(()),
                    || table.get_async(stream, queries, found, values_out),
                )
            })
        });
    }
}

/// Upsert adding 1 to each key on the emptied `table`, named by `id`.
fn bench_upsert<M>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    table: &M,
    stream: &Stream,
    batch: &Batch,
) where
    M: CombiningMap<Key = u32, Value = u32>,
{
    group.bench_function(BenchmarkId::new("upsert-add", id), |b| {
        b.iter_custom(|iters| {
            device_time(
                stream,
                iters,
                || table.clear_on(stream),
                || table.upsert_async(stream, &batch.keys, &batch.ones, Combine::Add),
            )
        })
    });
}

fn main() {
    let log2_n = or_exit(log2_n(), "bad setting");
    let device = match Device::default() {
        Ok(device) => device,
        Err(e) => {
            println!("gpuhash tables bench: skipped, no usable GPU ({e})");
            return;
        }
    };
    let stream = or_exit(device.new_stream(), "new stream");
    let n = 1usize << log2_n;
    let mut batch = or_exit(Batch::new(&stream, n), "device buffers");
    let id = format!("2^{log2_n}");
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    let mut group = criterion.benchmark_group("SlabHashMap");
    group.throughput(Throughput::Elements(n as u64));
    {
        let table = or_exit(
            SlabHashMap::<u32, u32>::with_capacity(&device, n),
            "slab hash map",
        );
        bench_map(&mut group, &id, &table, &stream, &mut batch);
        bench_upsert(&mut group, &id, &table, &stream, &batch);
    }
    group.finish();

    let mut group = criterion.benchmark_group("CuckooTable");
    group.throughput(Throughput::Elements(n as u64));
    {
        let table = or_exit(CuckooTable::<u32, u32>::with_capacity(&device, n), "DyHash");
        bench_map(&mut group, &id, &table, &stream, &mut batch);
        bench_upsert(&mut group, &id, &table, &stream, &batch);
    }
    group.finish();

    let mut group = criterion.benchmark_group("SwapMap");
    group.throughput(Throughput::Elements(n as u64));
    {
        let table = or_exit(SwapMap::<u32, u32>::with_capacity(&device, n), "SwapMap");
        bench_map(&mut group, &id, &table, &stream, &mut batch);
    }
    group.finish();

    criterion.final_summary();
}
