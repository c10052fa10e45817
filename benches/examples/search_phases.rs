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

#[path = "probe/w6.rs"]
mod w6;

use gpuhash_core::Device;
use gpuhash_core::hash::fmix64;
use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Matches, Query};
use w6::{ATTRIBUTES, Columns, Outcome};

const TARGET_MATCHES: usize = 1 << 22;

fn main() -> Outcome<()> {
    let (log2_n, cards, _) = w6::sizes()?;
    let device = Device::new(0)?;
    let stream = device.new_stream()?;
    let n = 1usize << log2_n;
    println!(
        "| n | cardinality | queries | matches | device form ms | host form ms | into reused answers ms | M matches/s (host form) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for card in cards {
        let columns = Columns::uniform(n, card);
        let index = HyperspaceIndex::build(
            &device,
            ATTRIBUTES,
            columns.batch(),
            HyperspaceOptions::default(),
        )?;
        let attributes = &columns.attributes;
        let queries: Vec<Query> = (0..(TARGET_MATCHES * card as usize / n).clamp(1, 1 << 16))
            .map(|q| Query::attribute(0, attributes[(fmix64(q as u64) % n as u64) as usize]))
            .collect();
        let device_ms = w6::median_ms(2, 5, || {
            let matches = index.search_on(&stream, &queries)?;
            stream.synchronize()?;
            drop(matches);
            Ok(())
        })?;
        let mut total = 0;
        let host_ms = w6::median_ms(2, 5, || {
            total = *index.search(&queries)?.offsets.last().unwrap_or(&0);
            Ok(())
        })?;
        let mut answers = Matches::default();
        let reused_ms = w6::median_ms(2, 5, || Ok(index.search_into(&queries, &mut answers)?))?;
        println!(
            "| 2^{log2_n} | {card} | {} | {total} | {device_ms:.2} | {host_ms:.2} | {reused_ms:.2} | {:.1} |",
            queries.len(),
            total as f64 / host_ms / 1e3
        );
    }
    Ok(())
}
