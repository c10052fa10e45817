//! `gpuhash-bench swap`: W5, Starfish (gpuhash-swap) on a table 4x its device budget, u32
//! keys and values.
//!
//! n = 2^N pairs go into a swap table of 16 DyHash children ([`arithmetic::Shape`]: n/16
//! pairs a child, at least 2^16) whose device budget holds every child's miss filter, a
//! quarter of the children, and the scratch the table keeps by its own rule (a quarter of
//! the budget, at least 64 MiB): the table's children take 4 times the budget's room for
//! children. The pieces ([`parts`], `--w5-*` flags), in order:
//!
//! 1. **The bus**, always: host-to-device and device-to-host copies of pinned memory
//!    (`core_bench::bus`), the rates every bound of the run is taken at.
//! 2. **`rates`**: on one child of the table's size, lookups on the device, a page-in from
//!    its mapped pinned image, and lookups of that image in place over the bus: the
//!    zero-copy random-read rate ([`rates`]); with the cost model those rates make and the
//!    crossover it predicts.
//! 3. **`paged`**: the table under its budget. Inserts of all n pairs in one call (the
//!    table emptied before each run), then lookups of hits and of misses in batches of
//!    2^10 to 2^26 keys (capped at n), each in the host form (caller memory registered
//!    with the driver once, answers into registered buffers) and the device form (device
//!    buffers and the stream's wait), so that copies and the table's own cost show apart
//!    ([`rows`]). Each row gives the bytes that crossed the bus in a run (keys and answers
//!    of the host form, and the images paging moved each way, from the table's counts),
//!    the least time the bus measured here needs for them, and the rate as a share of
//!    that bound. Misses should cross nothing but keys and answers: the filters answer
//!    them on the device.
//! 4. **`crossover`**: on the paged table, lookups of hits at 2^10 to 2^20 keys under cost
//!    models forced to probe children on the host in place and forced to page them in,
//!    the default model and the measured one: the crossover, and an SVG chart of it
//!    (`--w5-svg`, [`crossover`]).
//! 5. **`resident`**: the same table with no budget, every child resident, timed as in 3.
//!
//! Last, the lookup rates by batch size and the W5 targets against what this run measured
//! ([`summary`]). Wall clock around the calls, the median of `--runs` timed runs after one
//! untimed; every answer checked after its run's timing.

mod arithmetic;
mod crossover;
pub mod parts;
mod rates;
mod rows;
mod summary;

use std::error::Error;

use gpuhash_core::Device;
use gpuhash_core::table::Table;
use gpuhash_cuckoo::CuckooTable;
use gpuhash_swap::{SwapMap, SwapOptions};

use self::arithmetic::{Shape, answer_keys, batch_sizes, child_capacity};
use self::parts::{Parts, Piece};
use self::rows::{Bench, HostArrays, Registered, Row};
use self::summary::{PAGED, RESIDENT};
use crate::contract_bench::Bus;
use crate::progress::Progress;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// An error saying what went wrong in W5: a wrong answer or a broken assumption.
fn fail(what: &str) -> Box<dyn Error> {
    gpuhash_core::Error::InvalidInput(format!("W5: {what}")).into()
}

/// The swap table of `shape` with device budget `budget`.
fn table(device: &Device, n: usize, shape: &Shape, budget: u64) -> Result<SwapMap<u32, u32>> {
    let options = SwapOptions::with_capacity(n)
        .child_capacity(shape.child_capacity)
        .filter_bits_per_key(shape.filter_bits)
        .device_budget(budget);
    Ok(SwapMap::new(device, options)?)
}

/// Runs the pieces of W5 that `parts` names at n = 2^`log2_n`, `runs` timed runs a row,
/// and prints their rows.
pub fn run(
    device: &Device,
    log2_n: u32,
    runs: usize,
    parts: &Parts,
    progress: &Progress,
) -> Result<()> {
    let n = 1usize << log2_n;
    let stream = device.new_stream()?;
    let child_bytes = CuckooTable::<u32, u32>::with_capacity(device, child_capacity(n))?
        .memory()?
        .bytes_reserved;
    let shape = Shape::new(n, child_bytes, parts.filter_bits);
    println!(
        "## swap W5: n = 2^{log2_n} u32 pairs ({:.2} GB), {} DyHash children of {} pairs ({:.1} MB each on the device, {:.2} GB in all); device budget of the paged table {:.2} GB ({} children resident, {:.0} MB of scratch, {:.0} MB of miss filters); median of {runs} timed runs after one untimed, wall clock",
        (8 * n) as f64 / 1e9,
        shape.children,
        shape.child_capacity,
        shape.child_bytes as f64 / 1e6,
        shape.table_bytes() as f64 / 1e9,
        shape.budget as f64 / 1e9,
        shape.resident(),
        shape.scratch_bytes as f64 / 1e6,
        shape.filter_bytes as f64 / 1e6,
    );
    println!("{}", parts.describe());
    let steps = 1 + Piece::ALL.iter().filter(|&&p| parts.has(p)).count();
    let mut step = 0;
    let mut next = |what: &str| {
        step += 1;
        progress.step(what, step, steps);
    };

    next("bus");
    let bus = Bus::measure(&stream, runs)?;
    println!(
        "bus, pinned memory, this run: host to device {:.1} GB/s, device to host {:.1} GB/s",
        bus.h2d / 1e9,
        bus.d2h / 1e9
    );
    let measured = match parts.has(Piece::Rates) {
        true => {
            next("rates of one child");
            println!();
            let measured = rates::measure(device, &stream, shape.child_capacity, runs)?;
            rates::print(&measured, bus, shape.children);
            Some(measured)
        }
        false => None,
    };
    let tables = [Piece::Paged, Piece::Crossover, Piece::Resident];
    if !tables.iter().any(|&p| parts.has(p)) {
        return Ok(());
    }
    let batches = batch_sizes(&parts.log2_batches(), n);
    let mut store = HostArrays::new(n, answer_keys(&batches, n));
    let mut arrays = store.register(device)?;
    let bench = Bench {
        device,
        stream: &stream,
        bus,
        runs,
        n,
        forms: parts.forms(),
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut comparison = None;
    if parts.has(Piece::Paged) || parts.has(Piece::Crossover) {
        let paged = table(device, n, &shape, shape.budget)?;
        if paged.resident_limit() != shape.resident() {
            return Err(fail(&format!(
                "the paged table holds {} children resident, not {}",
                paged.resident_limit(),
                shape.resident()
            )));
        }
        println!(
            "the paged table partitions batches in segments of {} keys",
            paged.segment_len()
        );
        if parts.has(Piece::Paged) {
            next("paged table");
            println!();
            println!("{}", Row::HEADER);
            rows.extend(bench.table_rows(PAGED, &paged, &mut arrays, &batches)?);
            println!("counts of the paged table: {:?}", paged.stats());
        } else {
            bench.fill(&paged, &arrays)?;
        }
        if parts.has(Piece::Crossover) {
            next("probing against paging");
            comparison = Some(compare(
                &bench,
                &paged,
                &mut arrays,
                measured.as_ref(),
                &shape,
                parts,
            )?);
        }
    }
    if parts.has(Piece::Resident) {
        next("fully resident table");
        let resident = table(device, n, &shape, u64::MAX)?;
        println!();
        println!("{}", Row::HEADER);
        rows.extend(bench.table_rows(RESIDENT, &resident, &mut arrays, &batches)?);
    }
    println!();
    summary::print(&rows, comparison.as_ref(), bus);
    Ok(())
}

/// The `crossover` piece on the paged table: its rows, its summary and its chart.
fn compare(
    bench: &Bench<'_>,
    paged: &SwapMap<u32, u32>,
    arrays: &mut Registered<'_>,
    measured: Option<&rates::Measured>,
    shape: &Shape,
    parts: &Parts,
) -> Result<crossover::Comparison> {
    println!();
    println!(
        "Probing children on the host in place against paging them in: lookups of hits, device form, {} calls a run:",
        crossover::CROSSOVER_BATCHES
    );
    let comparison = crossover::compare(bench, paged, arrays, measured)?;
    println!();
    crossover::print(&comparison, measured, bench.bus, shape.children);
    let title = format!(
        "W5 lookups of hits, table 4x its device budget, n = 2^{}: {}",
        bench.n.trailing_zeros(),
        bench.device.properties().name
    );
    crossover::write_svg(&crossover::chart(&comparison, title), &parts.svg)?;
    Ok(comparison)
}
