//! Slab hash: W1 (bulk build, then find all-hit and all-miss at a memory utilization) and
//! W3 (concurrent mixes in one launch) of DESIGN.md, u32 keys and values.

use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{DeviceBuffer, Error, Stream};
use gpuhash_slab_alloc::Variant;
use gpuhash_slab_hash::layouts::{
    GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_ABSENT, GH_STATUS_DONE,
};
use gpuhash_slab_hash::{SlabHashError, SlabHashMap, SlabHashOptions, sizing};

use crate::measure::{Measurement, Runs, median_ms};

/// How W1 sizes the table.
#[derive(Debug, Clone, Copy)]
pub enum Sizing {
    /// Buckets such that pairs fill slab memory to this share: seed 002's memory
    /// utilization (pair bytes over bytes of slabs in use).
    Utilization(f64),
    /// Buckets = n / (15 * load): head slabs this full on average, lists beyond them.
    HeadLoad(f64),
}

impl Sizing {
    fn buckets(self, n: usize) -> u32 {
        match self {
            Sizing::Utilization(target) => sizing::buckets_for_utilization(n as u64, target),
            Sizing::HeadLoad(load) => (n as f64 / (15.0 * load)).ceil() as u32,
        }
    }

    fn label(self) -> String {
        match self {
            Sizing::Utilization(target) => format!("memory utilization {target}"),
            Sizing::HeadLoad(load) => format!("head-slab load {load}"),
        }
    }
}

/// The sizings W1 runs at.
pub const SIZINGS: [Sizing; 4] = [
    Sizing::Utilization(0.5),
    Sizing::Utilization(0.9),
    Sizing::HeadLoad(0.5),
    Sizing::HeadLoad(0.9),
];

/// W3's mixes: shares of (insert, remove, find hit, find miss) in percent.
pub const MIXES: [(&str, [u32; 4]); 3] = [
    ("G0", [50, 50, 0, 0]),
    ("G1", [20, 20, 30, 30]),
    ("G2", [10, 10, 40, 40]),
];

fn map_for(stream: &Stream, n: usize, buckets: u32) -> Result<SlabHashMap, SlabHashError> {
    let options = SlabHashOptions {
        expected_entries: n as u64,
        buckets: Some(buckets),
        variant: Variant::Light,
        ..SlabHashOptions::default()
    };
    SlabHashMap::new(stream, options)
}

fn check(ok: bool, what: &str) -> Result<(), SlabHashError> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!("slab hash benchmark: {what}")).into())
    }
}

/// W1 at one sizing: rows for build, find hit, find miss, and the memory line.
pub fn bulk(
    stream: &Stream,
    n: usize,
    sizing: Sizing,
    runs: Runs,
) -> Result<(Vec<Measurement>, String), SlabHashError> {
    let buckets = sizing.buckets(n);
    let mut map = map_for(stream, n, buckets)?;
    let mut keys = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut values = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut misses = DeviceBuffer::<u32>::zeroed(stream, n)?;
    workload::generate(stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
    workload::generate(stream, KeySet::Misses, 0, &mut misses, None)?;
    let mut status = DeviceBuffer::<u32>::zeroed(stream, n)?;
    // One full build first, so the allocator has grown to what the timed builds need.
    map.insert_device(stream, &keys, &values, &mut status)?;

    let mut flags = Vec::new();
    let build_ms = median_ms(
        stream,
        runs,
        &mut (&mut map, &mut status),
        |(map, status)| {
            map.clear()?;
            Ok::<_, SlabHashError>(status.fill_zero(stream)?)
        },
        |(map, status)| {
            flags.push(map.insert_async(stream, &keys, &values, status)?);
            Ok(())
        },
    )?;
    for flag in &flags {
        check(!flag.happened(stream)?, "a timed build ran out of slabs")?;
    }
    let memory = map.memory()?;
    check(map.len()? == n, "the build lost pairs")?;

    let mut found = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut find = |queries: &DeviceBuffer<u32>, expect: u32| -> Result<f64, SlabHashError> {
        let ms = median_ms(
            stream,
            runs,
            &mut status,
            |status| Ok(status.fill_zero(stream)?),
            |status| map.get_async(stream, queries, &mut found, status),
        )?;
        let codes = status.to_host(stream)?;
        check(
            codes.iter().all(|&c| c == expect),
            "a lookup answered wrongly",
        )?;
        Ok(ms)
    };
    let hit_ms = find(&keys, GH_STATUS_DONE)?;
    let miss_ms = find(&misses, GH_STATUS_ABSENT)?;
    // The last lookups were the misses; look the hits up once more to check their values.
    let mut status = DeviceBuffer::<u32>::zeroed(stream, n)?;
    map.get_async(stream, &keys, &mut found, &mut status)?;
    let values_found = found.to_host(stream)?;
    check(
        values_found
            .iter()
            .enumerate()
            .all(|(i, &v)| v == workload::value(i as u32)),
        "a hit found a wrong value",
    )?;

    let label = |what: &str| {
        format!(
            "slab hash {what}, {}: {buckets} buckets, utilization {:.2}",
            sizing.label(),
            memory.utilization()
        )
    };
    let rows = vec![
        Measurement {
            name: label("build"),
            items: n,
            bytes: None,
            ms: build_ms,
        },
        Measurement {
            name: label("find hit"),
            items: n,
            bytes: None,
            ms: hit_ms,
        },
        Measurement {
            name: label("find miss"),
            items: n,
            bytes: None,
            ms: miss_ms,
        },
    ];
    // Memory after removing half the pairs, before and after flush.
    let half: Vec<u32> = (0..n as u32 / 2).map(|i| KeySet::Hits.key(i * 2)).collect();
    map.remove(&half)?;
    let removed = map.memory()?;
    map.flush()?;
    let flushed = map.memory()?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let memory_line = format!(
        "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        sizing.label(),
        mib(memory.entry_bytes),
        mib(memory.bytes_in_use),
        mib(memory.bytes_reserved),
        mib(removed.entry_bytes),
        mib(removed.bytes_in_use),
        mib(flushed.bytes_in_use),
    );
    Ok((rows, memory_line))
}

/// W3: a table holding pairs 0..n/2, then one launch of n operations mixed as `shares`
/// says: inserts of new keys, removes and finds of present keys, finds of absent keys.
pub fn mixed(
    stream: &Stream,
    n: usize,
    name: &str,
    shares: [u32; 4],
    runs: Runs,
) -> Result<Measurement, SlabHashError> {
    let base = n / 2;
    let mut map = map_for(stream, n, Sizing::Utilization(0.5).buckets(n))?;
    let (present, present_values) = workload::host_pairs(KeySet::Hits, 0, base as u32);
    let mut ops = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    for i in 0..n as u32 {
        let pick = gpuhash_core::hash::fmix32(i ^ 0xabcd) % 100;
        let (op, key) = if pick < shares[0] {
            (GH_OP_INSERT, KeySet::Hits.key(base as u32 + i))
        } else if pick < shares[0] + shares[1] {
            (GH_OP_REMOVE, present[i as usize % base])
        } else if pick < shares[0] + shares[1] + shares[2] {
            (GH_OP_GET, present[(i as usize * 7) % base])
        } else {
            (GH_OP_GET, KeySet::Misses.key(i))
        };
        ops.push(op);
        keys.push(key);
    }
    let ops = DeviceBuffer::from_host(stream, &ops)?;
    let keys = DeviceBuffer::from_host(stream, &keys)?;
    let values = DeviceBuffer::from_host(stream, &keys.to_host(stream)?)?;
    let mut results = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut status = DeviceBuffer::<u32>::zeroed(stream, n)?;
    let mut flags = Vec::new();
    let ms = median_ms(
        stream,
        runs,
        &mut (&mut map, &mut status),
        |(map, status)| {
            map.clear()?;
            map.insert(&present, &present_values)?;
            Ok::<_, SlabHashError>(status.fill_zero(stream)?)
        },
        |(map, status)| {
            flags.push(map.apply_async(stream, &ops, &keys, &values, &mut results, status)?);
            Ok(())
        },
    )?;
    for flag in &flags {
        check(!flag.happened(stream)?, "a timed mix ran out of slabs")?;
    }
    Ok(Measurement {
        name: format!("slab hash {name} mix"),
        items: n,
        bytes: None,
        ms,
    })
}
