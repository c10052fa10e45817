//! W1 on the sharded table (gpuhash-shard) per GPU count: 1, 2, 4 and 8 GPUs, as many as
//! are visible (ranks on devices 0, 1, ...), u32 keys and values, DyHash shards. Weak
//! scaling: n pairs a GPU (2^26 by default); strong scaling: 4n pairs in all (2^28). Each
//! batch is one device form from buffers on rank 0's GPU: the build (insert into the
//! emptied table) and a lookup of every key (all hits), wall-clock timed to the end of
//! the work on every GPU.
//!
//! Each row sets the aggregate rate against two references: linear scaling (the GPU
//! count times the one-GPU rate at the same pairs a GPU, for weak scaling, or the same
//! total, for strong scaling), and the exchange's bound: the bytes that leave and come
//! back to rank 0 (keys and values of the other ranks' share out for an insert; keys out
//! and a flag and a value back for a lookup) over the scatter bandwidth measured in the
//! same run through the same exchange ([`gpuhash_shard::scatter_bandwidth`]).

use std::error::Error;

use gpuhash_core::table::{Map, Table};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer};
use gpuhash_shard::{Comm, ShardOptions, ShardedMap, nccl_available, scatter_bandwidth};

use crate::measure::{Runs, median_wall_s};
use crate::progress::Progress;

/// GPU counts the benchmark tries.
const GPU_COUNTS: [usize; 4] = [1, 2, 4, 8];
/// Bytes rank 0 sends each peer when the scatter bandwidth is measured.
const PROBE_BYTES: usize = 256 << 20;

/// One measured configuration.
struct Row {
    gpus: usize,
    pairs: usize,
    insert_s: f64,
    lookup_s: f64,
    /// Scatter bandwidth out of rank 0, bytes a second.
    bandwidth: f64,
}

impl Row {
    /// M pairs a second, for a time.
    fn rate(&self, seconds: f64) -> f64 {
        self.pairs as f64 / seconds / 1e6
    }

    /// The exchange's bound in M pairs a second for `bytes_a_pair` leaving or coming back
    /// to rank 0 for each pair the other ranks own.
    fn bound(&self, bytes_a_pair: usize) -> String {
        if self.gpus == 1 {
            return "-".into();
        }
        let remote = self.pairs as f64 * (self.gpus - 1) as f64 / self.gpus as f64;
        let seconds = remote * bytes_a_pair as f64 / self.bandwidth;
        format!("{:.0}", self.pairs as f64 / seconds / 1e6)
    }
}

/// Runs both scalings and prints their tables.
pub fn run(log2_n: u32, runs: Runs, progress: &Progress) -> Result<(), Box<dyn Error>> {
    let visible = Device::count()?;
    let mut counts: Vec<usize> = GPU_COUNTS.into_iter().filter(|&g| g <= visible).collect();
    if !nccl_available() {
        println!(
            "(NCCL not loadable: {}; one GPU only)",
            gpuhash_shard::nccl_missing_help()
        );
        counts.truncate(1);
    }
    let devices = (0..visible)
        .map(Device::new)
        .collect::<Result<Vec<_>, _>>()?;
    let n = 1usize << log2_n;
    let steps = 2 * counts.len();
    for (scaling, pairs_of) in [
        (
            "weak",
            Box::new(move |g: usize| n * g) as Box<dyn Fn(usize) -> usize>,
        ),
        ("strong", Box::new(move |_| 4 * n)),
    ] {
        println!();
        println!(
            "## shard W1, {scaling} scaling: {}, u32 keys and values, DyHash shards, batches on GPU 0",
            if scaling == "weak" {
                format!("n = 2^{log2_n} pairs a GPU")
            } else {
                format!("2^{} pairs in all", log2_n + 2)
            }
        );
        println!(
            "| GPUs | pairs | insert M/s | of linear | insert bound M/s | lookup M/s | of linear | lookup bound M/s | scatter GB/s |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        let mut single: Option<(f64, f64)> = None;
        for (i, &gpus) in counts.iter().enumerate() {
            let done = if scaling == "weak" {
                i + 1
            } else {
                counts.len() + i + 1
            };
            progress.step(&format!("{scaling}, {gpus} GPUs"), done, steps);
            let row = measure(&devices[..gpus], pairs_of(gpus), runs)?;
            let (insert, lookup) = (row.rate(row.insert_s), row.rate(row.lookup_s));
            // Linear: the GPU count times the one-GPU rate of the same scaling (n pairs on
            // one GPU for weak scaling, all 4n for strong scaling).
            let (insert_one, lookup_one) = *single.get_or_insert((insert, lookup));
            let linear_of =
                |rate: f64, one: f64| format!("{:.0}%", 100.0 * rate / (one * gpus as f64));
            println!(
                "| {gpus} | {} | {insert:.0} | {} | {} | {lookup:.0} | {} | {} | {} |",
                row.pairs,
                linear_of(insert, insert_one),
                row.bound(8),
                linear_of(lookup, lookup_one),
                row.bound(4 + 1 + 4),
                if gpus == 1 {
                    "-".into()
                } else {
                    format!("{:.1}", row.bandwidth / 1e9)
                },
            );
        }
    }
    Ok(())
}

/// Builds and looks up `pairs` pairs on a table over `devices`.
fn measure(devices: &[Device], pairs: usize, runs: Runs) -> Result<Row, Box<dyn Error>> {
    let comm = Comm::from_devices(devices)?;
    let bandwidth = scatter_bandwidth(&comm, PROBE_BYTES / devices.len().max(2), 3)?;
    let map = ShardedMap::<u32, u32>::new(comm, ShardOptions::with_capacity(pairs))?;
    let stream = devices[0].new_stream()?;
    let mut keys = DeviceBuffer::unfilled(&stream, pairs)?;
    let mut values = DeviceBuffer::unfilled(&stream, pairs)?;
    workload::generate(&stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
    let wait_all = || devices.iter().try_for_each(Device::synchronize);
    let insert_s = median_wall_s(
        runs,
        &mut (),
        |_, _| {
            map.clear_on(&stream)?;
            Ok::<_, Box<dyn Error>>(wait_all()?)
        },
        |_, _| {
            map.insert_async(&stream, &keys, &values)?;
            Ok(wait_all()?)
        },
        |_, _| Ok(()),
    )?;
    let mut found = DeviceBuffer::unfilled(&stream, pairs)?;
    let mut answers = DeviceBuffer::unfilled(&stream, pairs)?;
    let lookup_s = median_wall_s(
        runs,
        &mut (),
        |_, _| Ok::<_, Box<dyn Error>>(()),
        |_, _| {
            map.get_async(&stream, &keys, &mut found, &mut answers)?;
            Ok(wait_all()?)
        },
        |_, run| {
            if run == 0 && map.len()? != pairs {
                return Err(format!("the table holds {} of {pairs} pairs", map.len()?).into());
            }
            Ok(())
        },
    )?;
    Ok(Row {
        gpus: devices.len(),
        pairs,
        insert_s,
        lookup_s,
        bandwidth,
    })
}
