//! The timed rows of a W5 table: inserts of all n pairs in one call, and lookups of hits
//! and of misses in batches, each in two forms. The host form is how a demanding caller
//! calls: `insert` and `get_into` on caller memory registered with the driver once
//! ([`gpuhash_core::Device::register`]), answers into registered buffers it keeps. The
//! device form is the table's own cost: `insert_async` and `get_async` on device buffers,
//! and the wait for the stream. Wall clock around the calls alone; the median of the timed
//! runs after one untimed; every answer of every run checked after its timing (hits found
//! with their values, misses not found), on answer buffers filled with junk before it.
//!
//! A run of lookups reads its own slice of the n keys ([`run_start`]). Each row gives the
//! bytes a run moved over the bus: keys and answers in the host form, and in both forms the
//! images paging moved each way (the table's [`SwapStats`] over the timed runs, a mean a
//! run); the least time the bus measured in this run needs for all of them
//! ([`Crossing::bound_s`]), the bound, and the rate as a share of it; and the rate as a
//! share of the bound of the keys and answers alone, which must cross whatever the table
//! does with its children (a table that pages more than it must has a higher bound, not
//! a better rate).

use gpuhash_core::table::{Map, Table};
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{Device, DeviceBuffer, HostRegistered, Stream};
use gpuhash_swap::{SwapMap, SwapStats};
use gpuhash_test_support::PageAlone;

use super::arithmetic::{Crossing, batches_per_run, run_start};
use super::parts::Form;
use super::{Result, fail};
use crate::contract_bench::Bus;
use crate::measure::{Runs, median_wall_s};

/// What an answer flag holds before a run: neither 0 nor 1.
const JUNK_FLAG: u8 = 0xA5;
/// What an answer value holds before a run of the host form.
const JUNK_VALUE: u32 = 0xDEAD_BEEF;

/// What every row shares: the device, the bus measured in this run, the timed runs, n and
/// the forms timed.
pub struct Bench<'a> {
    pub device: &'a Device,
    pub stream: &'a Stream,
    pub bus: Bus,
    /// Timed runs of each row, after one untimed.
    pub runs: usize,
    pub n: usize,
    pub forms: Vec<Form>,
}

/// The caller's memory: the n keys and values, n misses, and answer buffers for the
/// longest run, each alone on its pages so that each registers on its own.
pub struct HostArrays {
    keys: PageAlone<u32>,
    values: PageAlone<u32>,
    misses: PageAlone<u32>,
    found: PageAlone<u8>,
    answers: PageAlone<u32>,
}

/// [`HostArrays`] registered with the driver.
pub struct Registered<'a> {
    keys: HostRegistered<&'a mut [u32]>,
    values: HostRegistered<&'a mut [u32]>,
    misses: HostRegistered<&'a mut [u32]>,
    found: HostRegistered<&'a mut [u8]>,
    answers: HostRegistered<&'a mut [u32]>,
}

impl HostArrays {
    /// The workload's n pairs and n misses, and answer buffers of `answers` keys.
    pub fn new(n: usize, answers: usize) -> Self {
        // Each generated vector goes as soon as it is copied: at n = 2^30 each is 4 GiB.
        let (keys, values) = {
            let (keys, values) = workload::host_pairs(KeySet::Hits, 0, n as u32);
            (PageAlone::from_slice(&keys), PageAlone::from_slice(&values))
        };
        let misses = PageAlone::from_slice(&workload::host_pairs(KeySet::Misses, 0, n as u32).0);
        Self {
            keys,
            values,
            misses,
            found: PageAlone::from_slice(&vec![0; answers]),
            answers: PageAlone::from_slice(&vec![0; answers]),
        }
    }

    /// Every array registered with `device` until the answer drops.
    pub fn register(&mut self, device: &Device) -> Result<Registered<'_>> {
        Ok(Registered {
            keys: device.register(self.keys.values_mut())?,
            values: device.register(self.values.values_mut())?,
            misses: device.register(self.misses.values_mut())?,
            found: device.register(self.found.values_mut())?,
            answers: device.register(self.answers.values_mut())?,
        })
    }
}

/// What a row times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// All n pairs in one call, into the table emptied before each run.
    Insert,
    /// Lookups of keys the table holds.
    Hits,
    /// Lookups of keys it does not.
    Misses,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Insert => "insert",
            Verb::Hits => "get hits",
            Verb::Misses => "get misses",
        }
    }

    fn key_set(self) -> KeySet {
        match self {
            Verb::Misses => KeySet::Misses,
            Verb::Insert | Verb::Hits => KeySet::Hits,
        }
    }
}

/// One timed row.
#[derive(Debug, Clone)]
pub struct Row {
    pub table: String,
    pub verb: Verb,
    pub form: Form,
    /// Keys a call.
    pub batch: usize,
    /// Calls a run.
    pub batches: usize,
    /// Median seconds of a run.
    pub seconds: f64,
    /// Bytes of keys and answers a run moved over the bus (none for device buffers).
    pub own: Crossing,
    /// Bytes of images paging moved over the bus in a run.
    pub paged: Crossing,
    /// The table's counts over the timed runs.
    pub paging: SwapStats,
    /// Timed runs.
    pub runs: usize,
}

impl Row {
    /// The header of the table [`Row::line`] prints into.
    pub const HEADER: &'static str = "| table | verb | form | batch | calls a run | median ms a run | M keys/s | MB a run, keys and answers: up / down | MB a run, images paged: up / down | bound M keys/s | of bound | of the bound of keys and answers alone | a run: page-ins / write-backs / probes in place / keys filtered |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |";

    /// Keys a run.
    pub fn keys(&self) -> usize {
        self.batch * self.batches
    }

    /// Keys a second.
    pub fn keys_per_s(&self) -> f64 {
        self.keys() as f64 / self.seconds
    }

    /// Everything a run moved over the bus: keys, answers and images.
    pub fn crossing(&self) -> Crossing {
        self.own.plus(self.paged)
    }

    /// Keys a second the bus allows at most for what a run moved, when something crossed.
    pub fn bound_keys_per_s(&self, bus: Bus) -> Option<f64> {
        self.crossing()
            .bound_s(bus)
            .map(|bound| self.keys() as f64 / bound)
    }

    /// The rate as a share of the bound of what a run moved.
    pub fn of_bound(&self, bus: Bus) -> Option<f64> {
        self.crossing()
            .bound_s(bus)
            .map(|bound| bound / self.seconds)
    }

    /// The rate as a share of the bound of the keys and answers alone: what must cross
    /// whatever the table does with its children.
    pub fn of_floor(&self, bus: Bus) -> Option<f64> {
        self.own.bound_s(bus).map(|bound| bound / self.seconds)
    }

    /// The row, under [`Row::HEADER`].
    pub fn line(&self, bus: Bus) -> String {
        let per_run = |count: u64| count as f64 / self.runs.max(1) as f64;
        let share = |share: Option<f64>| share.map_or("-".into(), |s| format!("{:.0}%", 100.0 * s));
        let p = &self.paging;
        format!(
            "| {} | {} | {} | 2^{:.0} | {} | {:.3} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {} | {} | {} | {:.1} / {:.1} / {:.1} / {:.0} |",
            self.table,
            self.verb.name(),
            self.form.name(),
            (self.batch as f64).log2(),
            self.batches,
            self.seconds * 1e3,
            self.keys_per_s() / 1e6,
            self.own.up / 1e6,
            self.own.down / 1e6,
            self.paged.up / 1e6,
            self.paged.down / 1e6,
            self.bound_keys_per_s(bus)
                .map_or("-".into(), |rate| format!("{:.1}", rate / 1e6)),
            share(self.of_bound(bus)),
            share(self.of_floor(bus)),
            per_run(p.page_ins),
            per_run(p.page_outs),
            per_run(p.probes_in_place),
            per_run(p.filtered),
        )
    }
}

/// Times `work` on `state` ([`median_wall_s`] with one untimed run and `runs` timed
/// ones), and counts what the table did over the timed runs.
fn timed<S>(
    table: &SwapMap<u32, u32>,
    runs: usize,
    state: &mut S,
    mut before: impl FnMut(&mut S, usize) -> Result<()>,
    mut work: impl FnMut(&mut S, usize) -> Result<()>,
    mut after: impl FnMut(&mut S, usize) -> Result<()>,
) -> Result<(f64, SwapStats)> {
    let runs = Runs {
        warm_up: 1,
        timed: runs,
    };
    let mut start = SwapStats::default();
    let seconds = median_wall_s(
        runs,
        &mut (state, &mut start),
        |(state, start), run| {
            before(&mut **state, run)?;
            if run == runs.warm_up {
                **start = table.stats();
            }
            Ok(())
        },
        |(state, _), run| work(&mut **state, run),
        |(state, _), run| after(&mut **state, run),
    )?;
    Ok((seconds, table.stats().since(start)))
}

/// Fails unless the answers to the keys of indices `start..` of `verb`'s key set are
/// right: hits found with their values, misses not found.
fn check_answers(verb: Verb, start: usize, found: &[u8], answers: &[u32]) -> Result<()> {
    let hits = verb == Verb::Hits;
    let wrong = (0..found.len()).find(|&i| {
        let value = workload::value((start + i) as u32);
        found[i] != u8::from(hits) || (hits && answers[i] != value)
    });
    match wrong {
        Some(i) => Err(fail(&format!(
            "{}: key {} answered wrongly (found flag {}, value {})",
            verb.name(),
            start + i,
            found[i],
            answers[i]
        ))),
        None => Ok(()),
    }
}

/// Fails unless `table` holds `n` pairs.
fn check_len(table: &SwapMap<u32, u32>, n: usize) -> Result<()> {
    let len = table.len()?;
    match len == n {
        true => Ok(()),
        false => Err(fail(&format!(
            "the table holds {len} pairs after inserting {n}"
        ))),
    }
}

impl Bench<'_> {
    /// Every row of `table`: inserts in each form (the host form last, so that the table
    /// is full after it), then lookups of hits and misses at each of `batches` in each
    /// form; each printed as it is measured.
    pub fn table_rows(
        &self,
        name: &str,
        table: &SwapMap<u32, u32>,
        arrays: &mut Registered<'_>,
        batches: &[usize],
    ) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        let mut print = |row: Row| {
            println!("{}", row.line(self.bus));
            rows.push(row);
        };
        for &form in self.forms.iter().rev() {
            print(match form {
                Form::Host => self.host_insert(name, table, arrays)?,
                Form::Device => self.device_insert(name, table)?,
            });
        }
        for &batch in batches {
            for verb in [Verb::Hits, Verb::Misses] {
                for &form in &self.forms {
                    let most = super::arithmetic::MOST_BATCHES;
                    print(match form {
                        Form::Host => self.host_lookups(name, table, arrays, verb, batch)?,
                        Form::Device => {
                            self.device_lookups(name, table, arrays, verb, batch, most)?
                        }
                    });
                }
            }
        }
        Ok(rows)
    }

    /// Fills `table` with the n pairs, untimed, for pieces that run without the insert
    /// rows.
    pub fn fill(&self, table: &SwapMap<u32, u32>, arrays: &Registered<'_>) -> Result<()> {
        table.insert(&arrays.keys, &arrays.values)?;
        check_len(table, self.n)
    }

    /// All n pairs from registered host memory in one `insert`, into the emptied table.
    fn host_insert(
        &self,
        name: &str,
        table: &SwapMap<u32, u32>,
        arrays: &mut Registered<'_>,
    ) -> Result<Row> {
        let (seconds, paging) = timed(
            table,
            self.runs,
            arrays,
            |_, _| Ok(table.clear()?),
            |arrays, _| Ok(table.insert(&arrays.keys, &arrays.values)?),
            |_, _| check_len(table, self.n),
        )?;
        Ok(self.row(
            name,
            (Verb::Insert, Form::Host),
            (self.n, 1),
            (seconds, paging),
        ))
    }

    /// All n pairs from device buffers in one `insert_async`, into the emptied table.
    fn device_insert(&self, name: &str, table: &SwapMap<u32, u32>) -> Result<Row> {
        let stream = self.stream;
        let mut pairs = (
            DeviceBuffer::unfilled(stream, self.n)?,
            DeviceBuffer::unfilled(stream, self.n)?,
        );
        workload::generate(stream, KeySet::Hits, 0, &mut pairs.0, Some(&mut pairs.1))?;
        let (seconds, paging) = timed(
            table,
            self.runs,
            &mut pairs,
            |_, _| Ok(table.clear()?),
            |(keys, values), _| {
                table.insert_async(stream, keys, values)?;
                Ok(stream.synchronize()?)
            },
            |_, _| check_len(table, self.n),
        )?;
        Ok(self.row(
            name,
            (Verb::Insert, Form::Device),
            (self.n, 1),
            (seconds, paging),
        ))
    }

    /// The row of `name`'s `verb` in `form`, `batches` calls of `batch` keys a run, with
    /// its median seconds and its counts over the timed runs; the bytes a run moved are the
    /// form's keys and answers (none for device buffers) and what paging moved.
    fn row(
        &self,
        name: &str,
        (verb, form): (Verb, Form),
        (batch, batches): (usize, usize),
        (seconds, paging): (f64, SwapStats),
    ) -> Row {
        let keys = batch * batches;
        let own = match (form, verb) {
            (Form::Device, _) => Crossing::default(),
            (Form::Host, Verb::Insert) => Crossing::host_inserts(keys),
            (Form::Host, Verb::Hits | Verb::Misses) => Crossing::host_lookups(keys),
        };
        Row {
            table: name.into(),
            verb,
            form,
            batch,
            batches,
            seconds,
            own,
            paged: Crossing::paging(paging, self.runs),
            paging,
            runs: self.runs,
        }
    }

    /// Lookups of `verb`'s keys from registered host memory with `get_into`, answers into
    /// the registered answer buffers: runs of [`batches_per_run`] calls of `batch` keys.
    fn host_lookups(
        &self,
        name: &str,
        table: &SwapMap<u32, u32>,
        arrays: &mut Registered<'_>,
        verb: Verb,
        batch: usize,
    ) -> Result<Row> {
        let batches = batches_per_run(batch, self.n, super::arithmetic::MOST_BATCHES);
        let keys = batch * batches;
        let start = |run: usize| run_start(run, keys, self.n);
        let (seconds, paging) = timed(
            table,
            self.runs,
            arrays,
            |arrays, _| {
                arrays.found[..keys].fill(JUNK_FLAG);
                arrays.answers[..keys].fill(JUNK_VALUE);
                Ok(())
            },
            |arrays, run| {
                let Registered {
                    keys: hits,
                    misses,
                    found,
                    answers,
                    ..
                } = arrays;
                let source = if verb == Verb::Misses { misses } else { hits };
                let source = &source[start(run)..start(run) + keys];
                let calls = source
                    .chunks(batch)
                    .zip(found.chunks_mut(batch))
                    .zip(answers.chunks_mut(batch));
                for ((keys, found), answers) in calls {
                    table.get_into(keys, found, answers)?;
                }
                Ok(())
            },
            |arrays, run| {
                check_answers(
                    verb,
                    start(run),
                    &arrays.found[..keys],
                    &arrays.answers[..keys],
                )
            },
        )?;
        Ok(self.row(
            name,
            (verb, Form::Host),
            (batch, batches),
            (seconds, paging),
        ))
    }

    /// Lookups of `verb`'s keys on device buffers with `get_async`, and the wait for the
    /// stream: runs of [`batches_per_run`] (at most `most`) calls of `batch` keys, each
    /// run's keys made on the device before it, its answers checked on the host after it.
    pub fn device_lookups(
        &self,
        name: &str,
        table: &SwapMap<u32, u32>,
        arrays: &mut Registered<'_>,
        verb: Verb,
        batch: usize,
        most: usize,
    ) -> Result<Row> {
        let stream = self.stream;
        let batches = batches_per_run(batch, self.n, most);
        let keys = batch * batches;
        let start = |run: usize| run_start(run, keys, self.n);
        let junk = DeviceBuffer::from_host(stream, &vec![JUNK_FLAG; batch])?;
        let mut calls = DeviceCalls::new(stream, batch, batches)?;
        let (seconds, paging) = timed(
            table,
            self.runs,
            &mut (&mut calls, arrays),
            |(calls, _), run| {
                for (j, (keys, found)) in calls.keys.iter_mut().zip(&mut calls.found).enumerate() {
                    let first = (start(run) + j * batch) as u32;
                    workload::generate(stream, verb.key_set(), first, keys, None)?;
                    found.copy_from(stream, &junk)?;
                }
                Ok(stream.synchronize()?)
            },
            |(calls, _), _| {
                for ((keys, found), values) in calls
                    .keys
                    .iter()
                    .zip(&mut calls.found)
                    .zip(&mut calls.values)
                {
                    table.get_async(stream, keys, found, values)?;
                }
                Ok(stream.synchronize()?)
            },
            |(calls, arrays), run| {
                let targets = arrays.found[..keys]
                    .chunks_mut(batch)
                    .zip(arrays.answers[..keys].chunks_mut(batch));
                for ((found, values), (to_found, to_values)) in
                    calls.found.iter().zip(&calls.values).zip(targets)
                {
                    found.copy_to_host(stream, to_found)?;
                    values.copy_to_host(stream, to_values)?;
                }
                check_answers(
                    verb,
                    start(run),
                    &arrays.found[..keys],
                    &arrays.answers[..keys],
                )
            },
        )?;
        Ok(self.row(
            name,
            (verb, Form::Device),
            (batch, batches),
            (seconds, paging),
        ))
    }
}

/// The device buffers of a run of lookups: keys and answers for each call.
struct DeviceCalls {
    keys: Vec<DeviceBuffer<u32>>,
    found: Vec<DeviceBuffer<u8>>,
    values: Vec<DeviceBuffer<u32>>,
}

impl DeviceCalls {
    fn new(stream: &Stream, batch: usize, batches: usize) -> Result<Self> {
        Ok(Self {
            keys: buffers(stream, batch, batches)?,
            found: buffers(stream, batch, batches)?,
            values: buffers(stream, batch, batches)?,
        })
    }
}

/// `count` device buffers of `len` values each.
fn buffers<T: bytemuck::Pod>(
    stream: &Stream,
    len: usize,
    count: usize,
) -> Result<Vec<DeviceBuffer<T>>> {
    let buffers: gpuhash_core::Result<Vec<_>> = (0..count)
        .map(|_| DeviceBuffer::unfilled(stream, len))
        .collect();
    Ok(buffers?)
}
