//! `gpuhash-bench cuckoo`: DyHash (gpuhash-cuckoo) on DESIGN.md's workloads W1 and W4.
//!
//! - W1: a table sized so that n pairs fill it to 0.5, 0.8, 0.9 and 0.95; bulk insert of
//!   the n standard pairs into the empty table, then find all-hit and find all-miss; for
//!   u32 keys and values (in the default layout, packed buckets, then with split buckets
//!   forced, to compare them), then u64 keys, then 16-byte values (both split). Each row
//!   gives the table's device bytes a pair beside its rates. The insert is timed twice:
//!   with the default rule for equal keys of a batch (`DuplicateKeys::AnyCopy`) and, into
//!   a second table of the same size, with `DuplicateKeys::LastCopy`, whose price is the
//!   batch's reduction to the last copy of each key (the standard keys are distinct, so
//!   nothing is dropped: the figure is the cost of finding that out). Then the same finds on a
//!   table grown to n pairs from its smallest size by batches of 1M inserts with the
//!   default bounds (lookups stop early less often there: see the crate docs).
//! - W4 (the DyHash paper's dynamic workload): batches of 1M inserts, 1M finds (hits) and r x 1M
//!   deletes of the oldest keys, then the same batches again with inserts and deletes
//!   swapped; the fill factor stays within [alpha, 0.9], except that the table, made for
//!   1M pairs, keeps that size as its capacity floor (so as it empties at the end it stops
//!   halving there). DyHash against the rehash-everything baseline, with the time split
//!   into insert, find, delete, resize.
//!
//! Every figure is timed with CUDA events on the stream that runs the work.

use gpuhash_core::table::{Key, Map, Table, Value};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, Error, EventTimer, Stream};
use gpuhash_cuckoo::{BucketLayout, CuckooOptions, CuckooTable, DuplicateKeys, Result};

use crate::measure::{WARM_UP_RUNS, median};
use crate::progress::Progress;

/// Loads of W1.
const LOADS: [f64; 4] = [0.5, 0.8, 0.9, 0.95];

/// Runs W1 and W4 and prints their tables, each phase a step of `progress`.
pub fn run(
    device: &Device,
    log2_n: u32,
    runs: usize,
    w4_batches: u32,
    progress: &Progress,
) -> Result<()> {
    let stream = device.new_stream()?;
    let steps = if w4_batches > 0 { 6 } else { 5 };
    let step = |done: usize, what: &str| progress.step(what, done, steps);
    w1(device, &stream, log2_n, runs, step)?;
    step(5, "W1 grown");
    w1_grown(device, &stream, log2_n, runs)?;
    if w4_batches > 0 {
        step(6, "W4");
        w4(device, &stream, w4_batches, runs)?;
    }
    Ok(())
}

/// W1 for its pair shapes and layouts, each a step (1 to 4) told to `step`.
fn w1(
    device: &Device,
    stream: &Stream,
    log2_n: u32,
    runs: usize,
    step: impl Fn(usize, &str),
) -> Result<()> {
    let w1 = W1 {
        device,
        stream,
        log2_n,
        runs,
    };
    step(1, "W1 u32 keys and values, packed");
    w1.shape(
        "u32 keys and u32 values, packed buckets",
        BucketLayout::Auto,
        |k| k,
        |v| v,
    )?;
    step(2, "W1 u32 keys and values, split");
    w1.shape(
        "u32 keys and u32 values, split buckets",
        BucketLayout::Split,
        |k| k,
        |v| v,
    )?;
    step(3, "W1 u64 keys");
    w1.shape(
        "u64 keys and u32 values, split buckets",
        BucketLayout::Auto,
        wide_key,
        |v| v,
    )?;
    step(4, "W1 16-byte values");
    w1.shape(
        "u32 keys and 16-byte values, split buckets",
        BucketLayout::Auto,
        |k| k,
        |v| [v, v ^ 1, v ^ 2, v ^ 3],
    )
}

/// What every W1 table shares.
struct W1<'a> {
    device: &'a Device,
    stream: &'a Stream,
    log2_n: u32,
    runs: usize,
}

/// A u64 key from a standard u32 key: the key in the high half keeps the hit and miss
/// sets disjoint, and the low half makes the key use all 64 bits.
fn wide_key(key: u32) -> u64 {
    (u64::from(key) << 32) | u64::from(key ^ 0x9e37_79b9)
}

impl W1<'_> {
    /// W1 for one pair shape and bucket layout: the standard keys and values
    /// (`KeySet::Hits`, `KeySet::Misses`) widened by `key` and `value`.
    fn shape<K: Key, V: Value>(
        &self,
        shape: &str,
        layout: BucketLayout,
        key: fn(u32) -> K,
        value: fn(u32) -> V,
    ) -> Result<()> {
        let W1 {
            device,
            stream,
            log2_n,
            runs,
        } = *self;
        let n = 1usize << log2_n;
        println!(
            "W1: n = 2^{log2_n} pairs, {shape}, d = 3, median of {runs} timed runs after {WARM_UP_RUNS} warm-up runs"
        );
        let (hit_keys, hit_values) = workload::host_pairs(KeySet::Hits, 0, n as u32);
        let (miss_keys, _) = workload::host_pairs(KeySet::Misses, 0, n as u32);
        let widen_keys = |keys: Vec<u32>| keys.into_iter().map(key).collect::<Vec<K>>();
        let keys = DeviceBuffer::from_host(stream, &widen_keys(hit_keys))?;
        let misses = DeviceBuffer::from_host(stream, &widen_keys(miss_keys))?;
        let host_values: Vec<V> = hit_values.into_iter().map(value).collect();
        let values = DeviceBuffer::from_host(stream, &host_values)?;
        let mut found = DeviceBuffer::<u8>::zeroed(stream, n)?;
        let mut out = DeviceBuffer::<V>::zeroed(stream, n)?;
        println!();
        println!(
            "| load asked | load built | buckets/subtable | insert M ops/s | insert LastCopy M ops/s | find hit M ops/s | find miss M ops/s | table bytes/pair |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        for load in LOADS {
            let slots = CuckooTable::<K, V>::bucket_slots(layout)? as f64;
            let buckets = (n as f64 / load / slots / 3.0).ceil() as u64;
            let options = CuckooOptions::default()
                .initial_buckets(buckets)
                .alpha(0.0)
                .beta(0.99)
                .layout(layout);
            let last_copy_ms = {
                let last_copy = options.clone().duplicate_keys(DuplicateKeys::LastCopy);
                let table = CuckooTable::<K, V>::new(device, last_copy)?;
                time_insert(&table, stream, &keys, &values, runs, buckets)?
            };
            let table = CuckooTable::<K, V>::new(device, options)?;
            let insert_ms = time_insert(&table, stream, &keys, &values, runs, buckets)?;
            let built = table.fill_factor()?;
            let hit_ms = time_find(&table, stream, &keys, &mut found, &mut out, runs)?;
            check_found(stream, &found, 1, "find hit")?;
            if out.to_host(stream)? != host_values {
                return Err(Error::InvalidInput("find hit returned wrong values".into()).into());
            }
            let miss_ms = time_find(&table, stream, &misses, &mut found, &mut out, runs)?;
            check_found(stream, &found, 0, "find miss")?;
            let rate = |ms: f64| n as f64 / (ms / 1e3) / 1e6;
            println!(
                "| {load:.2} | {built:.4} | {buckets} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
                rate(insert_ms),
                rate(last_copy_ms),
                rate(hit_ms),
                rate(miss_ms),
                table_bytes_per_pair(&table)?
            );
        }
        println!();
        Ok(())
    }
}

/// Median milliseconds of inserting the batch into the empty table (cleared on `stream`
/// before each run, not timed); checks that every pair went in without a resize from `buckets` a
/// subtable.
fn time_insert<K: Key, V: Value>(
    table: &CuckooTable<K, V>,
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    values: &DeviceBuffer<V>,
    runs: usize,
    buckets: u64,
) -> Result<f64> {
    let mut times = Vec::new();
    for run in 0..WARM_UP_RUNS + runs {
        // Cleared on the timed stream, so that the insert's launches find the table's
        // buffers in order there; cleared on another stream, the insert's first launch
        // would record and wait for an event a buffer (about 15 us at 2^22), a cost of
        // how the run is set up, not of the insert.
        table.clear_on(stream)?;
        stream.synchronize()?;
        let timer = EventTimer::start(stream)?;
        table.insert_async(stream, keys, values)?;
        let ms = f64::from(timer.stop()?);
        if run >= WARM_UP_RUNS {
            times.push(ms);
        }
    }
    let subtables = table.subtable_buckets();
    let len = table.len()?;
    if len != keys.len() || subtables != vec![buckets; subtables.len()] {
        return Err(Error::InvalidInput(format!(
            "{:?}: table holds {len} pairs in {subtables:?} buckets, expected {} in {buckets} each",
            table.options().duplicate_keys,
            keys.len()
        ))
        .into());
    }
    Ok(median(times))
}

/// W1's finds on a u32 table grown from its smallest size by batches of 2^20 inserts with
/// the default options (fill factor within [0.4, 0.9], resizing one subtable at a time).
fn w1_grown(device: &Device, stream: &Stream, log2_n: u32, runs: usize) -> Result<()> {
    let n = 1usize << log2_n;
    let batch = n.min(1 << 20);
    println!(
        "W1 grown: n = 2^{log2_n} u32 pairs inserted by batches of {batch} into a table of the default options (packed buckets) grown from its smallest size (not timed); finds timed as above"
    );
    let (hit_keys, hit_values) = workload::host_pairs(KeySet::Hits, 0, n as u32);
    let (miss_keys, _) = workload::host_pairs(KeySet::Misses, 0, n as u32);
    let keys = DeviceBuffer::from_host(stream, &hit_keys)?;
    let misses = DeviceBuffer::from_host(stream, &miss_keys)?;
    let table = CuckooTable::<u32, u32>::new(device, CuckooOptions::with_capacity(0))?;
    for (k, v) in hit_keys.chunks(batch).zip(hit_values.chunks(batch)) {
        table.insert(k, v)?;
    }
    let mut found = DeviceBuffer::<u8>::zeroed(stream, n)?;
    let mut out = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let hit_ms = time_find(&table, stream, &keys, &mut found, &mut out, runs)?;
    check_found(stream, &found, 1, "grown: find hit")?;
    if out.to_host(stream)? != hit_values {
        return Err(Error::InvalidInput("grown: find hit returned wrong values".into()).into());
    }
    let miss_ms = time_find(&table, stream, &misses, &mut found, &mut out, runs)?;
    check_found(stream, &found, 0, "grown: find miss")?;
    let rate = |ms: f64| n as f64 / (ms / 1e3) / 1e6;
    println!();
    println!(
        "| load reached | buckets of the subtables | find hit M ops/s | find miss M ops/s | table bytes/pair |"
    );
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| {:.4} | {:?} | {:.0} | {:.0} | {:.2} |",
        table.fill_factor()?,
        table.subtable_buckets(),
        rate(hit_ms),
        rate(miss_ms),
        table_bytes_per_pair(&table)?
    );
    println!();
    Ok(())
}

fn time_find<K: Key, V: Value>(
    table: &CuckooTable<K, V>,
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    found: &mut DeviceBuffer<u8>,
    out: &mut DeviceBuffer<V>,
    runs: usize,
) -> Result<f64> {
    let mut times = Vec::new();
    for run in 0..WARM_UP_RUNS + runs {
        let timer = EventTimer::start(stream)?;
        table.get_async(stream, keys, found, out)?;
        let ms = f64::from(timer.stop()?);
        if run >= WARM_UP_RUNS {
            times.push(ms);
        }
    }
    Ok(median(times))
}

fn check_found(stream: &Stream, found: &DeviceBuffer<u8>, want: u8, what: &str) -> Result<()> {
    if found.to_host(stream)?.iter().any(|&f| f != want) {
        return Err(Error::InvalidInput(format!("{what}: wrong found flags")).into());
    }
    Ok(())
}

/// Removes `keys`, then counts the pairs left: removes return without waiting and the
/// table makes the downsizes they call for when it next counts, so counting here keeps
/// those downsizes in the run (the resize column) as the blocking remove did.
fn delete(
    table: &CuckooTable<u32, u32>,
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    removed: &mut DeviceBuffer<u8>,
) -> Result<()> {
    table.remove_async(stream, keys, removed)?;
    table.len_on(stream)?;
    Ok(())
}

/// Table bytes (the subtables and shared words, not the insert scratch space) per pair.
fn table_bytes_per_pair<K: Key, V: Value>(table: &CuckooTable<K, V>) -> Result<f64> {
    Ok(table.memory()?.bytes_in_use as f64 / table.len()? as f64)
}

/// Milliseconds of one W4 run, split by operation.
#[derive(Default)]
struct Split {
    total: f64,
    insert: f64,
    find: f64,
    delete: f64,
    resize: f64,
}

impl Split {
    /// Each column's median over `runs` (the total's too, so the parts need not add up to it).
    fn median(runs: &[Split]) -> Split {
        let column = |f: fn(&Split) -> f64| median(runs.iter().map(f).collect());
        Split {
            total: column(|s| s.total),
            insert: column(|s| s.insert),
            find: column(|s| s.find),
            delete: column(|s| s.delete),
            resize: column(|s| s.resize),
        }
    }
}

const BATCH: usize = 1 << 20;

fn w4(device: &Device, stream: &Stream, batches: u32, runs: usize) -> Result<()> {
    println!(
        "W4: {batches} batches of 1M inserts, 1M finds (hits), r x 1M deletes of the oldest keys, then the batches again with inserts and deletes swapped; u32 keys and values, d = 3, beta = 0.9; each column the median of {runs} runs (a new table each) after {WARM_UP_RUNS} warm-up runs"
    );
    println!();
    println!(
        "| alpha | r | mode | total ms | insert ms | find ms | delete ms | resize ms | resizes | final fill | final table bytes/pair |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let configs = [
        (0.25, 0.4),
        (0.35, 0.4),
        (0.40, 0.4),
        (0.45, 0.4),
        (0.40, 0.1),
        (0.40, 0.3),
        (0.40, 0.5),
    ];
    for (alpha, r) in configs {
        for rehash_all in [false, true] {
            // Rehash-everything needs alpha < beta / 2 to be able to halve at all.
            if rehash_all && alpha >= 0.45 {
                continue;
            }
            let options = CuckooOptions::with_capacity(BATCH)
                .alpha(alpha)
                .beta(0.9)
                .rehash_all(rehash_all);
            let mut splits = Vec::with_capacity(runs);
            let mut last = None;
            for run in 0..WARM_UP_RUNS + runs {
                let table = CuckooTable::<u32, u32>::new(device, options.clone())?;
                let split = w4_run(&table, stream, batches, r)?;
                if run >= WARM_UP_RUNS {
                    splits.push(split);
                }
                last = Some(table);
            }
            let split = Split::median(&splits);
            // Every run does the same operations, so the resizes and the final state are
            // those of any one of them.
            let table = last.expect("at least one run");
            let stats = table.resize_stats();
            let mode = if rehash_all { "rehash all" } else { "DyHash" };
            println!(
                "| {alpha:.2} | {r:.1} | {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.3} | {:.2} |",
                split.total,
                split.insert,
                split.find,
                split.delete,
                split.resize,
                stats.upsizes + stats.downsizes + stats.rehashes,
                table.fill_factor()?,
                table_bytes_per_pair(&table)?
            );
        }
    }
    println!();
    println!(
        "insert and delete ms exclude the resizes they triggered (resize ms, measured on the host around each resize, which waits for its kernels); total = a run's insert + find + delete + resize, and each column is a median of its own. Table bytes/pair: the subtables' keys, values, locks and dirty bits and the shared words, over the pairs held (memory's bytes in use; the insert scratch space is not counted)."
    );
    Ok(())
}

fn w4_run(table: &CuckooTable<u32, u32>, stream: &Stream, batches: u32, r: f64) -> Result<Split> {
    let deletes = (r * BATCH as f64) as usize;
    let mut split = Split::default();
    let mut keys = DeviceBuffer::<u32>::zeroed(stream, BATCH)?;
    let mut values = DeviceBuffer::<u32>::zeroed(stream, BATCH)?;
    let mut gone = DeviceBuffer::<u32>::zeroed(stream, deletes)?;
    let mut gone_values = DeviceBuffer::<u32>::zeroed(stream, deletes)?;
    let mut found = DeviceBuffer::<u8>::zeroed(stream, BATCH)?;
    let mut removed = DeviceBuffer::<u8>::zeroed(stream, deletes)?;
    let mut removed_all = DeviceBuffer::<u8>::zeroed(stream, BATCH)?;
    let mut out = DeviceBuffer::<u32>::zeroed(stream, BATCH)?;
    // Adds the operation's time to its column, less the resizes it triggered, which go
    // to the resize column.
    let timed = |split: &mut Split,
                 column: fn(&mut Split) -> &mut f64,
                 work: &mut dyn FnMut() -> Result<()>|
     -> Result<()> {
        let resize_before = table.resize_stats().seconds;
        let timer = EventTimer::start(stream)?;
        work()?;
        let ms = f64::from(timer.stop()?);
        let resize_ms = (table.resize_stats().seconds - resize_before) * 1e3;
        *column(split) += (ms - resize_ms).max(0.0);
        split.resize += resize_ms;
        Ok(())
    };
    // Phase 1: batch b inserts keys [b M, (b+1) M) and deletes the r M keys
    // [b r M, (b+1) r M), the oldest still present.
    for phase in 0..2 {
        for b in 0..batches {
            let first = b * BATCH as u32;
            let first_gone = b * deletes as u32;
            workload::generate(stream, KeySet::Hits, first, &mut keys, Some(&mut values))?;
            workload::generate(
                stream,
                KeySet::Hits,
                first_gone,
                &mut gone,
                Some(&mut gone_values),
            )?;
            if phase == 0 {
                timed(&mut split, |s| &mut s.insert, &mut || {
                    table.insert_async(stream, &keys, &values)
                })?;
                timed(&mut split, |s| &mut s.find, &mut || {
                    table.get_async(stream, &keys, &mut found, &mut out)
                })?;
                check_found(stream, &found, 1, "W4 find")?;
                timed(&mut split, |s| &mut s.delete, &mut || {
                    delete(table, stream, &gone, &mut removed)
                })?;
            } else {
                // Swapped: the batch's inserts become deletes and its deletes inserts.
                timed(&mut split, |s| &mut s.delete, &mut || {
                    delete(table, stream, &keys, &mut removed_all)
                })?;
                timed(&mut split, |s| &mut s.find, &mut || {
                    table.get_async(stream, &keys, &mut found, &mut out)
                })?;
                check_found(stream, &found, 0, "W4 find after delete")?;
                timed(&mut split, |s| &mut s.insert, &mut || {
                    table.insert_async(stream, &gone, &gone_values)
                })?;
            }
            let (fill, o) = (table.fill_factor()?, table.options());
            if fill > o.beta || (fill < o.alpha && !table.at_minimum_size()?) {
                return Err(Error::InvalidInput(format!(
                    "W4 fill factor {fill} left [{}, {}]",
                    o.alpha, o.beta
                ))
                .into());
            }
        }
    }
    split.total = split.insert + split.find + split.delete + split.resize;
    Ok(split)
}
