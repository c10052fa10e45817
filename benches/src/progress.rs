//! Progress of long runs on stderr, so the Markdown on stdout stays as it is: which
//! workload starts, each sub-step as it starts with its place among the workload's steps,
//! and the seconds since the workload started.
//!
//! ```text
//! [slab-hash] started
//! [slab-hash] W1 memory utilization 0.9 (2/7), 4.1 s
//! ```

use std::time::Instant;

/// One workload's progress.
pub struct Progress {
    workload: String,
    started: Instant,
}

impl Progress {
    /// Says on stderr that `workload` starts, and starts its clock.
    pub fn start(workload: &str) -> Self {
        eprintln!("[{workload}] started");
        Self {
            workload: workload.to_string(),
            started: Instant::now(),
        }
    }

    /// Says on stderr that step `done` of `total`, `what`, starts.
    pub fn step(&self, what: &str, done: usize, total: usize) {
        eprintln!("{}", self.step_line(what, done, total));
    }

    fn step_line(&self, what: &str, done: usize, total: usize) -> String {
        format!(
            "[{}] {what} ({done}/{total}), {:.1} s",
            self.workload,
            self.elapsed_s()
        )
    }

    /// Seconds since the workload started.
    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Says on stderr that the workload is done, and after how long.
    pub fn finish(&self) {
        eprintln!("[{}] done, {:.1} s", self.workload, self.elapsed_s());
    }
}

/// Whether a line of a log is one of these progress lines: logs that catch stderr with
/// stdout interleave them with the Markdown, and readers of the Markdown skip them.
pub fn is_progress_line(line: &str) -> bool {
    line.starts_with('[') && line.contains("] ")
}

#[cfg(test)]
mod tests {
    use super::{Progress, is_progress_line};

    #[test]
    fn progress_lines_are_told_from_markdown() {
        let progress = Progress::start("slab-hash");
        assert!(is_progress_line(&progress.step_line("W1", 1, 7)));
        assert!(is_progress_line("[slab-hash] done, 3.0 s"));
        assert!(!is_progress_line("| slab hash build | 1 | 2 |"));
        assert!(!is_progress_line("## slab-hash W1"));
    }

    #[test]
    fn a_step_names_the_workload_its_place_and_the_seconds() {
        let line = Progress::start("slab-hash").step_line("W1 load 0.9", 3, 8);
        assert!(
            line.starts_with("[slab-hash] W1 load 0.9 (3/8), "),
            "{line}"
        );
        assert!(line.ends_with(" s"), "{line}");
    }
}
