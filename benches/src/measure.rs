//! Timing with CUDA events or the wall clock, medians, and the rows of the report.

use std::time::Instant;

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
    Ok(median(times))
}

/// The median of `times` (of an even count, the upper of the middle two).
///
/// # Panics
/// When `times` is empty.
pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Wall-clock timing with untimed work around each run: for each of `runs.warm_up`
/// untimed runs and then `runs.timed` (at least one) timed runs, `i` counting from 0 over
/// both, `before(state, i)`, then `work(state, i)` alone between two readings of the clock,
/// then `after(state, i)` (checks of the run's answers, say); returns the median seconds of
/// the timed runs' `work`. `work` must wait for the device work it queues.
pub fn median_wall_s<S, E>(
    runs: Runs,
    state: &mut S,
    mut before: impl FnMut(&mut S, usize) -> Result<(), E>,
    mut work: impl FnMut(&mut S, usize) -> Result<(), E>,
    mut after: impl FnMut(&mut S, usize) -> Result<(), E>,
) -> Result<f64, E> {
    let timed = runs.timed.max(1);
    let mut times = Vec::with_capacity(timed);
    for run in 0..runs.warm_up + timed {
        before(state, run)?;
        let started = Instant::now();
        work(state, run)?;
        let seconds = started.elapsed().as_secs_f64();
        after(state, run)?;
        if run >= runs.warm_up {
            times.push(seconds);
        }
    }
    Ok(median(times))
}

/// A setup that does nothing.
pub fn no_setup<S, E>(_: &mut S) -> Result<(), E> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_time() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(vec![7.0]), 7.0);
    }

    #[test]
    fn wall_timing_runs_the_hooks_around_each_run_and_times_only_the_timed_ones() {
        let runs = Runs {
            warm_up: 2,
            timed: 3,
        };
        let mut log: Vec<String> = Vec::new();
        let seconds = median_wall_s::<_, ()>(
            runs,
            &mut log,
            |log, i| {
                log.push(format!("before {i}"));
                Ok(())
            },
            |log, i| {
                log.push(format!("work {i}"));
                Ok(())
            },
            |log, i| {
                log.push(format!("after {i}"));
                Ok(())
            },
        )
        .unwrap();
        assert!((0.0..1.0).contains(&seconds));
        let expected: Vec<String> = (0..5)
            .flat_map(|i| {
                [
                    format!("before {i}"),
                    format!("work {i}"),
                    format!("after {i}"),
                ]
            })
            .collect();
        assert_eq!(log, expected);
        // An error in a hook ends the timing.
        let failed = median_wall_s(
            runs,
            &mut (),
            |_, _| Ok(()),
            |_, i| match i {
                3 => Err(i),
                _ => Ok(()),
            },
            |_, _| Ok(()),
        );
        assert_eq!(failed, Err(3));
    }
}
