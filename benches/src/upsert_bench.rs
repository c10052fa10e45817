//! The `upsert` workload: a counting batch (upsert with `Combine::Add` of 1 per key) of n
//! keys beside plain inserts of the same keys, into an emptied map sized for n, W1-style;
//! uniform keys (the W1 keys, all distinct) and Zipf-skewed keys of exponent 1.0 over n
//! ranks (`workload::zipf_keys`, deterministic).

use gpuhash_core::table::{Combine, CombiningMap};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::measure::{Measurement, Runs, median_ms};

/// The keys of one row: their name and the keys on the device.
pub struct Keys {
    /// What the keys are.
    pub name: &'static str,
    /// n keys.
    pub keys: DeviceBuffer<u32>,
}

/// The two key sets of n keys.
pub fn key_sets(stream: &Stream, n: usize) -> gpuhash_core::Result<[Keys; 2]> {
    let mut uniform = DeviceBuffer::unfilled(stream, n)?;
    workload::generate(stream, KeySet::Hits, 0, &mut uniform, None)?;
    let zipf = workload::zipf_keys(n, n as u32, 0x5eed);
    Ok([
        Keys {
            name: "uniform",
            keys: uniform,
        },
        Keys {
            name: "Zipf 1.0",
            keys: DeviceBuffer::from_host(stream, &zipf)?,
        },
    ])
}

/// Inserts of `keys` and a counting upsert of them, each into `map` emptied first.
pub fn rows<M>(
    stream: &Stream,
    table_name: &str,
    map: &M,
    keys: &Keys,
    runs: Runs,
) -> Result<[Measurement; 2], M::Error>
where
    M: CombiningMap<Key = u32, Value = u32>,
{
    let n = keys.keys.len();
    let ones = DeviceBuffer::from_host(stream, &vec![1u32; n])?;
    let mut values = DeviceBuffer::unfilled(stream, n)?;
    workload::generate(
        stream,
        KeySet::Hits,
        0,
        &mut DeviceBuffer::unfilled(stream, n)?,
        Some(&mut values),
    )?;
    let clear = |_: &mut ()| map.clear_on(stream);
    let insert_ms = median_ms(stream, runs, &mut (), clear, |_| {
        map.insert_async(stream, &keys.keys, &values)
    })?;
    let count_ms = median_ms(stream, runs, &mut (), clear, |_| {
        map.upsert_async(stream, &keys.keys, &ones, Combine::Add)
    })?;
    let row = |verb: &str, ms: f64| Measurement {
        name: format!("{table_name}: {verb}, {} keys", keys.name),
        items: n,
        bytes: None,
        ms,
    };
    Ok([
        row("insert", insert_ms),
        row("count (upsert Add 1)", count_ms),
    ])
}
