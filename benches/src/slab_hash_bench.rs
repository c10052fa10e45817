//! Slab hash: W1 (bulk build, then find all-hit and all-miss at a memory utilization), W2
//! (incremental insertion in batches) and W3 (concurrent mixes in one launch) of DESIGN.md,
//! u32 keys and values.

use std::time::Instant;

use gpuhash_core::last_copy::DuplicateKeys;
use gpuhash_core::table::{Map, Table};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{DeviceBuffer, Error, EventTimer, Stream};
use gpuhash_slab_alloc::Variant;
use gpuhash_slab_hash::{OpCode, SlabHashError, SlabHashMap, SlabHashOptions, sizing};

use crate::measure::{Measurement, Runs, WARM_UP_RUNS, median_ms, no_setup};

/// How W1 sizes the table.
#[derive(Debug, Clone, Copy)]
pub enum Sizing {
    /// Buckets such that pairs fill slab memory to this share: the SlabHash paper's memory
    /// utilization (pair bytes over bytes of slabs in use).
    Utilization(f64),
    /// Buckets = n / (15 * load): head slabs this full on average, lists beyond them.
    HeadLoad(f64),
}

impl Sizing {
    /// The bucket count for `n` pairs.
    pub fn buckets(self, n: usize) -> u32 {
        match self {
            Sizing::Utilization(target) => sizing::buckets_for_utilization(n as u64, target),
            Sizing::HeadLoad(load) => (n as f64 / (15.0 * load)).ceil() as u32,
        }
    }

    /// What the sizing is, in words.
    pub fn label(self) -> String {
        match self {
            Sizing::Utilization(target) => format!("memory utilization {target}"),
            Sizing::HeadLoad(load) => format!("head-slab load {load}"),
        }
    }
}

/// The sizings W1 runs at.
pub const SIZINGS: [Sizing; 4] = [
    Sizing::Utilization(0.5),
    Sizing::Utilization(0.9),
    Sizing::HeadLoad(0.5),
    Sizing::HeadLoad(0.9),
];

/// Memory utilization targets of the rate-against-utilization curve (the SlabHash paper's figure).
/// Pairs take 120 of a full slab's 128 bytes, so utilization stays below 15/16 = 0.9375
/// however long the lists: 0.93 (lists of about 58 slabs at 2^24 pairs) is the last point,
/// as 0.94 cannot be reached.
pub const CURVE_TARGETS: [f64; 9] = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.93];

/// W3's mixes: shares of (insert, remove, find hit, find miss) in percent.
pub const MIXES: [(&str, [u32; 4]); 3] = [
    ("G0", [50, 50, 0, 0]),
    ("G1", [20, 20, 30, 30]),
    ("G2", [10, 10, 40, 40]),
];

fn map_for(stream: &Stream, n: usize, buckets: u32) -> Result<SlabHashMap, SlabHashError> {
    map_keeping(stream, n, buckets, DuplicateKeys::AnyCopy)
}

fn map_keeping(
    stream: &Stream,
    n: usize,
    buckets: u32,
    duplicate_keys: DuplicateKeys,
) -> Result<SlabHashMap, SlabHashError> {
    let options = SlabHashOptions::with_capacity(n as u64)
        .buckets(buckets)
        .variant(Variant::Light)
        .duplicate_keys(duplicate_keys);
    SlabHashMap::new(stream.device(), options)
}

/// Median milliseconds of a build of `keys` into `map` emptied before each run, after
/// one untimed build that grows the allocator to what the timed builds reserve. Each
/// timed `insert_async` finds its room reserved already and waits for nothing.
fn time_build(
    stream: &Stream,
    map: &SlabHashMap,
    keys: &DeviceBuffer<u32>,
    values: &DeviceBuffer<u32>,
    runs: Runs,
) -> Result<f64, SlabHashError> {
    map.insert_async(stream, keys, values)?;
    let ms = median_ms(
        stream,
        runs,
        &mut (),
        // Cleared on the timed stream, before the timer starts (see cuckoo::time_insert).
        |()| map.clear_on(stream),
        |()| map.insert_async(stream, keys, values),
    )?;
    check(
        map.len_on(stream)? == keys.len(),
        "a timed build lost pairs",
    )?;
    Ok(ms)
}

fn check(ok: bool, what: &str) -> Result<(), SlabHashError> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!("slab hash benchmark: {what}")).into())
    }
}

/// What W1 measured at one sizing.
pub struct Bulk {
    /// Buckets of the table.
    pub buckets: u32,
    /// Memory utilization after the build, measured.
    pub utilization: f64,
    /// Rows for build, find hit, find miss, and the build of a map that keeps the last
    /// copy of each key, in that order.
    pub rows: Vec<Measurement>,
    /// The row of the memory table.
    pub memory_line: String,
}

/// W1 at one sizing: rows for build, find hit, find miss, and the memory line.
pub fn bulk(stream: &Stream, n: usize, sizing: Sizing, runs: Runs) -> Result<Bulk, SlabHashError> {
    let buckets = sizing.buckets(n);
    let map = map_for(stream, n, buckets)?;
    let mut keys = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut values = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut misses = DeviceBuffer::<u32>::zeroed(stream, n)?;
    workload::generate(stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
    workload::generate(stream, KeySet::Misses, 0, &mut misses, None)?;
    // The keys are distinct: the LastCopy build pays for finding that out.
    let last_copy_ms = {
        let map = map_keeping(stream, n, buckets, DuplicateKeys::LastCopy)?;
        time_build(stream, &map, &keys, &values, runs)?
    };
    let build_ms = time_build(stream, &map, &keys, &values, runs)?;
    let memory = map.memory()?;
    check(map.len()? == n, "the build lost pairs")?;

    let mut values_found = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut found = DeviceBuffer::<u8>::zeroed(stream, n)?;
    let mut find = |queries: &DeviceBuffer<u32>, expect: u8| -> Result<f64, SlabHashError> {
        let ms = median_ms(stream, runs, &mut (), no_setup, |()| {
            map.get_async(stream, queries, &mut found, &mut values_found)
        })?;
        check(
            found.to_host(stream)?.iter().all(|&f| f == expect),
            "a lookup answered wrongly",
        )?;
        Ok(ms)
    };
    let hit_ms = find(&keys, 1)?;
    let miss_ms = find(&misses, 0)?;
    // Misses leave the values the hits found: check them.
    check(
        values_found
            .to_host(stream)?
            .iter()
            .enumerate()
            .all(|(i, &v)| v == workload::value(i as u32)),
        "a hit found a wrong value",
    )?;

    let label = |what: &str| {
        format!(
            "slab hash {what}, {}: {buckets} buckets, utilization {:.2}",
            sizing.label(),
            memory.utilization()
        )
    };
    let rows = vec![
        Measurement {
            name: label("build"),
            items: n,
            bytes: None,
            ms: build_ms,
        },
        Measurement {
            name: label("find hit"),
            items: n,
            bytes: None,
            ms: hit_ms,
        },
        Measurement {
            name: label("find miss"),
            items: n,
            bytes: None,
            ms: miss_ms,
        },
        Measurement {
            name: label("build, DuplicateKeys::LastCopy"),
            items: n,
            bytes: None,
            ms: last_copy_ms,
        },
    ];
    // Memory after removing half the pairs, before and after flush.
    let half: Vec<u32> = (0..n as u32 / 2).map(|i| KeySet::Hits.key(i * 2)).collect();
    map.remove(&half)?;
    let removed = map.memory()?;
    map.flush()?;
    let flushed = map.memory()?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let memory_line = format!(
        "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        sizing.label(),
        mib(memory.entry_bytes),
        mib(memory.bytes_in_use),
        mib(memory.bytes_reserved),
        mib(removed.entry_bytes),
        mib(removed.bytes_in_use),
        mib(flushed.bytes_in_use),
    );
    Ok(Bulk {
        buckets,
        utilization: memory.utilization(),
        rows,
        memory_line,
    })
}

/// W3: a table holding pairs 0..n/2, then one launch of n operations mixed as `shares`
/// says: inserts of new keys, removes and finds of present keys, finds of absent keys.
pub fn mixed(
    stream: &Stream,
    n: usize,
    name: &str,
    shares: [u32; 4],
    runs: Runs,
) -> Result<Measurement, SlabHashError> {
    let base = n / 2;
    let map = map_for(stream, n, Sizing::Utilization(0.5).buckets(n))?;
    let (present, present_values) = workload::host_pairs(KeySet::Hits, 0, base as u32);
    let mut ops = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    for i in 0..n as u32 {
        let pick = gpuhash_core::hash::fmix32(i ^ 0xabcd) % 100;
        let (op, key) = if pick < shares[0] {
            (OpCode::INSERT, KeySet::Hits.key(base as u32 + i))
        } else if pick < shares[0] + shares[1] {
            (OpCode::REMOVE, present[i as usize % base])
        } else if pick < shares[0] + shares[1] + shares[2] {
            (OpCode::GET, present[(i as usize * 7) % base])
        } else {
            (OpCode::GET, KeySet::Misses.key(i))
        };
        ops.push(op);
        keys.push(key);
    }
    let ops = DeviceBuffer::from_host(stream, &ops)?;
    let keys = DeviceBuffer::from_host(stream, &keys)?;
    let values = DeviceBuffer::from_host(stream, &keys.to_host(stream)?)?;
    let mut results = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut done = DeviceBuffer::<u8>::zeroed(stream, n)?;
    let ms = median_ms(
        stream,
        runs,
        &mut (),
        |()| {
            map.clear()?;
            map.insert(&present, &present_values)
        },
        |()| map.apply_async(stream, &ops, &keys, &values, &mut results, &mut done),
    )?;
    // Counting reports inserts that found no room, were there any.
    map.len_on(stream)?;
    Ok(Measurement {
        name: format!("slab hash {name} mix"),
        items: n,
        bytes: None,
        ms,
    })
}

/// Timed passes of W2, each batch's median reported.
pub const W2_PASSES: usize = 5;

/// What W2 measured for one batch size.
pub struct Incremental {
    /// Pairs inserted in all.
    pub total: usize,
    /// Pairs a batch.
    pub batch: usize,
    /// Buckets of the table.
    pub buckets: u32,
    /// Memory utilization after the last batch, measured.
    pub utilization: f64,
    /// Median device time of each batch (CUDA events around `insert_async`), in
    /// milliseconds, in the order they ran.
    pub batch_ms: Vec<f64>,
    /// Median host time of each `insert_async` call (queueing the batch), milliseconds.
    pub enqueue_ms: Vec<f64>,
}

impl Incremental {
    /// The header of the table [`Incremental::row`] prints into.
    pub const HEADER: &'static str = "| batch | batches | total pairs | buckets | utilization at the end | sum of batch medians ms | M keys/s | first batch M keys/s | last batch M keys/s | mean batch µs | mean host enqueue µs |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |";

    /// Pairs over the sum of the batch medians, in millions a second.
    pub fn rate(&self) -> f64 {
        self.total as f64 / self.batch_ms.iter().sum::<f64>() / 1e3
    }

    /// The rate of batch `index`, in millions of pairs a second.
    pub fn batch_rate(&self, index: usize) -> f64 {
        self.batch as f64 / self.batch_ms[index] / 1e3
    }

    /// A table row.
    pub fn row(&self) -> String {
        let mean_us = |ms: &[f64]| ms.iter().sum::<f64>() / ms.len() as f64 * 1e3;
        format!(
            "| {} | {} | {} | {} | {:.2} | {:.3} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} |",
            self.batch,
            self.batch_ms.len(),
            self.total,
            self.buckets,
            self.utilization,
            self.batch_ms.iter().sum::<f64>(),
            self.rate(),
            self.batch_rate(0),
            self.batch_rate(self.batch_ms.len() - 1),
            mean_us(&self.batch_ms),
            mean_us(&self.enqueue_ms)
        )
    }
}

/// W2: pairs `0..total` inserted into an empty table in batches of `batch` (`insert_async`
/// each, timed with CUDA events), the table sized to end at memory utilization 0.5. One
/// untimed pass grows the allocator; then [`W2_PASSES`] timed passes, the table cleared
/// (untimed) before each, and the median of each batch over them.
pub fn incremental(
    stream: &Stream,
    total: usize,
    batch: usize,
) -> Result<Incremental, SlabHashError> {
    check(
        batch > 0 && total.is_multiple_of(batch),
        "the batch size must divide the total",
    )?;
    let buckets = Sizing::Utilization(0.5).buckets(total);
    let map = map_for(stream, total, buckets)?;
    let batches = total / batch;
    let mut keys = Vec::with_capacity(batches);
    let mut values = Vec::with_capacity(batches);
    for b in 0..batches {
        let mut k = DeviceBuffer::<u32>::zeroed(stream, batch)?;
        let mut v = DeviceBuffer::<u32>::zeroed(stream, batch)?;
        workload::generate(
            stream,
            KeySet::Hits,
            (b * batch) as u32,
            &mut k,
            Some(&mut v),
        )?;
        keys.push(k);
        values.push(v);
    }
    // The untimed pass: the allocator grows to what the whole run reserves, and keeps
    // that memory through `clear`.
    for b in 0..batches {
        map.insert_async(stream, &keys[b], &values[b])?;
    }
    check(map.len()? == total, "the untimed pass lost pairs")?;

    let mut times = vec![Vec::with_capacity(W2_PASSES); batches];
    let mut enqueue_times = vec![Vec::with_capacity(W2_PASSES); batches];
    let mut utilization = 0.0;
    for _ in 0..W2_PASSES {
        map.clear()?;
        stream.synchronize()?;
        for b in 0..batches {
            let timer = EventTimer::start(stream)?;
            let queued = Instant::now();
            map.insert_async(stream, &keys[b], &values[b])?;
            enqueue_times[b].push(queued.elapsed().as_secs_f64() * 1e3);
            times[b].push(f64::from(timer.stop()?));
        }
        check(map.len_on(stream)? == total, "the batches lost pairs")?;
        // Every 997th pair and the last one must be there with their values, and as many
        // keys never inserted must be absent.
        let sample: Vec<u32> = (0..total as u32)
            .step_by(997)
            .chain([total as u32 - 1])
            .collect();
        let hits: Vec<u32> = sample.iter().map(|&i| KeySet::Hits.key(i)).collect();
        let found = map.get(&hits)?;
        check(
            sample
                .iter()
                .zip(&found)
                .all(|(&i, &v)| v == Some(workload::value(i))),
            "a sampled pair has a wrong value or is missing",
        )?;
        let misses: Vec<u32> = sample.iter().map(|&i| KeySet::Misses.key(i)).collect();
        check(
            map.get(&misses)?.iter().all(Option::is_none),
            "a key never inserted was found",
        )?;
        utilization = map.memory()?.utilization();
    }
    let medians = |times: Vec<Vec<f64>>| -> Vec<f64> {
        times
            .into_iter()
            .map(|mut t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
            .collect()
    };
    Ok(Incremental {
        total,
        batch,
        buckets,
        utilization,
        batch_ms: medians(times),
        enqueue_ms: medians(enqueue_times),
    })
}

/// Where the fixed cost of one small batch goes: for each step, the median device time
/// (CUDA events around it, as W2 times a batch) and host time of the call, in
/// microseconds, over `repeats` repetitions. Steps: nothing between the events; one
/// generator kernel for 32 pairs (a bare small launch); `insert_async` of 32 pairs already
/// present.
pub fn batch_overhead(
    stream: &Stream,
    repeats: usize,
) -> Result<Vec<(&'static str, f64, f64)>, SlabHashError> {
    const PAIRS: usize = 32;
    let map = map_for(stream, PAIRS, Sizing::Utilization(0.5).buckets(PAIRS))?;
    let mut keys = DeviceBuffer::<u32>::zeroed(stream, PAIRS)?;
    let mut values = DeviceBuffer::<u32>::zeroed(stream, PAIRS)?;
    workload::generate(stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
    map.insert_async(stream, &keys, &values)?;
    let mut scratch = DeviceBuffer::<u32>::zeroed(stream, PAIRS)?;

    type Step<'a> = Box<dyn FnMut() -> Result<(), SlabHashError> + 'a>;
    let steps: Vec<(&'static str, Step<'_>)> = vec![
        ("empty event pair", Box::new(|| Ok(()))),
        (
            "generator kernel, 32 pairs",
            Box::new(|| {
                Ok(workload::generate(
                    stream,
                    KeySet::Misses,
                    0,
                    &mut scratch,
                    None,
                )?)
            }),
        ),
        (
            "insert_async, 32 pairs",
            Box::new(|| map.insert_async(stream, &keys, &values)),
        ),
    ];
    let mut out = Vec::new();
    for (name, mut step) in steps {
        let mut device = Vec::with_capacity(repeats);
        let mut host = Vec::with_capacity(repeats);
        for run in 0..WARM_UP_RUNS + repeats {
            stream.synchronize()?;
            let timer = EventTimer::start(stream)?;
            let queued = Instant::now();
            step()?;
            let host_ms = queued.elapsed().as_secs_f64() * 1e3;
            let device_ms = f64::from(timer.stop()?);
            if run >= WARM_UP_RUNS {
                device.push(device_ms);
                host.push(host_ms);
            }
        }
        let median = |mut t: Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2] * 1e3
        };
        out.push((name, median(device), median(host)));
    }
    check(map.len_on(stream)? == PAIRS, "the probe lost pairs")?;
    Ok(out)
}

/// One point of the rate-against-utilization curve: W1 at a utilization target.
pub struct CurvePoint {
    /// The memory utilization the table was sized for.
    pub target: f64,
    /// Buckets of the table.
    pub buckets: u32,
    /// Memory utilization after the build, measured.
    pub utilization: f64,
    /// Build, find hit and find miss, in millions of operations a second.
    pub rates: [f64; 3],
}

impl CurvePoint {
    /// The header of [`CurvePoint::row`]'s table.
    pub const HEADER: &'static str = "| target utilization | buckets | measured utilization | build M ops/s | find hit M ops/s | find miss M ops/s |\n| --- | --- | --- | --- | --- | --- |";

    /// The header line of [`CurvePoint::csv`].
    pub const CSV_HEADER: &'static str =
        "target_utilization,buckets,measured_utilization,build_mops,find_hit_mops,find_miss_mops";

    /// W1 at memory utilization `target`.
    pub fn measure(
        stream: &Stream,
        n: usize,
        target: f64,
        runs: Runs,
    ) -> Result<Self, SlabHashError> {
        let bulk = bulk(stream, n, Sizing::Utilization(target), runs)?;
        let rate = |i: usize| bulk.rows[i].items_per_second() / 1e6;
        Ok(CurvePoint {
            target,
            buckets: bulk.buckets,
            utilization: bulk.utilization,
            rates: [rate(0), rate(1), rate(2)],
        })
    }

    /// A markdown table row.
    pub fn row(&self) -> String {
        let [build, hit, miss] = self.rates;
        format!(
            "| {} | {} | {:.3} | {build:.0} | {hit:.0} | {miss:.0} |",
            self.target, self.buckets, self.utilization
        )
    }

    /// A CSV line under [`CurvePoint::CSV_HEADER`].
    pub fn csv(&self) -> String {
        let [build, hit, miss] = self.rates;
        format!(
            "{},{},{:.4},{build:.1},{hit:.1},{miss:.1}",
            self.target, self.buckets, self.utilization
        )
    }
}

/// The curve as a chart: x the measured utilization, y the rates.
pub fn curve_chart(points: &[CurvePoint], n: usize, device: &str) -> crate::plot::Chart {
    let line = |name: &str, color, i: usize| crate::plot::Series {
        name: name.into(),
        color,
        dashed: false,
        points: points.iter().map(|p| (p.utilization, p.rates[i])).collect(),
    };
    crate::plot::Chart {
        title: format!(
            "Slab hash W1, n = 2^{} u32 pairs, {device}",
            n.trailing_zeros()
        ),
        x_label: "memory utilization (pair bytes / slab bytes in use)".into(),
        y_label: "M operations / s".into(),
        series: vec![
            line("build", "#1f77b4", 0),
            line("find hit", "#2ca02c", 1),
            line("find miss", "#d62728", 2),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_targets_are_reachable_at_the_curve_size() {
        // A target at or above 15/16 would drive the bucket search down to one bucket.
        let n = 1u64 << 24;
        for target in CURVE_TARGETS {
            let buckets = sizing::buckets_for_utilization(n, target);
            let predicted = n as f64 * 8.0 / (128.0 * sizing::expected_slabs(n, buckets, 15));
            assert!(
                (predicted - target).abs() < 0.002,
                "{target}: {predicted} with {buckets} buckets"
            );
            // Lists of at most about 270 slabs, so that a point takes seconds, not hours.
            assert!(
                u64::from(buckets) >= n / 4096,
                "{target}: {buckets} buckets"
            );
        }
    }

    #[test]
    fn incremental_rates_count_pairs_over_batch_medians() {
        let w2 = Incremental {
            total: 4000,
            batch: 1000,
            buckets: 10,
            utilization: 0.5,
            batch_ms: vec![0.001, 0.002, 0.003, 0.004],
            enqueue_ms: vec![0.001, 0.001, 0.001, 0.005],
        };
        assert!((w2.rate() - 4000.0 / 0.01e-3 / 1e6).abs() < 1e-6);
        assert!((w2.batch_rate(0) - 1000.0).abs() < 1e-9);
        assert!((w2.batch_rate(3) - 250.0).abs() < 1e-9);
        assert_eq!(
            w2.row(),
            "| 1000 | 4 | 4000 | 10 | 0.50 | 0.010 | 400 | 1000 | 250 | 2.5 | 2.0 |"
        );
    }
}
