//! The rates the swap table's cost model is made of, measured in this run on one child of
//! the W5 table's size (a DyHash table holding its capacity of pairs): lookups of it on
//! the device, a page-in of its mapped pinned image, and lookups of that image in place
//! over the bus. The last is the zero-copy random-read rate: DyHash's own find kernel
//! reading the mapped image (`ProbeInPlace::get_in_place`, the kernel the swap table
//! probes children on the host with), one 64-byte read a hit as `PROBE_BYTES` counts it;
//! no kernel of the benchmark's own.

use gpuhash_core::image::{Image, PinnedImage, ProbeInPlace};
use gpuhash_core::table::{Map, Table};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, PinnedPool, Stream};
use gpuhash_cuckoo::CuckooTable;
use gpuhash_swap::CostModel;

use super::arithmetic::RUN_KEYS;
use super::{Result, fail};
use crate::contract_bench::Bus;
use crate::measure::{Runs, WARM_UP_RUNS, median_ms, median_wall_s};

/// A W5 child.
type Child = CuckooTable<u32, u32>;

/// Bytes a lookup in place reads from the image for a hit, as the cost model counts them.
pub const PROBE_BYTES: u64 = <Child as ProbeInPlace>::PROBE_BYTES;

/// The rates of one child, measured.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Bytes of the child's image.
    pub image_bytes: u64,
    /// Lookups of hits a second, the child resident.
    pub device_lookups_per_s: f64,
    /// Seconds to page the child in from its image, wall clock (allocations, copies and
    /// the wait for them).
    pub page_in_s: f64,
    /// Lookups of hits a second in the image in place, over the bus.
    pub in_place_lookups_per_s: f64,
}

impl Measured {
    /// Bytes a second of random reads of mapped pinned memory, as the cost model counts
    /// them: [`PROBE_BYTES`] a lookup in place.
    pub fn zero_copy_bytes_per_s(&self) -> f64 {
        self.in_place_lookups_per_s * PROBE_BYTES as f64
    }

    /// Seconds a page-in takes beyond its bytes at the bus's rate (at least 0).
    pub fn page_in_overhead_s(&self, bus: Bus) -> f64 {
        (self.page_in_s - self.image_bytes as f64 / bus.h2d).max(0.0)
    }

    /// The cost model of these rates and the bus's.
    pub fn cost_model(&self, bus: Bus) -> CostModel {
        CostModel {
            host_to_device_bytes_per_s: bus.h2d,
            zero_copy_bytes_per_s: self.zero_copy_bytes_per_s(),
            page_in_seconds: self.page_in_overhead_s(bus),
            device_lookups_per_s: self.device_lookups_per_s,
        }
    }
}

/// Lookups of `keys`, their answers, and the check that every one is a hit with its value.
struct Probes {
    keys: DeviceBuffer<u32>,
    found: DeviceBuffer<u8>,
    values: DeviceBuffer<u32>,
}

impl Probes {
    /// The first `count` keys of the workload's hits, with answer buffers.
    fn new(stream: &Stream, count: usize) -> Result<Self> {
        let mut keys = DeviceBuffer::unfilled(stream, count)?;
        workload::generate(stream, KeySet::Hits, 0, &mut keys, None)?;
        Ok(Self {
            keys,
            found: DeviceBuffer::zeroed(stream, count)?,
            values: DeviceBuffer::zeroed(stream, count)?,
        })
    }

    /// Fails unless every key of the last run was found with its value (each run starts
    /// from flags set to 0).
    fn check(&self, stream: &Stream, what: &str) -> Result<()> {
        let found = self.found.to_host(stream)?;
        let values = self.values.to_host(stream)?;
        let wrong =
            (0..found.len()).find(|&i| found[i] != 1 || values[i] != workload::value(i as u32));
        match wrong {
            Some(i) => Err(fail(&format!("{what}: key {i} answered wrongly"))),
            None => Ok(()),
        }
    }
}

/// Measures one child of `capacity` pairs: `runs` timed runs of each rate.
pub fn measure(device: &Device, stream: &Stream, capacity: usize, runs: usize) -> Result<Measured> {
    let events = Runs {
        warm_up: WARM_UP_RUNS,
        timed: runs,
    };
    let child = Child::with_capacity(device, capacity)?;
    let (mut keys, mut values) = (
        DeviceBuffer::unfilled(stream, capacity)?,
        DeviceBuffer::unfilled(stream, capacity)?,
    );
    workload::generate(stream, KeySet::Hits, 0, &mut keys, Some(&mut values))?;
    child.insert_async(stream, &keys, &values)?;
    drop((keys, values));
    let mut probes = Probes::new(stream, capacity.min(RUN_KEYS))?;
    let count = probes.keys.len() as f64;

    let device_ms = median_ms(
        stream,
        events,
        &mut probes,
        |p| p.found.fill_zero(stream).map_err(Into::into),
        |p| child.get_async(stream, &p.keys, &mut p.found, &mut p.values),
    )?;
    probes.check(stream, "device lookups of one child")?;

    let pool = PinnedPool::new_mapped(device, None);
    let image = child.to_pinned_image(&pool)?;
    // The image's copies read the child's arrays: they run before the child goes.
    device.synchronize()?;
    drop(child);
    let page_in_s = page_in(device, &image, capacity, runs)?;

    let in_place_ms = median_ms(
        stream,
        events,
        &mut probes,
        |p| p.found.fill_zero(stream).map_err(Into::into),
        |p| Child::get_in_place(stream, &image, &p.keys, &mut p.found, Some(&mut p.values)),
    )?;
    probes.check(stream, "lookups in place of one child's image")?;
    Ok(Measured {
        image_bytes: image.bytes(),
        device_lookups_per_s: count / (device_ms / 1e3),
        page_in_s,
        in_place_lookups_per_s: count / (in_place_ms / 1e3),
    })
}

/// Median wall-clock seconds of paging the child of `image` in, each table checked for its
/// `pairs` pairs outside the timing.
fn page_in(device: &Device, image: &PinnedImage, pairs: usize, runs: usize) -> Result<f64> {
    let runs = Runs {
        warm_up: 1,
        timed: runs,
    };
    let mut paged: Option<Child> = None;
    median_wall_s(
        runs,
        &mut paged,
        |paged, _| {
            *paged = None;
            Ok(())
        },
        |paged, _| {
            *paged = Some(Child::from_pinned_image(device, image)?);
            Ok(device.synchronize()?)
        },
        |paged, _| {
            let len = paged.as_ref().map_or(Ok(0), Table::len)?;
            match len == pairs {
                true => Ok(()),
                false => Err(fail(&format!(
                    "a paged-in child holds {len} pairs, not {pairs}"
                ))),
            }
        },
    )
}

/// Prints the measured rates beside the cost model's defaults, and the crossover each
/// model puts the batch size at for `children` children.
pub fn print(measured: &Measured, bus: Bus, children: usize) {
    let default = CostModel::default();
    let model = measured.cost_model(bus);
    println!("| rate | measured here | cost model default |");
    println!("| --- | --- | --- |");
    println!(
        "| host to device, pinned (GB/s) | {:.1} | {:.1} |",
        bus.h2d / 1e9,
        default.host_to_device_bytes_per_s / 1e9
    );
    println!(
        "| zero-copy random reads: DyHash lookups of hits in a mapped pinned image, {PROBE_BYTES} B a hit (GB/s) | {:.1} ({:.0} M lookups/s) | {:.1} |",
        model.zero_copy_bytes_per_s / 1e9,
        measured.in_place_lookups_per_s / 1e6,
        default.zero_copy_bytes_per_s / 1e9
    );
    println!(
        "| page-in of a {:.1} MB image, wall clock (ms; GB/s) | {:.2}; {:.1} | - |",
        measured.image_bytes as f64 / 1e6,
        measured.page_in_s * 1e3,
        measured.image_bytes as f64 / measured.page_in_s / 1e9
    );
    println!(
        "| page-in beyond its bytes at the bus rate (us) | {:.0} | {:.0} |",
        model.page_in_seconds * 1e6,
        default.page_in_seconds * 1e6
    );
    println!(
        "| lookups of hits, child resident (G/s) | {:.2} | {:.2} |",
        model.device_lookups_per_s / 1e9,
        default.device_lookups_per_s / 1e9
    );
    let at = |model: &CostModel| {
        super::arithmetic::model_crossover_log2(model, PROBE_BYTES, measured.image_bytes, children)
            .map_or("never (always probes)".to_string(), |log2| {
                format!("2^{log2:.1}")
            })
    };
    println!(
        "| crossover: batch keys from which the model pages ({children} children) | {} | {} |",
        at(&model),
        at(&default)
    );
}
