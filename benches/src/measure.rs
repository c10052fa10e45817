//! Timing with CUDA events and the rows of the report.

use gpuhash_core::{EventTimer, Result, Stream};

/// Runs not timed before the timed ones: module loading and first-touch costs stay out.
pub const WARM_UP_RUNS: usize = 3;

/// One timed workload.
pub struct Measurement {
    /// What was timed.
    pub name: &'static str,
    /// Items (pairs or keys) processed in one run.
    pub items: usize,
    /// Bytes moved through device memory in one run.
    pub bytes: usize,
    /// Median device time of one run, in milliseconds.
    pub ms: f64,
}

impl Measurement {
    /// The header of the table [`Measurement::row`] prints into.
    pub const HEADER: &'static str = "| workload | items | median ms | M items/s | GB/s | of copy bandwidth |\n| --- | --- | --- | --- | --- | --- |";

    /// Bytes a second this workload moved.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / (self.ms / 1e3)
    }

    /// A table row, with the bandwidth as a share of `copy_bytes_per_second`.
    pub fn row(&self, copy_bytes_per_second: f64) -> String {
        format!(
            "| {} | {} | {:.3} | {:.0} | {:.0} | {:.0}% |",
            self.name,
            self.items,
            self.ms,
            self.items as f64 / (self.ms / 1e3) / 1e6,
            self.bytes_per_second() / 1e9,
            100.0 * self.bytes_per_second() / copy_bytes_per_second
        )
    }
}

/// Runs `work` (which queues device work on `stream`) `WARM_UP_RUNS` times, then `runs`
/// times between CUDA events, and returns the median time in milliseconds.
pub fn median_ms(
    stream: &Stream,
    runs: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<f64> {
    for _ in 0..WARM_UP_RUNS {
        work()?;
    }
    stream.synchronize()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let timer = EventTimer::start(stream)?;
        work()?;
        times.push(f64::from(timer.stop()?));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
