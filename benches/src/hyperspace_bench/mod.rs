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
//! alike. Medians of the timed runs after warm-up (the CPU index's: `--w6-cpu-runs`, 3 by
//! default). A build is timed on the runs whose last result the operations then use.
//!
//! The `--w6-*` flags ([`parts`]) pick the tables, attribute counts and cases a run covers
//! and the CPU index's part (none, fewer runs, the first items of each batch), so that W6
//! can run as several commands, each printing the rows of its pieces under the same
//! headers, and last a table of each piece's wall clock.

mod extra;
pub mod parts;

use std::error::Error;
use std::time::Instant;

use gpuhash_core::{Device, DeviceBuffer};
use gpuhash_hyperspace::scan::ColumnScan;
use gpuhash_hyperspace::shape::{Field, SpaceShape};
use gpuhash_hyperspace::{
    DeviceTuples, HyperspaceIndex, HyperspaceOptions, Matches, Query, TupleBatch,
};

use crate::hyperspace::cpu_index::{CpuHyperspace, Tuples};
use crate::hyperspace::cpu_search::QueryBatch;
use crate::hyperspace::workload::{self, Skew, Spec};
use crate::measure::median;
use crate::progress::Progress;

use self::extra::{regrouping, stand_alone, strategies};
use self::parts::{Case, CpuPart, Parts, Table};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Conjunctive searches, modifies and deletes a batch, and the queries of a batch of the
/// regrouping mix.
const UPDATE_BATCH: usize = 1 << 16;
/// Key searches a batch.
const KEY_BATCH: usize = 1 << 20;
/// Matching tuples an attribute search batch aims at.
const TARGET_MATCHES: u64 = 1 << 22;

/// The data set of a case.
fn spec_of(tuples: usize, attributes: usize, case: Case) -> Spec {
    match case {
        Case::Uniform(cardinality) => Spec {
            tuples,
            attributes,
            cardinality,
            skew: Skew::Uniform,
            seed: 0x57a6_0006 ^ (attributes as u64) << 32 ^ u64::from(cardinality),
        },
        Case::Zipf => Spec {
            tuples,
            attributes,
            cardinality: 10_000,
            skew: Skew::Zipf,
            seed: 0x57a6_0007,
        },
    }
}

/// Runs the pieces of W6 that `parts` picks and prints their tables, then each piece's
/// wall clock.
pub fn run(
    device: &Device,
    log2_n: u32,
    runs: usize,
    parts: &Parts,
    progress: &Progress,
) -> Result<()> {
    let n = 1usize << log2_n;
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let cpu = parts.cpu;
    println!("{}", parts.describe());
    println!();
    let mut walls: Vec<(String, f64)> = Vec::new();
    let cases = if parts.has(Table::Main) || parts.has(Table::StandAlone) {
        parts.cases()
    } else {
        Vec::new()
    };
    let fixed = [Table::Strategies, Table::Regroup]
        .iter()
        .filter(|&&t| parts.has(t))
        .count();
    let steps = cases.len() + fixed;
    if parts.has(Table::Main) && !cases.is_empty() {
        println!(
            "## hyperspace W6: n = 2^{log2_n} tuples, u32 keys, attributes and values, uniform attribute values (the last rows Zipf, exponent 1); host forms, wall clock, median of {runs}; CPU index on {threads} threads"
        );
        println!(
            "| p | cardinality | operation | batch | GPU M ops/s | GPU M matches/s | CPU M ops/s | CPU M matches/s | GPU / CPU | scan M ops/s | index / scan |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    }
    let mut secondary = Vec::new();
    for (step, &(p, case)) in cases.iter().enumerate() {
        let piece = format!("p = {p}, cardinality {case}");
        progress.step(&piece, step + 1, steps);
        let mut started = Instant::now();
        let spec = spec_of(n, p, case);
        let data = workload::tuples(&spec, threads);
        let memory = if parts.has(Table::Main) {
            let memory = compare(device, &spec, &data, runs, cpu, threads)?;
            walls.push((format!("{piece}: main"), started.elapsed().as_secs_f64()));
            started = Instant::now();
            Some(memory)
        } else {
            None
        };
        if parts.has(Table::StandAlone) {
            let row = stand_alone(
                device,
                &spec,
                &data,
                memory,
                runs,
                parts.standalone_budget_s,
            )?;
            // On stderr at once too: the table comes after every case, and a run cut
            // short would lose the rows made so far.
            eprintln!("{row}");
            secondary.push(row);
            walls.push((
                format!("{piece}: stand-alone"),
                started.elapsed().as_secs_f64(),
            ));
        }
    }
    if parts.has(Table::StandAlone) && !cases.is_empty() {
        println!();
        println!(
            "## hyperspace W6: stand-alone secondary indexes, one SlabHashMultiMap (value to key) per attribute, n = 2^{log2_n}"
        );
        println!(
            "| p | cardinality | build M tuples/s | memory MiB | GPU index memory MiB | CPU index memory MiB | search batch | search M queries/s | M matches/s (keys only) |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        secondary.iter().for_each(|row| println!("{row}"));
    }
    if fixed > 0 {
        let started = Instant::now();
        let spec = Spec {
            seed: 0x57a6_0006,
            ..spec_of(n, 4, Case::Uniform(10_000))
        };
        let data = workload::tuples(&spec, threads);
        let mut setup = started.elapsed().as_secs_f64();
        if parts.has(Table::Strategies) {
            progress.step("search strategies", cases.len() + 1, steps);
            let started = Instant::now();
            println!();
            strategies(device, &spec, &data, runs)?;
            walls.push((
                "search strategies".into(),
                setup + started.elapsed().as_secs_f64(),
            ));
            setup = 0.0;
        }
        if parts.has(Table::Regroup) {
            progress.step("adaptive regrouping", steps, steps);
            let started = Instant::now();
            println!();
            regrouping(device, &spec, &data, runs, cpu, threads)?;
            walls.push((
                "adaptive regrouping".into(),
                setup + started.elapsed().as_secs_f64(),
            ));
        }
    }
    println!();
    println!(
        "## hyperspace W6: wall clock of each piece, n = 2^{log2_n} (a case's data generation in its first piece)"
    );
    println!("| piece | s |");
    println!("| --- | --- |");
    for (piece, seconds) in walls {
        println!("| {piece} | {seconds:.1} |");
    }
    Ok(())
}

/// The median of `runs` timed calls of `work` (after one untimed), in seconds; `work`
/// gets the run's number (0 the warm-up).
fn median_s(runs: usize, work: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    Ok(median_kept(runs, work)?.0)
}

/// As [`median_s`] for work that makes something (a build): the median and what the last
/// run made, each earlier result dropped outside the timing.
fn median_kept<T>(runs: usize, mut work: impl FnMut(usize) -> Result<T>) -> Result<(f64, T)> {
    let mut made = work(0)?;
    let mut times = Vec::with_capacity(runs);
    for run in 1..=runs.max(1) {
        drop(made);
        let started = Instant::now();
        made = work(run)?;
        times.push(started.elapsed().as_secs_f64());
    }
    Ok((median(times), made))
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

/// A CPU index operation's rate and the items it ran (fewer than the GPU's batch under
/// `--w6-cpu-batch`).
#[derive(Clone, Copy)]
struct CpuRate {
    rate: Rate,
    items: usize,
}

/// One operation's row: the GPU index, the CPU index where it runs (the batch cell names
/// the CPU's items when it ran fewer), and the column scan where it runs.
fn print_row(
    spec: &Spec,
    operation: &str,
    batch: usize,
    gpu: Rate,
    cpu: Option<CpuRate>,
    scan: Option<Rate>,
) {
    let scan_cells = scan.map_or("- | -".into(), |scan| {
        format!("{:.2} | {:.2}x", scan.ops, gpu.ops / scan.ops)
    });
    let batch_cell = match cpu {
        Some(cpu) if cpu.items < batch => format!("{batch} (CPU {})", cpu.items),
        _ => batch.to_string(),
    };
    let cpu_cells = cpu.map_or("- | - | -".into(), |cpu| {
        format!(
            "{:.2} | {} | {:.1}x",
            cpu.rate.ops,
            matches_cell(cpu.rate),
            gpu.ops / cpu.rate.ops
        )
    });
    println!(
        "| {} | {}{} | {operation} | {batch_cell} | {:.1} | {} | {cpu_cells} | {scan_cells} |",
        spec.attributes,
        spec.cardinality,
        skew_note(spec),
        gpu.ops,
        matches_cell(gpu),
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
/// columns (found flags and tuples), as the CPU index answers; returns the found flags.
fn key_search(device: &Device, index: &HyperspaceIndex, keys: &[u32]) -> Result<Vec<u8>> {
    let stream = device.lend_stream()?;
    let keys = DeviceBuffer::from_host(&stream, keys)?;
    let mut found = DeviceBuffer::<u8>::zeroed(&stream, keys.len())?;
    let mut tuples = DeviceTuples::unfilled(&stream, index.attribute_count(), keys.len())?;
    index.get_async(&stream, &keys, &mut found, &mut tuples)?;
    let found = found.to_host(&stream)?;
    tuples.to_host(&stream, index.attribute_count())?;
    Ok(found)
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

/// The CPU index of the GPU index's spaces over `data`, timed; `None` without one.
fn cpu_build(
    cpu: CpuPart,
    spec: &Spec,
    data: &Tuples,
    shapes: &[SpaceShape],
    threads: usize,
) -> Result<Option<(f64, CpuHyperspace)>> {
    if !cpu.enabled {
        return Ok(None);
    }
    let built = median_kept(cpu.runs, |_| {
        Ok(CpuHyperspace::build(
            spec.attributes,
            data,
            shapes[0].clone(),
            shapes[1..].to_vec(),
            spec.population(),
            threads,
        )?)
    })?;
    Ok(Some(built))
}

/// Every W6 operation on the GPU index and the CPU index of the same spaces; returns the
/// memory of each, in bytes, after the build (the CPU's `None` without a CPU index).
fn compare(
    device: &Device,
    spec: &Spec,
    data: &Tuples,
    runs: usize,
    cpu_part: CpuPart,
    threads: usize,
) -> Result<(u64, Option<u64>)> {
    let p = spec.attributes;
    let n = data.len();
    let (gpu_build, index) = median_kept(runs.min(3), |_| {
        Ok(HyperspaceIndex::build(
            device,
            p,
            batch(data),
            HyperspaceOptions::default(),
        )?)
    })?;
    let shapes = index.space_shapes();
    let mut cpu = cpu_build(cpu_part, spec, data, &shapes, threads)?;
    let memory = (
        index.memory()?.bytes_reserved,
        cpu.as_ref().map(|(_, cpu)| cpu.memory() as u64),
    );
    let cpu_rate = |items: usize, matches: Option<u64>, seconds: f64| CpuRate {
        rate: Rate::of(items, matches, seconds),
        items,
    };
    print_row(
        spec,
        "build",
        n,
        Rate::of(n, None, gpu_build),
        cpu.as_ref().map(|&(seconds, _)| cpu_rate(n, None, seconds)),
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
        // Matches in all, and in the queries the CPU index runs.
        let cpu_count = cpu_part.items(count);
        let mut gpu_matches = (0, 0);
        let gpu = median_s(runs, |_| {
            gpu_matches = if fields == [Field::Key] {
                let found = key_search(device, &index, &queries.values)?;
                let hits = |f: &[u8]| f.iter().filter(|&&f| f != 0).count() as u64;
                (hits(&found), hits(&found[..cpu_count]))
            } else {
                let offsets = index.search(&gpu_form)?.offsets;
                (offsets[count], offsets[cpu_count])
            };
            Ok(())
        })?;
        let cpu_row = match cpu.as_ref() {
            None => None,
            Some((_, cpu)) => {
                let queries = queries.prefix(cpu_count);
                let mut cpu_matches = 0;
                let seconds = median_s(cpu_part.runs, |_| {
                    cpu_matches = *cpu.search(&queries)?.offsets.last().unwrap_or(&0);
                    Ok(())
                })?;
                if gpu_matches.1 != cpu_matches {
                    return Err(format!(
                        "{name}: the GPU index found {} matches for the first {cpu_count} queries, the CPU index {cpu_matches}",
                        gpu_matches.1
                    )
                    .into());
                }
                Some(cpu_rate(cpu_count, Some(cpu_matches), seconds))
            }
        };
        let gpu_matches = gpu_matches.0;
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
            cpu_row,
            scan_rate,
        );
        if fields != [Field::Key] {
            // A caller looping over batches reuses its answers' vectors: the same search
            // without the page faults of fresh host memory.
            let mut answers = Matches::default();
            let reused = median_s(runs, |_| Ok(index.search_into(&gpu_form, &mut answers)?))?;
            let found = answers.offsets[count];
            if found != gpu_matches {
                return Err(format!(
                    "{name}: {found} matches into reused answers, {gpu_matches} into fresh ones"
                )
                .into());
            }
            print_row(
                spec,
                &format!("{name}, answers into reused vectors"),
                count,
                Rate::of(count, Some(found), reused),
                cpu_row,
                None,
            );
        }
    }
    // The columns leave the device before the updates, which the scan would not see.
    drop(scan);

    // Modifies move every attribute to another value, so each tuple changes bucket in
    // every subspace; each run modifies other keys (drawn from its own seed). The CPU
    // index modifies the first keys of each batch, so the two then differ in the
    // attributes of the others; deletes do not look at attributes.
    let modifies: Vec<workload::Modifies> = (0..=runs.max(cpu_part.runs))
        .map(|run| workload::modifies(spec, data, update_batch(spec), 0x0d1f + run as u64))
        .collect();
    let count = modifies[0].keys.len();
    let gpu = median_s(runs, |run| {
        let m = &modifies[run];
        index.modify(TupleBatch {
            keys: &m.keys,
            attributes: &m.attributes,
            values: &m.values,
        })?;
        Ok(())
    })?;
    let cpu_count = cpu_part.items(count);
    let cpu_row = match cpu.as_mut() {
        None => None,
        Some((_, cpu)) => {
            let heads: Vec<workload::Modifies> =
                modifies.iter().map(|m| m.prefix(cpu_count)).collect();
            let seconds = median_s(cpu_part.runs, |run| {
                let m = &heads[run];
                cpu.modify(&m.keys, &m.attributes, &m.values)?;
                Ok(())
            })?;
            Some(cpu_rate(cpu_count, None, seconds))
        }
    };
    print_row(
        spec,
        "modify (bucket change)",
        count,
        Rate::of(count, None, gpu),
        cpu_row,
        None,
    );

    let deletes: Vec<Vec<u32>> = (0..=runs.max(cpu_part.runs))
        .map(|run| workload::deletes(data, update_batch(spec), 0xde1e + run as u64))
        .collect();
    let count = deletes[0].len();
    let cpu_count = cpu_part.items(count);
    let mut first_deleted = Vec::new();
    let gpu = median_s(runs, |run| {
        let deleted = index.delete(&deletes[run])?;
        if run == 0 {
            first_deleted = deleted;
        }
        Ok(())
    })?;
    let cpu_row = match cpu.as_mut() {
        None => None,
        Some((_, cpu)) => {
            let seconds = median_s(cpu_part.runs, |run| {
                let deleted = cpu.delete(&deletes[run][..cpu_count]);
                // Before any delete both hold the same keys.
                if run == 0 && deleted[..] != first_deleted[..cpu_count] {
                    return Err(
                        "the first deletes found other keys on the GPU index than on the CPU index"
                            .into(),
                    );
                }
                Ok(())
            })?;
            let (gpu_len, cpu_len) = (index.len()?, cpu.len());
            if cpu_count == count && runs == cpu_part.runs && gpu_len != cpu_len {
                return Err(format!(
                    "after deletes the GPU index holds {gpu_len} tuples, the CPU index {cpu_len}"
                )
                .into());
            }
            Some(cpu_rate(cpu_count, None, seconds))
        }
    };
    print_row(
        spec,
        "delete",
        count,
        Rate::of(count, None, gpu),
        cpu_row,
        None,
    );
    Ok(memory)
}
