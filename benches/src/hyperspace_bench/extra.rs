//! W6's tables past the main one: stand-alone secondary indexes, search strategies and
//! adaptive regrouping.

use std::time::Instant;

use gpuhash_core::Device;
use gpuhash_core::table::{MultiMap, Table};
use gpuhash_hyperspace::shape::{Field, FieldSet, SpaceShape};
use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Query, SearchStrategy};
use gpuhash_slab_hash::SlabHashMultiMap;

use super::parts::{CpuPart, stand_alone_estimate_s};
use super::{
    Result, UPDATE_BATCH, attribute_batch, batch, cpu_build, gpu_queries, median_kept, median_s,
    skew_note,
};
use crate::hyperspace::cpu_index::{CpuHyperspace, Tuples};
use crate::hyperspace::workload::{self, Spec};

/// One `SlabHashMultiMap` per attribute (value to key): build, memory, search of A1;
/// beside the memory of the GPU and CPU indexes of the same data (`memory`, from the main
/// table; without it the GPU index is built here for its memory, and the CPU's is `-`).
/// Not built when [`stand_alone_estimate_s`] expects its builds to pass `budget_s`: the
/// row says so.
pub(super) fn stand_alone(
    device: &Device,
    spec: &Spec,
    data: &Tuples,
    memory: Option<(u64, Option<u64>)>,
    runs: usize,
    budget_s: f64,
) -> Result<String> {
    let builds = runs.min(3) + 1;
    let expected = stand_alone_estimate_s(spec, builds);
    if expected > budget_s {
        return Ok(format!(
            "| {} | {}{} | not run: about {expected:.0} s for {builds} builds, over the budget of {budget_s:.0} s (estimated as if each insert walked its value's list) | - | - | - | - | - | - |",
            spec.attributes,
            spec.cardinality,
            skew_note(spec),
        ));
    }
    let (index_memory, cpu_memory) = match memory {
        Some(memory) => memory,
        None => {
            let index = HyperspaceIndex::build(
                device,
                spec.attributes,
                batch(data),
                HyperspaceOptions::default(),
            )?;
            (index.memory()?.bytes_reserved, None)
        }
    };
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
    let (build, maps) = median_kept(runs.min(3), |_| make())?;
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
        "| {p} | {}{} | {:.1} | {:.0} | {:.0} | {} | {count} | {:.2} | {:.1} |",
        spec.cardinality,
        skew_note(spec),
        n as f64 / build / 1e6,
        mib(memory),
        mib(index_memory),
        cpu_memory.map_or("-".into(), |m| format!("{:.0}", mib(m))),
        count as f64 / search / 1e6,
        matches as f64 / search / 1e6
    ))
}

/// Single-attribute and conjunctive searches served grouped by bucket (GHSH's warp
/// pre-combination) and one subtask at a time (warp-cooperative work sharing).
pub(super) fn strategies(device: &Device, spec: &Spec, data: &Tuples, runs: usize) -> Result<()> {
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
/// shapes beside it (the first `cpu.items` queries of each batch), where it runs.
pub(super) fn regrouping(
    device: &Device,
    spec: &Spec,
    data: &Tuples,
    runs: usize,
    cpu_part: CpuPart,
    threads: usize,
) -> Result<()> {
    let p = spec.attributes;
    println!(
        "## hyperspace W6: adaptive regrouping, p = {p}, cardinality {}, n = {}",
        spec.cardinality, spec.tuples
    );
    let index = HyperspaceIndex::build(device, p, batch(data), HyperspaceOptions::default())?;
    let shapes = index.space_shapes();
    let mut cpu = cpu_build(
        CpuPart {
            runs: 0,
            ..cpu_part
        },
        spec,
        data,
        &shapes,
        threads,
    )?
    .map(|(_, cpu)| cpu);
    let mix = workload::shifting_mix(data, p, 8, UPDATE_BATCH, 0x5417);
    let half = mix.len() / 2;
    let gpu_mix: Vec<Vec<Query>> = mix.iter().map(gpu_queries).collect();
    let cpu_count = cpu_part.items(UPDATE_BATCH);
    let cpu_mix: Vec<_> = mix[half..].iter().map(|b| b.prefix(cpu_count)).collect();
    let time_gpu = |batches: &[Vec<Query>]| {
        median_s(runs, |_| {
            for batch in batches {
                index.search(batch)?;
            }
            Ok(())
        })
    };
    let time_cpu = |cpu: Option<&CpuHyperspace>| match cpu {
        None => Ok(None),
        Some(cpu) => median_s(cpu_part.runs, |_| {
            for batch in &cpu_mix {
                cpu.search(batch)?;
            }
            Ok(())
        })
        .map(Some),
    };
    time_gpu(&gpu_mix[..half])?;
    let before = (time_gpu(&gpu_mix[half..])?, time_cpu(cpu.as_ref())?);
    let started = Instant::now();
    let chosen = index.regroup_from_history()?;
    let gpu_regroup = started.elapsed().as_secs_f64();
    let cpu_regroup = match cpu.as_mut() {
        None => None,
        Some(cpu) => {
            let started = Instant::now();
            cpu.regroup(index.space_shapes()[1..].to_vec())?;
            Some(started.elapsed().as_secs_f64())
        }
    };
    let after = (time_gpu(&gpu_mix[half..])?, time_cpu(cpu.as_ref())?);
    let searches = ((mix.len() - half) * UPDATE_BATCH) as f64;
    let cpu_searches = (cpu_mix.len() * cpu_count) as f64;
    let cpu_cell = |seconds: Option<f64>| {
        seconds.map_or("-".into(), |s| format!("{:.3}", cpu_searches / s / 1e6))
    };
    let conjunction = FieldSet::of(mix[half].fields.iter().copied());
    let grouping = |shapes: &[SpaceShape]| -> Vec<Vec<(Field, u8)>> {
        shapes
            .iter()
            .map(|shape| shape.dimensions().to_vec())
            .collect()
    };
    let cpu_batch = if cpu_count < UPDATE_BATCH {
        format!(" (first {cpu_count} of each batch)")
    } else {
        String::new()
    };
    println!(
        "| phase | subspaces (dimensions, coordinate bits) | {conjunction:?} GPU M queries/s | CPU M queries/s{cpu_batch} | regroup s (GPU, CPU) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| before regroup | {:?} | {:.2} | {} | - |",
        grouping(&shapes[1..]),
        searches / before.0 / 1e6,
        cpu_cell(before.1)
    );
    let outcome = match chosen {
        Some(shapes) => format!("{:?}", grouping(&shapes)),
        None => "kept (the policy found nothing cheaper)".into(),
    };
    println!(
        "| after regroup_from_history | {outcome} | {:.2} | {} | {gpu_regroup:.3}, {} |",
        searches / after.0 / 1e6,
        cpu_cell(after.1),
        cpu_regroup.map_or("-".into(), |s| format!("{s:.3}"))
    );
    Ok(())
}
