//! Probe behind docs/benchmarks/hyperspace.md: where a single-attribute search of W6 spends
//! its time. For each cardinality given, 2^`LOG2_N` tuples of 4 uniform attributes are
//! built into an index of the default options; a batch of searches `A1 = x` (values a
//! tuple holds), about 2^22 matches in all, then runs 2 times untimed and 5 times timed in
//! three ways: the device form (`search_on`, the stream waited for), the host form
//! (`search`, answers copied to new host vectors), and the host form into answers reused
//! from run to run (`search_into`).
//! Medians in milliseconds, with the rate in M matches/s.
//!
//! `cargo run --release -p gpuhash-bench --example search_phases -- [LOG2_N]
//! [CARDINALITY,..]` (default `24 100,10000,100000`).

use std::time::Instant;

use gpuhash_core::Device;
use gpuhash_core::hash::fmix64;
use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Matches, Query, TupleBatch};

const ATTRIBUTES: usize = 4;
const TARGET_MATCHES: usize = 1 << 22;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let log2_n: u32 = args.next().map_or(Ok(24), |a| a.parse())?;
    let cards: Vec<u32> = args
        .next()
        .unwrap_or_else(|| "100,10000,100000".into())
        .split(',')
        .map(|c| c.parse().expect("a comma-separated list of cardinalities"))
        .collect();
    let device = Device::new(0)?;
    let stream = device.new_stream()?;
    let n = 1usize << log2_n;
    println!(
        "| n | cardinality | queries | matches | device form ms | host form ms | into reused answers ms | M matches/s (host form) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for card in cards {
        let keys: Vec<u32> = (0..n as u32).map(|i| i + 1).collect();
        let attributes: Vec<u32> = (0..ATTRIBUTES * n)
            .map(|i| (fmix64(i as u64 ^ 0x5eed) % u64::from(card)) as u32 + 1)
            .collect();
        let values: Vec<u32> = (0..n as u32).collect();
        let batch = TupleBatch {
            keys: &keys,
            attributes: &attributes,
            values: &values,
        };
        let index =
            HyperspaceIndex::build(&device, ATTRIBUTES, batch, HyperspaceOptions::default())?;
        let queries: Vec<Query> = (0..(TARGET_MATCHES * card as usize / n).clamp(1, 1 << 16))
            .map(|q| Query::attribute(0, attributes[(fmix64(q as u64) % n as u64) as usize]))
            .collect();
        let device_ms = median_ms(|| {
            let matches = index.search_on(&stream, &queries)?;
            stream.synchronize()?;
            drop(matches);
            Ok(())
        })?;
        let mut total = 0;
        let host_ms = median_ms(|| {
            total = *index.search(&queries)?.offsets.last().unwrap_or(&0);
            Ok(())
        })?;
        let mut answers = Matches::default();
        let reused_ms = median_ms(|| Ok(index.search_into(&queries, &mut answers)?))?;
        println!(
            "| 2^{log2_n} | {card} | {} | {total} | {device_ms:.2} | {host_ms:.2} | {reused_ms:.2} | {:.1} |",
            queries.len(),
            total as f64 / host_ms / 1e3
        );
    }
    Ok(())
}

/// The median of 5 timed runs of `f`, after 2 untimed ones, in milliseconds.
fn median_ms(
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    for _ in 0..2 {
        f()?;
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        f()?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}
