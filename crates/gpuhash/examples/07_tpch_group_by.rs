//! A TPC-H group-by: the sum of `l_extendedprice` and the count of rows per order and per
//! supplier over `lineitem`, generated with the `tpchgen` crate. On the GPU each group-by
//! is two combining upserts (`Combine::Add`: one map of sums, one of counts); on the CPU,
//! every core groups into hash maps. The answers are checked equal and timed.
//!
//! `cargo run --release -p gpuhash --example 07_tpch_group_by [--scale SF]` (default 1:
//! 6M rows; 10 gives 60M).

mod common;

use std::collections::HashMap;
use std::time::Instant;

use common::ms;
use gpuhash::prelude::*;
use tpchgen::generators::LineItemGenerator;

/// The columns the query reads: keys and prices in cents.
struct LineItems {
    orders: Vec<u64>,
    suppliers: Vec<u64>,
    prices: Vec<u64>,
}

/// Per key: the sum of prices and the count of rows.
type Groups = HashMap<u64, (u64, u32)>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scale = scale_factor()?;
    let started = Instant::now();
    let rows = generate(scale);
    println!(
        "lineitem at scale factor {scale}: {} rows generated in {:.1} s",
        rows.orders.len(),
        ms(started) / 1e3
    );
    let device = Device::default()?;
    for (name, keys) in [("order", &rows.orders), ("supplier", &rows.suppliers)] {
        let (cpu, cpu_ms) = group_on_cpu(keys, &rows.prices);
        let (gpu, [device_ms, end_to_end_ms, registered_ms]) =
            group_on_gpu(&device, keys, &rows.prices)?;
        assert_eq!(gpu, cpu, "GPU and CPU groups per {name} differ");
        let rate = |ms: f64| keys.len() as f64 / ms / 1e3;
        println!("per {name}: {} groups, GPU and CPU equal", cpu.len());
        println!(
            "  GPU, columns on the device: {device_ms:.2} ms ({:.0} M rows/s)",
            rate(device_ms)
        );
        println!(
            "  GPU, from host memory with the groups back: {end_to_end_ms:.1} ms ({:.0} M rows/s)",
            rate(end_to_end_ms)
        );
        println!(
            "  GPU, from registered host memory with the groups back: {registered_ms:.1} ms ({:.0} M rows/s)",
            rate(registered_ms)
        );
        println!(
            "  CPU, {} threads: {cpu_ms:.1} ms ({:.0} M rows/s)",
            common::threads(),
            rate(cpu_ms)
        );
    }
    Ok(())
}

/// Groups on the GPU three times, into emptied maps: from device buffers (the two upserts alone,
/// timed with CUDA events) and from host memory (host forms, copies and the export of the
/// groups included), once from ordinary and once from registered host memory. Returns the
/// groups and the three times in ms.
fn group_on_gpu(
    device: &Device,
    keys: &[u64],
    prices: &[u64],
) -> gpuhash::Result<(Groups, [f64; 3])> {
    let stream = device.new_stream()?;
    let ones = vec![1u32; keys.len()];
    let sums = SlabHashMap::<u64, u64>::with_capacity(device, keys.len())?;
    let counts = SlabHashMap::<u64, u32>::with_capacity(device, keys.len())?;
    let device_keys = DeviceBuffer::from_host(&stream, keys)?;
    let device_prices = DeviceBuffer::from_host(&stream, prices)?;
    let device_ones = DeviceBuffer::from_host(&stream, &ones)?;
    let timer = EventTimer::start(&stream)?;
    sums.upsert_async(&stream, &device_keys, &device_prices, Combine::Add)?;
    counts.upsert_async(&stream, &device_keys, &device_ones, Combine::Add)?;
    let device_ms = f64::from(timer.stop()?);
    drop((device_keys, device_prices, device_ones));

    sums.clear()?;
    counts.clear()?;
    let started = Instant::now();
    sums.upsert(keys, prices, Combine::Add)?;
    let sums_ms = ms(started);
    counts.upsert(keys, &ones, Combine::Add)?;
    let upserts_ms = ms(started);
    let (sums_out, counts_out) = (sums.export()?, counts.export()?);
    let end_to_end_ms = ms(started);
    println!(
        "  (from host memory: upsert of the sums {sums_ms:.1} ms, of the counts {:.1} ms, \
         exports {:.1} ms)",
        upserts_ms - sums_ms,
        end_to_end_ms - upserts_ms
    );

    // Again with the columns page-locked in place (registration timed too): the copies
    // then go straight from them, with no staging.
    sums.clear()?;
    counts.clear()?;
    let started = Instant::now();
    let (keys, prices, ones) = (
        device.register(keys)?,
        device.register(prices)?,
        device.register(&ones[..])?,
    );
    sums.upsert(&keys, &prices, Combine::Add)?;
    counts.upsert(&keys, &ones, Combine::Add)?;
    let (sums_again, counts_again) = (sums.export()?, counts.export()?);
    let registered_ms = ms(started);
    assert_eq!(sums_again.len(), sums_out.len());
    assert_eq!(counts_again.len(), counts_out.len());
    let (sums, counts) = (sums_out, counts_out);

    let counts: HashMap<u64, u32> = counts.into_iter().collect();
    let groups = sums
        .into_iter()
        .map(|(key, sum)| (key, (sum, counts.get(&key).copied().unwrap_or(0))))
        .collect();
    Ok((groups, [device_ms, end_to_end_ms, registered_ms]))
}

/// Groups on every core ([`common::group_by`]).
fn group_on_cpu(keys: &[u64], prices: &[u64]) -> (Groups, f64) {
    let (maps, elapsed) = common::group_by(keys, |group: &mut (u64, u32), row| {
        group.0 += prices[row];
        group.1 += 1;
    });
    (maps.into_iter().flatten().collect(), elapsed)
}

/// `lineitem`'s three columns, generated in parts on every core.
fn generate(scale: f64) -> LineItems {
    let columns = common::in_parts(|part, parts| {
        let mut columns = LineItems {
            orders: Vec::new(),
            suppliers: Vec::new(),
            prices: Vec::new(),
        };
        for row in LineItemGenerator::new(scale, part, parts) {
            columns.orders.push(row.l_orderkey as u64);
            columns.suppliers.push(row.l_suppkey as u64);
            columns.prices.push(row.l_extendedprice.0 as u64);
        }
        columns
    });
    let mut all = LineItems {
        orders: Vec::new(),
        suppliers: Vec::new(),
        prices: Vec::new(),
    };
    for part in columns {
        all.orders.extend(part.orders);
        all.suppliers.extend(part.suppliers);
        all.prices.extend(part.prices);
    }
    all
}

fn scale_factor() -> Result<f64, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(1.0),
        [flag, value] if flag == "--scale" => value
            .parse()
            .ok()
            .filter(|sf: &f64| *sf > 0.0)
            .ok_or_else(|| format!("--scale takes a positive number, not {value}")),
        _ => Err("usage: 07_tpch_group_by [--scale SF]".into()),
    }
}
