//! The contract's costs: the fixed cost of a 1024-key batch for every map (host slices and
//! device buffers), and host-slice batches of n pairs end to end against the bus they
//! cross: insert, get, get_hits and count_hits from host arrays, each as a share of its
//! bus bound (bytes in over the H2D rate plus bytes out over the D2H rate, both measured
//! in the same run by `core_bench::bus`); and the same batches from caller memory
//! registered with the driver, answers written into the caller's buffers.
//!
//! Host inserts run in chunks whose copies overlap the inserts (`Table::host_insert_chunk`),
//! so an insert's bound is the larger of its bus time and its kernels' time: the insert
//! rows come with the kernels alone (the device form on a batch already on the device, its
//! "of bus bound" column then the bus time over the kernels' time), an insert into an empty
//! table and one that replaces every key's value (each chunk's lookup then finds all).

use bytemuck::Pod;
use gpuhash_core::hash::fmix32;
use gpuhash_core::staging::{download, parallel_collect, upload};
use gpuhash_core::table::{Map, TableError};
use gpuhash_core::{Device, DeviceBuffer, Error, HostRegistered, Stream};
use gpuhash_test_support::{PageAlone, batch_cost};

use crate::core_bench;
use crate::measure::{Runs, WARM_UP_RUNS, median_wall_s};

/// Bytes per second of the bus, one way each, measured in this run.
#[derive(Debug, Clone, Copy)]
pub struct Bus {
    /// Host to device, from pinned memory.
    pub h2d: f64,
    /// Device to host, into pinned memory.
    pub d2h: f64,
}

impl Bus {
    /// The rates of [`core_bench::bus`]'s pinned copies, `runs.timed` runs each.
    pub fn measure(stream: &Stream, timed: usize) -> Result<Self, Error> {
        let runs = Runs {
            warm_up: WARM_UP_RUNS,
            timed,
        };
        let rows = core_bench::bus(stream, runs)?;
        let rate = |i: usize| rows[i].bytes_per_second().unwrap_or(f64::NAN);
        Ok(Self {
            h2d: rate(0),
            d2h: rate(1),
        })
    }

    /// Seconds the bus needs at least to carry `bytes_in` and `bytes_out`: one way after
    /// the other, each at its own rate.
    pub fn bound_s(self, bytes_in: usize, bytes_out: usize) -> f64 {
        bytes_in as f64 / self.h2d + bytes_out as f64 / self.d2h
    }
}

/// Prints the fixed cost of a 1024-key batch of `table`, named `name`.
pub fn print_batch_cost<M: Map>(name: &str, table: &M, stream: &Stream) -> Result<(), M::Error> {
    let cost = batch_cost(table, stream, 10, 101)?;
    println!("| {name} | {:.1} | {:.1} |", cost.host_us, cost.device_us);
    Ok(())
}

/// Median wall-clock seconds of `once`, after one untimed call; `reset` runs untimed
/// before each call.
fn median_s<E>(
    runs: Runs,
    mut reset: impl FnMut() -> Result<(), E>,
    mut once: impl FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    let runs = Runs {
        warm_up: 1,
        timed: runs.timed,
    };
    median_wall_s(runs, &mut (), |_, _| reset(), |_, _| once(), |_, _| Ok(()))
}

fn row(what: &str, n: usize, seconds: f64, bound_s: f64) {
    println!(
        "| {what} | {n} | {:.2} | {:.0} | {:.0}% |",
        seconds * 1e3,
        n as f64 / seconds / 1e6,
        100.0 * bound_s / seconds
    );
}

fn check<E: From<Error>>(ok: bool, what: &str) -> Result<(), E> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!("contract benchmark: {what}")).into())
    }
}

/// Queries of which half hit (the even ones: keys `fmix32(i)`) and half miss (keys of the
/// other half of the u32 range's generator).
fn half_hits(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| {
            if i % 2 == 0 {
                fmix32(i)
            } else {
                fmix32(i | 1 << 31)
            }
        })
        .collect()
}

/// Host-slice batches of `n` u32 pairs (keys `fmix32(i)`, values `i + 1`) on `table`, end
/// to end from host arrays; every answer checked.
pub fn end_to_end<M>(name: &str, table: &M, n: usize, bus: Bus, runs: Runs) -> Result<(), M::Error>
where
    M: Map<Key = u32, Value = u32>,
    M::Error: TableError,
{
    let keys: Vec<u32> = (0..n as u32).map(fmix32).collect();
    let values: Vec<u32> = (0..n as u32).map(|i| i + 1).collect();
    let queries = half_hits(n);
    insert_kernels(name, table, &keys, &values, bus, runs)?;
    let t = median_s(runs, || table.clear(), || table.insert(&keys, &values))?;
    row(&format!("{name}: insert"), n, t, bus.bound_s(8 * n, 0));
    let mut got = Vec::new();
    let t = median_s::<M::Error>(
        runs,
        || Ok(()),
        || {
            got = table.get(&queries)?;
            Ok(())
        },
    )?;
    check::<M::Error>(
        got.iter()
            .enumerate()
            .all(|(i, g)| *g == (i % 2 == 0).then_some(i as u32 + 1)),
        "get answered wrongly",
    )?;
    row(
        &format!("{name}: get, half hits"),
        n,
        t,
        bus.bound_s(4 * n, 5 * n),
    );
    let mut hits = Default::default();
    let t = median_s::<M::Error>(
        runs,
        || Ok(()),
        || {
            hits = table.get_hits(&queries)?;
            Ok(())
        },
    )?;
    let hits: gpuhash_core::hits::Hits<u32> = hits;
    check::<M::Error>(
        hits.index.len() == n.div_ceil(2)
            && hits
                .index
                .iter()
                .zip(&hits.values)
                .all(|(&i, &v)| i % 2 == 0 && v == i + 1),
        "get_hits answered wrongly",
    )?;
    row(
        &format!("{name}: get_hits, half hits"),
        n,
        t,
        bus.bound_s(4 * n, 4 * n),
    );
    let mut count = 0;
    let t = median_s::<M::Error>(
        runs,
        || Ok(()),
        || {
            count = table.count_hits(&queries)?;
            Ok(())
        },
    )?;
    check::<M::Error>(count == n.div_ceil(2), "count_hits counted wrongly")?;
    row(&format!("{name}: count_hits"), n, t, bus.bound_s(4 * n, 0));
    Ok(())
}

/// Host-slice batches as [`end_to_end`] does them, from caller memory registered with the
/// driver (so copies run as DMA straight from and to it, with no staging) and with answers
/// written into buffers the caller keeps ([`Map::get_into`]); first the cost of registering
/// and unregistering one array of n keys, which a caller pays once.
pub fn end_to_end_registered<M>(
    name: &str,
    table: &M,
    n: usize,
    bus: Bus,
    runs: Runs,
) -> Result<(), M::Error>
where
    M: Map<Key = u32, Value = u32>,
    M::Error: TableError,
{
    let device = table.device();
    let mut keys = PageAlone::from_slice(&(0..n as u32).map(fmix32).collect::<Vec<_>>());
    let mut values = PageAlone::from_slice(&(0..n as u32).map(|i| i + 1).collect::<Vec<_>>());
    let mut queries = PageAlone::from_slice(&half_hits(n));
    let t = median_s::<Error>(
        runs,
        || Ok(()),
        || device.register(queries.values()).map(drop),
    )?;
    row(
        &format!("{name}: register and unregister n keys"),
        n,
        t,
        0.0,
    );
    {
        let (keys, values) = (
            registered::<_, M::Error>(device, &mut keys)?,
            registered::<_, M::Error>(device, &mut values)?,
        );
        let t = median_s(runs, || table.clear(), || table.insert(&keys, &values))?;
        row(
            &format!("{name}: insert, registered keys and values"),
            n,
            t,
            bus.bound_s(8 * n, 0),
        );
        let t = median_s(runs, || Ok(()), || table.insert(&keys, &values))?;
        row(
            &format!("{name}: insert again (every key held), registered"),
            n,
            t,
            bus.bound_s(8 * n, 0),
        );
    }
    let (mut found, mut got) = (vec![0u8; n], vec![0u32; n]);
    let t = median_s::<M::Error>(
        runs,
        || Ok(()),
        || table.get_into(queries.values(), &mut found, &mut got),
    )?;
    check_half_hits::<M::Error>(&found, &got)?;
    row(
        &format!("{name}: get_into reused buffers, half hits"),
        n,
        t,
        bus.bound_s(4 * n, 5 * n),
    );
    let mut found = PageAlone::from_slice(&vec![0u8; n]);
    let mut got = PageAlone::from_slice(&vec![0u32; n]);
    {
        let queries = registered::<_, M::Error>(device, &mut queries)?;
        let mut got = registered::<_, M::Error>(device, &mut got)?;
        let mut found = registered::<_, M::Error>(device, &mut found)?;
        let t = median_s::<M::Error>(
            runs,
            || Ok(()),
            || table.get_into(&queries, &mut found, &mut got),
        )?;
        check_half_hits::<M::Error>(&found, &got)?;
        row(
            &format!("{name}: get_into registered, half hits"),
            n,
            t,
            bus.bound_s(4 * n, 5 * n),
        );
        let mut count = 0;
        let t = median_s::<M::Error>(
            runs,
            || Ok(()),
            || {
                count = table.count_hits(&queries)?;
                Ok(())
            },
        )?;
        check::<M::Error>(count == n.div_ceil(2), "count_hits counted wrongly")?;
        row(
            &format!("{name}: count_hits, registered keys"),
            n,
            t,
            bus.bound_s(4 * n, 0),
        );
    }
    Ok(())
}

/// The insert kernels alone: the device form on keys and values already on the device,
/// into an empty table; its "of bus bound" is the bus time of the copies over it.
fn insert_kernels<M: Map<Key = u32, Value = u32>>(
    name: &str,
    table: &M,
    keys: &[u32],
    values: &[u32],
    bus: Bus,
    runs: Runs,
) -> Result<(), M::Error> {
    let stream = table.device().new_stream()?;
    let (k, v) = (upload(&stream, keys)?, upload(&stream, values)?);
    let t = median_s(
        runs,
        || table.clear(),
        || {
            table.insert_async(&stream, &k, &v)?;
            Ok(stream.synchronize()?)
        },
    )?;
    let n = keys.len();
    row(
        &format!("{name}: insert kernels alone, device buffers"),
        n,
        t,
        bus.bound_s(8 * n, 0),
    );
    Ok(())
}

/// `memory` registered with `device`.
fn registered<'a, T: Pod, E: From<Error>>(
    device: &Device,
    memory: &'a mut PageAlone<T>,
) -> Result<HostRegistered<&'a mut [T]>, E> {
    Ok(device.register(memory.values_mut())?)
}

/// Fails unless the even queries were found with value `i + 1` and the odd ones not.
fn check_half_hits<E: From<Error>>(found: &[u8], values: &[u32]) -> Result<(), E> {
    check(
        (0..found.len()).all(|i| {
            let hit = i % 2 == 0;
            found[i] == u8::from(hit) && (!hit || values[i] == i as u32 + 1)
        }),
        "get_into answered wrongly",
    )
}

/// The host-side parts of a host-slice batch alone, for the split of its time: staging n
/// keys and n values to the device ([`upload`]), n flags and n values back ([`download`]),
/// and building n answers on the host ([`parallel_collect`]), each from fresh memory.
pub fn parts(stream: &Stream, n: usize, bus: Bus, runs: Runs) -> Result<(), Error> {
    let keys: Vec<u32> = (0..n as u32).map(fmix32).collect();
    let t = median_s::<Error>(
        runs,
        || Ok(()),
        || {
            let (k, v) = (upload(stream, &keys)?, upload(stream, &keys)?);
            stream.synchronize()?;
            drop((k, v));
            Ok(())
        },
    )?;
    row("part: upload keys and values", n, t, bus.bound_s(8 * n, 0));
    let (flags, values) = (
        DeviceBuffer::<u8>::zeroed(stream, n)?,
        DeviceBuffer::<u32>::zeroed(stream, n)?,
    );
    let (mut host_flags, mut host_values) = (vec![0u8; n], vec![0u32; n]);
    let t = median_s::<Error>(
        runs,
        || Ok(()),
        || {
            download(stream, &flags, &mut host_flags)?;
            download(stream, &values, &mut host_values)
        },
    )?;
    row(
        "part: download flags and values (reused host buffers)",
        n,
        t,
        bus.bound_s(0, 5 * n),
    );
    let t = median_s::<Error>(
        runs,
        || Ok(()),
        || {
            let answers = parallel_collect(n, |i| (host_flags[i] != 0).then_some(host_values[i]));
            check(answers.len() == n, "collect")
        },
    )?;
    row("part: build n Option answers on the host", n, t, 0.0);
    Ok(())
}

/// Prints the heading and the column names of the end-to-end table.
pub fn header(device: &Device, n: usize, bus: Bus) {
    println!(
        "## contract: host-slice batches end to end, n = {n}, u32 keys and values, {} (bus: H2D {:.1} GB/s, D2H {:.1} GB/s, pinned, this run)",
        device.properties().name,
        bus.h2d / 1e9,
        bus.d2h / 1e9
    );
    println!(
        "| batch | n | median ms | M keys/s | of bus bound |\n| --- | --- | --- | --- | --- |"
    );
}
