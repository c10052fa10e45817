//! `gpuhash-bench swap`: Starfish (gpuhash-swap) on W5, a table 4x its device budget.
//!
//! n standard pairs (u32 keys and values) go into a swap table of DyHash children whose
//! device budget holds a quarter of them; inserts are timed from host slices, transfers
//! and paging included, then gets of all hits and all misses in batches of 2^10, 2^14,
//! 2^20 keys and n keys. The same table with no budget (every child resident) is timed
//! beside it. Then, on the paged table, gets of hits in batches of 2^10 to 2^20 keys with
//! the cost model forced to probe children on the host in place, then forced to page them
//! in, and with the default model: the crossover between probing and paging is where the
//! first two rows cross. Wall-clock time: the host forms wait for their work.

use std::time::Instant;

use gpuhash_core::Device;
use gpuhash_core::table::{Map, Table};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_cuckoo::{CuckooError, CuckooTable};
use gpuhash_swap::{CostModel, SwapMap, SwapOptions};

use crate::progress::Progress;

/// Pairs a child is made for: n over 16 children, at least 2^16.
fn child_capacity(n: usize) -> usize {
    (n / 16).max(1 << 16)
}

/// Runs W5 and prints its rows.
pub fn run(device: &Device, log2_n: u32, progress: &Progress) -> Result<(), CuckooError> {
    let n = 1usize << log2_n;
    let (keys, values) = workload::host_pairs(KeySet::Hits, 0, n as u32);
    let (misses, _) = workload::host_pairs(KeySet::Misses, 0, n as u32);
    let child = CuckooTable::<u32, u32>::with_capacity(device, child_capacity(n))?;
    let children = n.div_ceil(child_capacity(n));
    let scratch = gpuhash_swap::DEFAULT_SCRATCH_BYTES;
    let budget = scratch + child.memory()?.bytes_reserved * (children as u64 / 4).max(1);
    println!(
        "W5: n = 2^{log2_n} u32 pairs, {children} DyHash children, device budget {budget} bytes"
    );
    println!("| table | verb | batch | M ops/s |");
    println!("| --- | --- | --- | --- |");
    let tables = [
        ("paged (1/4 resident)", budget),
        ("fully resident", u64::MAX),
    ];
    for (i, (name, budget)) in tables.into_iter().enumerate() {
        progress.step(name, i + 1, tables.len());
        let options = SwapOptions::with_capacity(n)
            .child_capacity(child_capacity(n))
            .device_budget(budget);
        let table = SwapMap::<u32, u32>::new(device, options)?;
        let started = Instant::now();
        table.insert(&keys, &values)?;
        row(name, "insert", n, n, started);
        for batch in [1 << 10, 1 << 14, 1 << 20, n] {
            time_gets(&table, name, "get hit", &keys, batch)?;
            time_gets(&table, name, "get miss", &misses, batch)?;
        }
        println!("stats of {name}: {:?}", table.stats());
        if budget != u64::MAX {
            probing_against_paging(&table, name, &keys)?;
        }
    }
    Ok(())
}

/// Gets of hits in batches of 2^10 to 2^20 keys under a cost model that always probes
/// children on the host in place, one that always pages them, and the default.
fn probing_against_paging(
    table: &SwapMap<u32, u32>,
    name: &str,
    keys: &[u32],
) -> Result<(), CuckooError> {
    let default = table.cost_model();
    let models = [
        (
            "probe in place",
            CostModel {
                zero_copy_bytes_per_s: f64::INFINITY,
                ..default
            },
        ),
        (
            "page",
            CostModel {
                zero_copy_bytes_per_s: f64::MIN_POSITIVE,
                ..default
            },
        ),
        ("cost model", default),
    ];
    for (model_name, model) in models {
        table.set_cost_model(model);
        for log2_batch in (10..=20).step_by(2) {
            let batch = 1usize << log2_batch;
            // 16 batches a row: paging small batches costs whole children each.
            let sample = &keys[..keys.len().min(16 * batch)];
            let name = format!("{name}, {model_name}");
            time_gets(table, &name, "get hit", sample, batch)?;
        }
        println!("stats after {model_name}: {:?}", table.stats());
    }
    table.set_cost_model(default);
    Ok(())
}

/// Gets of every key of `keys` in batches of `batch`, checked: hits must be all found,
/// misses all missing.
fn time_gets(
    table: &SwapMap<u32, u32>,
    name: &str,
    verb: &str,
    keys: &[u32],
    batch: usize,
) -> Result<(), CuckooError> {
    let hits = verb == "get hit";
    let started = Instant::now();
    for chunk in keys.chunks(batch.min(keys.len())) {
        let found = table.get(chunk)?;
        assert!(
            found.iter().all(|f| f.is_some() == hits),
            "{name}: {verb} answered wrong"
        );
    }
    row(name, verb, batch, keys.len(), started);
    Ok(())
}

fn row(name: &str, verb: &str, batch: usize, items: usize, started: Instant) {
    let rate = items as f64 / started.elapsed().as_secs_f64() / 1e6;
    println!("| {name} | {verb} | {batch} | {rate:.1} |");
}
