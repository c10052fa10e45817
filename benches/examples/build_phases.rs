//! Probe behind docs/benchmarks/hyperspace.md: where a bulk build of W6 spends its time.
//! For each cardinality given, 2^`LOG2_N` tuples of 4 uniform attributes are built, 1 time
//! untimed and 3 times timed, into indexes of the key index alone, of attribute pairs
//! (3 spaces) and of one subspace an attribute (5 spaces, the default); beside them the
//! upload of the same tuples alone. The difference between builds of more and fewer
//! spaces is what a space costs; the rest is the build's fixed part (the upload, the
//! columns' sketches, the check of the keys). Medians in milliseconds.
//!
//! `cargo run --release -p gpuhash-bench --example build_phases -- [LOG2_N]
//! [CARDINALITY,..] [once]` (default `24 100,10000,100000`); with `once`, each
//! cardinality's default index is built one time and nothing is timed (for a profiler).

#[path = "probe/w6.rs"]
mod w6;

use gpuhash_core::Device;
use gpuhash_core::staging::upload;
use gpuhash_hyperspace::{HyperspaceIndex, HyperspaceOptions, Subspaces};
use w6::{ATTRIBUTES, Columns, Outcome};

fn main() -> Outcome<()> {
    let (log2_n, cards, mut rest) = w6::sizes()?;
    let once = rest.next().is_some_and(|a| a == "once");
    let device = Device::new(0)?;
    let n = 1usize << log2_n;
    println!(
        "| n | cardinality | upload ms | key index alone ms | pairs (3 spaces) ms | each attribute (5 spaces) ms | M tuples/s (5 spaces) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for card in cards {
        let columns = Columns::uniform(n, card);
        let batch = columns.batch();
        if once {
            HyperspaceIndex::build(&device, ATTRIBUTES, batch, HyperspaceOptions::default())?;
            continue;
        }
        let stream = device.new_stream()?;
        let upload_ms = w6::median_ms(1, 3, || {
            let up = (
                upload(&stream, batch.keys)?,
                upload(&stream, batch.attributes)?,
                upload(&stream, batch.values)?,
            );
            stream.synchronize()?;
            drop(up);
            Ok(())
        })?;
        let build_ms = |subspaces: Subspaces| {
            w6::median_ms(1, 3, || {
                let options = HyperspaceOptions::default().subspaces(subspaces.clone());
                drop(HyperspaceIndex::build(&device, ATTRIBUTES, batch, options)?);
                Ok(())
            })
        };
        let key_ms = build_ms(Subspaces::Groups(Vec::new()))?;
        let pairs_ms = build_ms(Subspaces::Pairs)?;
        let each_ms = build_ms(Subspaces::EachAttribute)?;
        println!(
            "| 2^{log2_n} | {card} | {upload_ms:.1} | {key_ms:.1} | {pairs_ms:.1} | {each_ms:.1} | {:.1} |",
            n as f64 / each_ms / 1e3
        );
    }
    Ok(())
}
