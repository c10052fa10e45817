//! Timing with CUDA events and the rows of the report.

use gpuhash_core::{Error, EventTimer, Stream};

/// Untimed runs before the timed ones, unless a workload says otherwise.
pub const WARM_UP_RUNS: usize = 3;

/// How often to run a workload: untimed first (module loading and first-touch costs stay
/// out), then timed.
#[derive(Debug, Clone, Copy)]
pub struct Runs {
    /// Untimed runs first.
    pub warm_up: usize,
    /// Timed runs whose median is reported.
    pub timed: usize,
}

/// One timed workload.
pub struct Measurement {
    /// What was timed.
    pub name: String,
    /// Items (pairs, keys, allocations) processed in one run.
    pub items: usize,
    /// Bytes moved through device memory in one run, where that is the point.
    pub bytes: Option<usize>,
    /// Median device time of one run, in milliseconds.
    pub ms: f64,
}

impl Measurement {
    /// The header of the table [`Measurement::row`] prints into.
    pub const HEADER: &'static str = "| workload | items | median ms | M items/s | GB/s | of copy bandwidth |\n| --- | --- | --- | --- | --- | --- |";

    /// Bytes a second this workload moved, if it counts bytes.
    pub fn bytes_per_second(&self) -> Option<f64> {
        self.bytes.map(|bytes| bytes as f64 / (self.ms / 1e3))
    }

    /// Items a second.
    pub fn items_per_second(&self) -> f64 {
        self.items as f64 / (self.ms / 1e3)
    }

    /// A table row, with bandwidth as a share of `copy_bytes_per_second` where it counts.
    pub fn row(&self, copy_bytes_per_second: f64) -> String {
        let (bandwidth, share) = match self.bytes_per_second() {
            Some(rate) => (
                format!("{:.0}", rate / 1e9),
                format!("{:.0}%", 100.0 * rate / copy_bytes_per_second),
            ),
            None => ("-".into(), "-".into()),
        };
        let rate = self.items_per_second() / 1e6;
        format!(
            "| {} | {} | {:.3} | {rate:.0} | {bandwidth} | {share} |",
            self.name, self.items, self.ms
        )
    }
}

/// Runs `setup` then `work` on `state` (both queue device work on `stream`)
/// `runs.warm_up` times, then `runs.timed` times with only `work` between CUDA events,
/// and returns the median time of `work` in milliseconds.
pub fn median_ms<S, E: From<Error>>(
    stream: &Stream,
    runs: Runs,
    state: &mut S,
    mut setup: impl FnMut(&mut S) -> Result<(), E>,
    mut work: impl FnMut(&mut S) -> Result<(), E>,
) -> Result<f64, E> {
    for _ in 0..runs.warm_up {
        setup(state)?;
        work(state)?;
    }
    let mut times = Vec::with_capacity(runs.timed);
    for _ in 0..runs.timed.max(1) {
        setup(state)?;
        let timer = EventTimer::start(stream)?;
        work(state)?;
        times.push(f64::from(timer.stop()?));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// A setup that does nothing.
pub fn no_setup<S, E>(_: &mut S) -> Result<(), E> {
    Ok(())
}
