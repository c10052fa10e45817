//! `gpuhash-bench hyperspace`: W6, the hyperspace index (gpuhash-hyperspace, GHSH) beside
//! a CPU hyperspace index on every core, stand-alone secondary indexes and a GPU column
//! scan.
//!
//! For n = 2^N tuples, p = 2, 4, 8 attributes and attribute cardinalities 100, 10^4 and
//! 10^5 (uniform values; see [`workload`]): bulk build, key search, single-attribute
//! search, conjunctive search (A1 and A2), modify with a bucket change, delete, on the GPU
//! index (each attribute in a subspace of its own) and on the CPU index of the same
//! spaces, with the GPU over CPU ratio. Searches report queries and matching tuples a
//! second. The single-attribute and conjunctive searches also run as a GPU column scan
//! (`gpuhash_hyperspace::scan::ColumnScan`: every tuple read, a batch's distinct values in
//! a hash table in shared memory, what a dataframe library does), over columns uploaded
//! once before the timing, with the index over scan ratio. Then, for each p and
//! cardinality, one `SlabHashMultiMap` per attribute (value to key) as the stand-alone
//! alternative: its build rate, its memory against the index's, and its single-attribute
//! search (keys only, no tuples). Last, at p = 4 and cardinality 10^4: the search
//! strategies (grouped by bucket, GHSH's warp pre-combination, against one subtask at a
//! time) and adaptive regrouping under a query mix that shifts halfway.
//!
//! Every operation is called through its host form (key searches through the device form
//! with the keys uploaded and the answers brought back as columns, as the CPU index gives
//! them) and timed by the wall clock around the call, which waits for its work: uploads of
//! the batch and downloads of the answers included, for the index and the column scan
//! alike. Medians of the timed runs after warm-up.

use std::error::Error;
use std::time::Instant;

use gpuhash_core::table::{MultiMap, Table};
use gpuhash_core::{Device, DeviceBuffer};
use gpuhash_hyperspace::scan::ColumnScan;
use gpuhash_hyperspace::shape::{Field, FieldSet, SpaceShape};
use gpuhash_hyperspace::{
    DeviceTuples, HyperspaceIndex, HyperspaceOptions, Query, SearchStrategy, TupleBatch,
};
use gpuhash_slab_hash::SlabHashMultiMap;

use crate::hyperspace::cpu_index::{CpuHyperspace, Tuples};
use crate::hyperspace::cpu_search::QueryBatch;
use crate::hyperspace::workload::{self, Skew, Spec};
use crate::progress::Progress;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Attributes a tuple, W6's.
const ATTRIBUTES: [usize; 3] = [2, 4, 8];
/// Distinct values of each attribute, W6's.
const CARDINALITIES: [u32; 3] = [100, 10_000, 100_000];
/// Conjunctive searches, modifies and deletes a batch, and the queries of a batch of the
/// regrouping mix.
const UPDATE_BATCH: usize = 1 << 16;
/// Key searches a batch.
const KEY_BATCH: usize = 1 << 20;
/// Matching tuples an attribute search batch aims at.
const TARGET_MATCHES: u64 = 1 << 22;

/// Runs W6 and prints its tables; `only` keeps those attribute counts of [`ATTRIBUTES`]
/// (all when empty).
pub fn run(
    device: &Device,
    log2_n: u32,
    runs: usize,
    only: &[usize],
    progress: &Progress,
) -> Result<()> {
    let attributes: Vec<usize> = ATTRIBUTES
        .into_iter()
        .filter(|p| only.is_empty() || only.contains(p))
        .collect();
    let n = 1usize << log2_n;
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    println!(
        "## hyperspace W6: n = 2^{log2_n} tuples, u32 keys, attributes and values, uniform attribute values (the last rows Zipf, exponent 1); host forms, wall clock, median of {runs}; CPU index on {threads} threads"
    );
    println!(
        "| p | cardinality | operation | batch | GPU M ops/s | GPU M matches/s | CPU M ops/s | CPU M matches/s | GPU / CPU | scan M ops/s | index / scan |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut secondary = Vec::new();
    let steps = attributes.len() * CARDINALITIES.len() + 1;
    for (i, &p) in attributes.iter().enumerate() {
        for (j, &cardinality) in CARDINALITIES.iter().enumerate() {
            let step = i * CARDINALITIES.len() + j + 1;
            progress.step(&format!("p = {p}, cardinality {cardinality}"), step, steps);
            let spec = Spec {
                tuples: n,
                attributes: p,
                cardinality,
                skew: Skew::Uniform,
                seed: 0x57a6_0006 ^ (p as u64) << 32 ^ u64::from(cardinality),
            };
            let data = workload::tuples(&spec, threads);
            let memory = compare(device, &spec, &data, runs, threads)?;
            secondary.push(stand_alone(device, &spec, &data, memory, runs)?);
        }
    }
    let skewed = Spec {
        tuples: n,
        attributes: 4,
        cardinality: 10_000,
        skew: Skew::Zipf,
        seed: 0x57a6_0007,
    };
    progress.step("p = 4, cardinality 10^4, Zipf", steps, steps);
    let data = workload::tuples(&skewed, threads);
    let memory = compare(device, &skewed, &data, runs, threads)?;
    secondary.push(stand_alone(device, &skewed, &data, memory, runs)?);
    println!();
    println!(
        "## hyperspace W6: stand-alone secondary indexes, one SlabHashMultiMap (value to key) per attribute, n = 2^{log2_n}"
    );
    println!(
        "| p | cardinality | build M tuples/s | memory MiB | GPU index memory MiB | CPU index memory MiB | search batch | search M queries/s | M matches/s (keys only) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    secondary.iter().for_each(|row| println!("{row}"));
    let spec = Spec {
        tuples: n,
        attributes: 4,
        cardinality: 10_000,
        skew: Skew::Uniform,
        seed: 0x57a6_0006,
    };
    let data = workload::tuples(&spec, threads);
    println!();
    strategies(device, &spec, &data, runs)?;
    println!();
    regrouping(device, &spec, &data, runs, threads)?;
    Ok(())
}

/// The median of `runs` timed calls of `work` (after one untimed), in seconds; `work`
/// gets the run's number (0 the warm-up).
fn median_s(runs: usize, mut work: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    work(0)?;
    let mut times = Vec::with_capacity(runs);
    for run in 1..=runs.max(1) {
        let started = Instant::now();
        work(run)?;
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// One operation's rates: items and matches a second (M).
#[derive(Clone, Copy)]
struct Rate {
    ops: f64,
    matches: Option<f64>,
}

impl Rate {
    fn of(items: usize, matches: Option<u64>, seconds: f64) -> Rate {
        Rate {
            ops: items as f64 / seconds / 1e6,
            matches: matches.map(|m| m as f64 / seconds / 1e6),
        }
    }
}

fn matches_cell(rate: Rate) -> String {
    rate.matches.map_or("-".into(), |m| format!("{m:.1}"))
}

fn skew_note(spec: &Spec) -> &'static str {
    match spec.skew {
        Skew::Uniform => "",
        Skew::Zipf => " Zipf",
    }
}

/// One operation's row: the GPU index, the CPU index, and the column scan where it runs.
fn print_row(spec: &Spec, operation: &str, batch: usize, gpu: Rate, cpu: Rate, scan: Option<Rate>) {
    let scan_cells = scan.map_or("- | -".into(), |scan| {
        format!("{:.2} | {:.2}x", scan.ops, gpu.ops / scan.ops)
    });
    println!(
        "| {} | {}{} | {operation} | {batch} | {:.1} | {} | {:.2} | {} | {:.1}x | {scan_cells} |",
        spec.attributes,
        spec.cardinality,
        skew_note(spec),
        gpu.ops,
        matches_cell(gpu),
        cpu.ops,
        matches_cell(cpu),
        gpu.ops / cpu.ops
    );
}

fn batch(data: &Tuples) -> TupleBatch<'_> {
    TupleBatch {
        keys: &data.keys,
        attributes: &data.attributes,
        values: &data.values,
    }
}

/// The GPU index's queries of a CPU query batch.
fn gpu_queries(batch: &QueryBatch) -> Vec<Query> {
    (0..batch.len())
        .map(|i| {
            let mut fields = batch.fields.iter().enumerate();
            let (j, &first) = fields.next().expect("a query names a field");
            fields.fold(
                Query::new(first, batch.value(j, i)),
                |query, (j, &field)| query.and(field, batch.value(j, i)),
            )
        })
        .collect()
}

/// Looks `keys` up through the device form and brings the answers to the host as
/// columns (found flags and tuples), as the CPU index answers; returns the hits.
fn key_search(device: &Device, index: &HyperspaceIndex, keys: &[u32]) -> Result<u64> {
    let stream = device.lend_stream()?;
    let keys = DeviceBuffer::from_host(&stream, keys)?;
    let mut found = DeviceBuffer::<u8>::zeroed(&stream, keys.len())?;
    let mut tuples = DeviceTuples::unfilled(&stream, index.attribute_count(), keys.len())?;
    index.get_async(&stream, &keys, &mut found, &mut tuples)?;
    let found = found.to_host(&stream)?;
    tuples.to_host(&stream, index.attribute_count())?;
    Ok(found.iter().filter(|&&f| f != 0).count() as u64)
}

/// Conjunctive searches, modifies and deletes a batch of `spec`: [`UPDATE_BATCH`], less for
/// low cardinalities, whose long chains make each of them slow on the CPU index (1024 at
/// cardinality 100).
fn update_batch(spec: &Spec) -> usize {
    (UPDATE_BATCH as u64 * u64::from(spec.cardinality) / 10_000).clamp(1024, UPDATE_BATCH as u64)
        as usize
}

/// Queries a single-attribute search batch holds: about [`TARGET_MATCHES`] matches in all.
fn attribute_batch(spec: &Spec) -> usize {
    let per_query = (spec.tuples as u64 / u64::from(spec.cardinality)).max(1);
    (TARGET_MATCHES / per_query).clamp(1, 1 << 16) as usize
}

/// Every W6 operation on the GPU index and the CPU index of the same spaces; returns the
/// memory of each, in bytes, after the build.
fn compare(
    device: &Device,
    spec: &Spec,
    data: &Tuples,
    runs: usize,
    threads: usize,
) -> Result<(u64, u64)> {
    let p = spec.attributes;
    let n = data.len();
    let options = HyperspaceOptions::default();
    let gpu_build = median_s(runs.min(3), |_| {
        HyperspaceIndex::build(device, p, batch(data), options.clone())?;
        Ok(())
    })?;
    let index = HyperspaceIndex::build(device, p, batch(data), options)?;
    let memory = index.memory()?.bytes_reserved;
    let shapes = index.space_shapes();
    let population = spec.population();
    let cpu_build = median_s(runs.min(3), |_| {
        CpuHyperspace::build(
            p,
            data,
            shapes[0].clone(),
            shapes[1..].to_vec(),
            population.clone(),
            threads,
        )?;
        Ok(())
    })?;
    let mut cpu = CpuHyperspace::build(
        p,
        data,
        shapes[0].clone(),
        shapes[1..].to_vec(),
        population,
        threads,
    )?;
    let memory = (memory, cpu.memory() as u64);
    print_row(
        spec,
        "build",
        n,
        Rate::of(n, None, gpu_build),
        Rate::of(n, None, cpu_build),
        None,
    );

    let searches: [(&str, Vec<Field>, usize); 3] = [
        ("key search", vec![Field::Key], KEY_BATCH),
        (
            "search A1",
            vec![Field::Attribute(0)],
            attribute_batch(spec),
        ),
        (
            "search A1 and A2",
            vec![Field::Attribute(0), Field::Attribute(1)],
            update_batch(spec),
        ),
    ];
    // The column scan's columns, uploaded once, outside the timings.
    let scan = ColumnScan::new(device, p, batch(data))?;
    for (name, fields, count) in searches {
        let queries = workload::queries(data, &fields, count, 0x5ea7c4);
        let gpu_form = gpu_queries(&queries);
        let mut gpu_matches = 0;
        let gpu = median_s(runs, |_| {
            if fields == [Field::Key] {
                gpu_matches = key_search(device, &index, &queries.values)?;
            } else {
                gpu_matches = *index.search(&gpu_form)?.offsets.last().unwrap_or(&0);
            }
            Ok(())
        })?;
        let mut cpu_matches = 0;
        let cpu_time = median_s(runs, |_| {
            cpu_matches = *cpu.search(&queries)?.offsets.last().unwrap_or(&0);
            Ok(())
        })?;
        if gpu_matches != cpu_matches {
            return Err(format!(
                "{name}: the GPU index found {gpu_matches} matches, the CPU index {cpu_matches}"
            )
            .into());
        }
        let scan_rate = if fields == [Field::Key] {
            None
        } else {
            let mut scan_matches = 0;
            let scan_time = median_s(runs, |_| {
                scan_matches = *scan.search(&gpu_form)?.offsets.last().unwrap_or(&0);
                Ok(())
            })?;
            if scan_matches != gpu_matches {
                return Err(format!(
                    "{name}: the GPU index found {gpu_matches} matches, the column scan {scan_matches}"
                )
                .into());
            }
            Some(Rate::of(count, Some(scan_matches), scan_time))
        };
        print_row(
            spec,
            name,
            count,
            Rate::of(count, Some(gpu_matches), gpu),
            Rate::of(count, Some(cpu_matches), cpu_time),
            scan_rate,
        );
    }
    // The columns leave the device before the updates, which the scan would not see.
    drop(scan);

    // Modifies move every attribute to another value, so each tuple changes bucket in
    // every subspace; each run modifies other keys (drawn from its own seed).
    let modifies: Vec<workload::Modifies> = (0..=runs)
        .map(|run| workload::modifies(spec, data, update_batch(spec), 0x0d1f + run as u64))
        .collect();
    let gpu = median_s(runs, |run| {
        let m = &modifies[run];
        index.modify(TupleBatch {
            keys: &m.keys,
            attributes: &m.attributes,
            values: &m.values,
        })?;
        Ok(())
    })?;
    let cpu_time = median_s(runs, |run| {
        let m = &modifies[run];
        cpu.modify(&m.keys, &m.attributes, &m.values)?;
        Ok(())
    })?;
    let count = modifies[0].keys.len();
    print_row(
        spec,
        "modify (bucket change)",
        count,
        Rate::of(count, None, gpu),
        Rate::of(count, None, cpu_time),
        None,
    );

    let deletes: Vec<Vec<u32>> = (0..=runs)
        .map(|run| workload::deletes(data, update_batch(spec), 0xde1e + run as u64))
        .collect();
    let gpu = median_s(runs, |run| {
        index.delete(&deletes[run])?;
        Ok(())
    })?;
    let cpu_time = median_s(runs, |run| {
        cpu.delete(&deletes[run]);
        Ok(())
    })?;
    let (gpu_len, cpu_len) = (index.len()?, cpu.len());
    if gpu_len != cpu_len {
        return Err(format!(
            "after deletes the GPU index holds {gpu_len} tuples, the CPU index {cpu_len}"
        )
        .into());
    }
    print_row(
        spec,
        "delete",
        deletes[0].len(),
        Rate::of(deletes[0].len(), None, gpu),
        Rate::of(deletes[0].len(), None, cpu_time),
        None,
    );
    Ok(memory)
}

/// One `SlabHashMultiMap` per attribute (value to key): build, memory, search of A1.
fn stand_alone(
    device: &Device,
    spec: &Spec,
    data: &Tuples,
    (index_memory, cpu_memory): (u64, u64),
    runs: usize,
) -> Result<String> {
    let (p, n) = (spec.attributes, data.len());
    let make = || -> Result<Vec<SlabHashMultiMap<u32, u32>>> {
        (0..p)
            .map(|a| {
                let map = SlabHashMultiMap::<u32, u32>::with_capacity(device, n)?;
                map.insert(&data.attributes[a * n..(a + 1) * n], &data.keys)?;
                Ok(map)
            })
            .collect()
    };
    let build = median_s(runs.min(3), |_| make().map(drop))?;
    let maps = make()?;
    let mut memory = 0;
    for map in &maps {
        memory += map.memory()?.bytes_reserved;
    }
    let count = attribute_batch(spec);
    let queries = workload::queries(data, &[Field::Attribute(0)], count, 0x5ea7c4);
    let mut matches = 0;
    let search = median_s(runs, |_| {
        let rows = maps[0].get_all(&queries.values)?;
        matches = rows.iter().map(Vec::len).sum::<usize>();
        Ok(())
    })?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    Ok(format!(
        "| {p} | {}{} | {:.1} | {:.0} | {:.0} | {:.0} | {count} | {:.2} | {:.1} |",
        spec.cardinality,
        skew_note(spec),
        n as f64 / build / 1e6,
        mib(memory),
        mib(index_memory),
        mib(cpu_memory),
        count as f64 / search / 1e6,
        matches as f64 / search / 1e6
    ))
}

/// Single-attribute and conjunctive searches served grouped by bucket (GHSH's warp
/// pre-combination) and one subtask at a time (warp-cooperative work sharing).
fn strategies(device: &Device, spec: &Spec, data: &Tuples, runs: usize) -> Result<()> {
    println!(
        "## hyperspace W6: search strategies, p = {}, cardinality {}, n = {}",
        spec.attributes, spec.cardinality, spec.tuples
    );
    println!(
        "| search | batch | grouped M queries/s | one at a time M queries/s | grouped / one at a time |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let searches: [(&str, Vec<Field>, usize); 2] = [
        ("A1", vec![Field::Attribute(0)], attribute_batch(spec)),
        (
            "A1 and A2",
            vec![Field::Attribute(0), Field::Attribute(1)],
            UPDATE_BATCH,
        ),
    ];
    let indexes = [SearchStrategy::Grouped, SearchStrategy::OneAtATime].map(|strategy| {
        HyperspaceIndex::build(
            device,
            spec.attributes,
            batch(data),
            HyperspaceOptions::default().search(strategy),
        )
    });
    let [grouped, one_at_a_time] = indexes;
    let (grouped, one_at_a_time) = (grouped?, one_at_a_time?);
    for (name, fields, count) in searches {
        let queries = gpu_queries(&workload::queries(data, &fields, count, 0x57a7));
        let time = |index: &HyperspaceIndex| {
            median_s(runs, |_| {
                index.search(&queries)?;
                Ok(())
            })
        };
        let (a, b) = (time(&grouped)?, time(&one_at_a_time)?);
        println!(
            "| {name} | {count} | {:.2} | {:.2} | {:.2}x |",
            count as f64 / a / 1e6,
            count as f64 / b / 1e6,
            b / a
        );
    }
    Ok(())
}

/// A query mix that shifts halfway, from searches of A1 and of A2 to conjunctions of A1 and
/// A3, run through the GPU index, which records it: the conjunctions' rate in the grouping
/// made for the first half, then `regroup_from_history` (the policy's choice from what the
/// index recorded) and its time, and the rate after; the CPU index regrouped to the same
/// shapes beside it.
fn regrouping(
    device: &Device,
    spec: &Spec,
    data: &Tuples,
    runs: usize,
    threads: usize,
) -> Result<()> {
    let p = spec.attributes;
    println!(
        "## hyperspace W6: adaptive regrouping, p = {p}, cardinality {}, n = {}",
        spec.cardinality, spec.tuples
    );
    let index = HyperspaceIndex::build(device, p, batch(data), HyperspaceOptions::default())?;
    let shapes = index.space_shapes();
    let mut cpu = CpuHyperspace::build(
        p,
        data,
        shapes[0].clone(),
        shapes[1..].to_vec(),
        spec.population(),
        threads,
    )?;
    let mix = workload::shifting_mix(data, p, 8, UPDATE_BATCH, 0x5417);
    let half = mix.len() / 2;
    let gpu_mix: Vec<Vec<Query>> = mix.iter().map(gpu_queries).collect();
    let time_gpu = |batches: &[Vec<Query>]| {
        median_s(runs, |_| {
            for batch in batches {
                index.search(batch)?;
            }
            Ok(())
        })
    };
    let time_cpu = |cpu: &CpuHyperspace| {
        median_s(runs, |_| {
            for batch in &mix[half..] {
                cpu.search(batch)?;
            }
            Ok(())
        })
    };
    time_gpu(&gpu_mix[..half])?;
    let before = (time_gpu(&gpu_mix[half..])?, time_cpu(&cpu)?);
    let started = Instant::now();
    let chosen = index.regroup_from_history()?;
    let gpu_regroup = started.elapsed().as_secs_f64();
    let started = Instant::now();
    cpu.regroup(index.space_shapes()[1..].to_vec())?;
    let cpu_regroup = started.elapsed().as_secs_f64();
    let after = (time_gpu(&gpu_mix[half..])?, time_cpu(&cpu)?);
    let searches = ((mix.len() - half) * UPDATE_BATCH) as f64;
    let conjunction = FieldSet::of(mix[half].fields.iter().copied());
    let grouping = |shapes: &[SpaceShape]| -> Vec<Vec<(Field, u8)>> {
        shapes
            .iter()
            .map(|shape| shape.dimensions().to_vec())
            .collect()
    };
    println!(
        "| phase | subspaces (dimensions, coordinate bits) | {conjunction:?} GPU M queries/s | CPU M queries/s | regroup s (GPU, CPU) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| before regroup | {:?} | {:.2} | {:.3} | - |",
        grouping(&shapes[1..]),
        searches / before.0 / 1e6,
        searches / before.1 / 1e6
    );
    let outcome = match chosen {
        Some(shapes) => format!("{:?}", grouping(&shapes)),
        None => "kept (the policy found nothing cheaper)".into(),
    };
    println!(
        "| after regroup_from_history | {outcome} | {:.2} | {:.3} | {gpu_regroup:.3}, {cpu_regroup:.3} |",
        searches / after.0 / 1e6,
        searches / after.1 / 1e6
    );
    Ok(())
}
