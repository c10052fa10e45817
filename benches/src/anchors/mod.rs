//! `gpuhash-bench anchors`: one run of the anchors (public GPU hash tables timed on W1
//! beside ours, in the same run) as a table and a plot. Host code only; no GPU needed.
//!
//! The anchor harness writes one log a library into a folder (`cuco.log`, `bght.log`,
//! `slabhash.log`, `warpcore.log`), each measurement a line
//! `RESULT|system|load asked|load built|capacity|insert|hit|miss|insert failures|hit
//! failures|miss failures|note` (rates in M ops/s, a negative rate: not measured, a
//! negative failure count: not checked that way), beside `gpuhash.log`, the output of
//! `gpuhash-bench slab-hash cuckoo` from the same run, and `run.log`, the harness's own
//! record. [`logs`] reads them into [`Row`]s; [`report`] writes `anchors.md` (every row,
//! the best anchor per load and operation, ours over it) and `anchors.svg` (three panels:
//! insert, find hit, find miss against load, a line per table).
//!
//! A load is pairs over slots (open addressing, cuckoo) or pair bytes over table bytes
//! (slab hashes: memory utilization), which is the same measure for 8-byte slots. A ratio
//! counts only where both tables built the load asked within 1%: cuCollections rounds its
//! capacity up to a prime and WarpCore and BGHT's iht to their own sizes.

mod logs;
mod report;

use std::path::Path;

/// The loads of W1, the x axis of the plot and the rows of the comparison.
pub const LOADS: [f64; 4] = [0.5, 0.8, 0.9, 0.95];

/// How far (relative) the load built may be from the load asked for a ratio to count.
pub const LOAD_TOLERANCE: f64 = 0.01;

/// Bytes of one u32 key and u32 value pair.
const PAIR_BYTES: f64 = 8.0;

/// The operations of W1, in the order of [`Row::rates`].
pub const OPERATIONS: [&str; 3] = ["insert", "find hit", "find miss"];

/// Whose table a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A gpuhash table.
    Ours,
    /// A public table timed by the anchor harness.
    Anchor,
}

/// One table at one sizing: what it built and how fast it ran W1.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The table and its configuration, as its log names it.
    pub system: String,
    /// Ours or an anchor.
    pub side: Side,
    /// The load asked, or the sizing target of a slab hash.
    pub asked: f64,
    /// The load built (slab hashes: the memory utilization measured).
    pub built: f64,
    /// Slots (slab hashes: buckets).
    pub capacity: u64,
    /// Whether `asked` is a load; false for slab hashes sized by head-slab load.
    pub is_load: bool,
    /// Table bytes over pairs, where known.
    pub bytes_per_pair: Option<f64>,
    /// M ops/s of insert, find hit, find miss; `None` where not measured.
    pub rates: [Option<f64>; 3],
    /// Failures of insert, find hit, find miss; `None` where not checked that way.
    pub failures: [Option<u64>; 3],
    /// What the log says besides.
    pub note: String,
}

impl Row {
    /// The rate of operation `op` if it may be compared: measured, and its check passed.
    /// An insert counts only when the table it built then answered every hit right (and
    /// reported no insert failure, except BGHT's failures, which are builds retried with
    /// new hash functions and leave the median over the builds that succeeded).
    pub fn rate(&self, op: usize) -> Option<f64> {
        let rate = self.rates[op].filter(|&r| r > 0.0)?;
        let [insert, hit, miss] = self.failures;
        let passed = match op {
            0 => hit == Some(0) && (insert.unwrap_or(0) == 0 || self.retries_builds()),
            1 => hit == Some(0),
            _ => miss == Some(0),
        };
        passed.then_some(rate)
    }

    /// Whether insert failures are retried builds (BGHT) rather than lost pairs.
    pub fn retries_builds(&self) -> bool {
        self.system.starts_with("BGHT")
    }

    /// Whether the load built is within [`LOAD_TOLERANCE`] of the load asked.
    pub fn built_as_asked(&self) -> bool {
        self.is_load && (self.built - self.asked).abs() <= LOAD_TOLERANCE * self.asked
    }

    /// Whether this row was asked for `load`.
    pub fn asked_for(&self, load: f64) -> bool {
        self.is_load && (self.asked - load).abs() < 1e-6
    }
}

/// Everything one run left in its folder.
#[derive(Debug, Default)]
pub struct Run {
    /// Every row, anchors and ours, in the order read.
    pub rows: Vec<Row>,
    /// Lines that say where and how the run went: the devices, the harness's start line
    /// and each step's exit status.
    pub provenance: Vec<String>,
    /// What could not be read: missing logs, lines not understood.
    pub problems: Vec<String>,
}

/// Reads the logs in `logs` and writes `anchors.md` and `anchors.svg` into `out`;
/// returns the paths written.
pub fn write(logs: &Path, out: &Path) -> Result<[std::path::PathBuf; 2], String> {
    let run = logs::read_folder(logs);
    if run.rows.is_empty() {
        return Err(format!(
            "no RESULT lines or gpuhash W1 tables in {}: {}",
            logs.display(),
            run.problems.join("; ")
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let md = out.join("anchors.md");
    let svg = out.join("anchors.svg");
    std::fs::write(&md, report::markdown(&run))
        .map_err(|e| format!("cannot write {}: {e}", md.display()))?;
    std::fs::write(&svg, report::figure(&run).svg())
        .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    Ok([md, svg])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A run at n = 2^26: logs in the harness's layout with a subset of its tables.
    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/anchors")
    }

    fn row<'a>(run: &'a Run, system: &str, asked: f64) -> &'a Row {
        run.rows
            .iter()
            .find(|r| r.system == system && (r.asked - asked).abs() < 1e-9)
            .unwrap_or_else(|| panic!("no row {system} at {asked}"))
    }

    #[test]
    fn the_fixture_gives_every_row_once() {
        let run = logs::read_folder(&fixture());
        assert!(run.problems.is_empty(), "{:?}", run.problems);
        let count = |side| run.rows.iter().filter(|r| r.side == side).count();
        // cuco 3 tables x 4 loads, BGHT 2 x 4, SlabHash 5, WarpCore 4.
        assert_eq!(count(Side::Anchor), 12 + 8 + 5 + 4);
        // Slab hash at 4 sizings, DyHash at 4 loads; the u64 table and the grown one are
        // not W1 of u32 pairs.
        assert_eq!(count(Side::Ours), 8);
        let dyhash = row(&run, "gpuhash DyHash d3", 0.9);
        assert_eq!(dyhash.rates, [Some(7975.0), Some(13189.0), Some(11453.0)]);
        assert_eq!(dyhash.capacity, 776723 * 3 * 32);
        assert_eq!(dyhash.bytes_per_pair, Some(8.89));
        let slab = row(&run, "gpuhash slab hash util", 0.5);
        assert_eq!(slab.rates, [Some(10045.0), Some(20182.0), Some(20051.0)]);
        assert_eq!(
            (slab.built, slab.capacity, slab.is_load),
            (0.5, 8314711, true)
        );
        assert_eq!(slab.bytes_per_pair, Some(16.0));
        let head = row(&run, "gpuhash slab hash head", 0.9);
        assert!(!head.is_load && head.built == 0.66);
        // Provenance: the harness's start, five exits, the end, two device lines.
        assert!(run.provenance[0].starts_with("anchors/run.sh --runs 5"));
        assert_eq!(
            run.provenance
                .iter()
                .filter(|l| l.contains(": exit "))
                .count(),
            5
        );
        assert_eq!(
            run.provenance
                .iter()
                .filter(|l| l.contains("device:"))
                .count(),
            5
        );
    }

    #[test]
    fn failed_checks_and_retried_builds_decide_what_counts() {
        let run = logs::read_folder(&fixture());
        let failed = row(&run, "BGHT p2bht b16", 0.9);
        assert_eq!(
            (failed.rate(0), failed.rate(1), failed.rate(2)),
            (None, None, None)
        );
        let mut retried = row(&run, "BGHT iht b16", 0.5).clone();
        retried.failures[0] = Some(3);
        assert_eq!(retried.rate(0), Some(8561.0));
        retried.system = "cuco static_map DH cg4".into();
        assert_eq!(
            retried.rate(0),
            None,
            "lost pairs: the insert does not count"
        );
        retried.failures = [Some(0), Some(1), Some(0)];
        assert_eq!((retried.rate(0), retried.rate(1)), (None, None));
        assert_eq!(retried.rate(2), Some(7051.0));
        // cuco's prime rounding stays within 1%, BGHT's iht at 0.9 does not.
        assert!(row(&run, "cuco static_map DH cg4", 0.9).built_as_asked());
        assert!(!row(&run, "BGHT iht b16", 0.9).built_as_asked());
        assert!(!row(&run, "SlabHash head", 0.5).built_as_asked());
    }

    #[test]
    fn the_report_compares_ours_with_the_best_anchor() {
        let run = logs::read_folder(&fixture());
        let md = report::markdown(&run);
        // Every row once, in the table of every row.
        let every = md
            .split("## Every row")
            .nth(1)
            .unwrap()
            .split("\n## ")
            .next()
            .unwrap();
        assert_eq!(
            every
                .lines()
                .filter(|l| l.starts_with("| ")
                    && !l.starts_with("| table")
                    && !l.starts_with("| ---"))
                .count(),
            37
        );
        assert!(every.contains(
            "| BGHT iht b16 | 0.90 | 0.8888 (off) | 75506896 | 9.00 | 7045 | 11272 | 5322 | 0/0/0 |"
        ));
        assert!(every.contains(
            "| SlabHash util | 0.50 | 0.5002 | 8314711 | 15.99 | 8302 | 13900 | 13526 | -/0/0 |"
        ));
        assert!(
            every.contains(
                "| BGHT p2bht b16 | 0.95 | 0.9500 | 70640912 | 8.42 | - | - | - | 20/-/- |"
            )
        );
        // Best anchors: cuco DH cg4 at 0.8 for every operation.
        assert!(md.contains(
            "| 0.80 | cuco static_map DH cg4 10286 (built 0.7999) | cuco static_map DH cg4 17523 (built 0.7999) | cuco static_map DH cg4 9982 (built 0.7999) |"
        ));
        // At 0.5 the best insert is cuco LP cg4; ours over it, counted.
        assert!(md.contains(&format!(
            "| gpuhash slab hash util | 0.50 | 0.5000 | **{:.2}** (cuco static_map LP cg4) |",
            10045.0 / 11067.0
        )));
        assert!(md.contains(&format!(
            "| gpuhash DyHash d3 | 0.80 | 0.8000 | **{:.2}** (cuco static_map DH cg4) | **{:.2}** (cuco static_map DH cg4) | **{:.2}** (cuco static_map DH cg4) |",
            8400.0 / 10286.0,
            13837.0 / 17523.0,
            15640.0 / 9982.0
        )));
        // Head-slab sizings are no load: no ratio row.
        let ratios = md.split("## Ours over").nth(1).unwrap();
        assert!(ratios.contains("| gpuhash slab hash util | 0.90 |"));
        assert!(!ratios.contains("head"));
    }

    #[test]
    fn an_anchor_off_its_load_makes_a_ratio_not_count() {
        let mut run = logs::read_folder(&fixture());
        // Make BGHT's iht, which built 0.8888 when asked 0.9, the fastest miss at 0.9.
        let iht = run
            .rows
            .iter_mut()
            .find(|r| r.system == "BGHT iht b16" && r.asked == 0.9)
            .unwrap();
        iht.rates[2] = Some(20000.0);
        let md = report::markdown(&run);
        assert!(md.contains("BGHT iht b16 20000 (built 0.8888, off)"));
        let expected = format!(
            "~~{:.2}~~ (BGHT iht b16; does not count: BGHT iht b16 built 0.8888; over cuco static_map DH cg4, best that built it: **{:.2}**)",
            11453.0 / 20000.0,
            11453.0 / 6110.0
        );
        assert!(md.contains(&expected), "{md}");
    }

    #[test]
    fn the_figure_has_three_panels_of_w1_tables() {
        let run = logs::read_folder(&fixture());
        let figure = report::figure(&run);
        assert!(figure.title.contains("n = 2^26"));
        let names = |op: usize| -> Vec<&str> {
            figure.charts[op]
                .series
                .iter()
                .map(|s| s.name.as_str())
                .collect()
        };
        assert_eq!(figure.charts.len(), 3);
        // Ours first, solid; no head-slab sizing; insert() rows only where they measured.
        assert_eq!(
            &names(0)[..2],
            ["gpuhash DyHash d3", "gpuhash slab hash util"]
        );
        assert!(!names(0).iter().any(|n| n.contains("head")));
        assert!(names(0).contains(&"cuco static_map DH cg4 insert()"));
        assert!(!names(1).contains(&"cuco static_map DH cg4 insert()"));
        let p2bht = figure.charts[1]
            .series
            .iter()
            .find(|s| s.name == "BGHT p2bht b16")
            .unwrap();
        assert_eq!(p2bht.points, [(0.5, 10420.0), (0.8, 10416.0)]);
        assert!(p2bht.dashed && !figure.charts[1].series[0].dashed);
        // SlabHash's 0.93 is no W1 load.
        let slab = figure.charts[2]
            .series
            .iter()
            .find(|s| s.name == "SlabHash util")
            .unwrap();
        assert_eq!(slab.points.len(), 2);
        let svg = figure.svg();
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        for title in OPERATIONS {
            assert!(svg.contains(&format!(">{title}</text>")));
        }
        // One legend entry a table, however many panels it appears in.
        assert_eq!(svg.matches(">gpuhash DyHash d3</text>").count(), 1);
    }

    /// A copy of the fixture at n = 2^22, with a line no parser knows, in a fresh folder.
    fn small_run_folder() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuhash-anchors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(fixture()).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut text = text
                .replace("2^26", "2^22")
                .replace("--log2-n 26", "--log2-n 22")
                .replace("67108864", "4194304");
            if path.ends_with("cuco.log") {
                text.push_str("RESULT|cuco static_map DH cg4|0.50|cut off\n");
            }
            std::fs::write(dir.join(path.file_name().unwrap()), text).unwrap();
        }
        dir
    }

    #[test]
    fn a_small_run_and_a_bad_line_still_give_a_report() {
        let dir = small_run_folder();
        std::fs::remove_file(dir.join("warpcore.log")).unwrap();
        let out = dir.join("report");
        let written = write(&dir, &out).unwrap();
        let md = std::fs::read_to_string(&written[0]).unwrap();
        let svg = std::fs::read_to_string(&written[1]).unwrap();
        assert!(
            md.contains(
                "cuco.log line 15: not understood: RESULT|cuco static_map DH cg4|0.50|cut off"
            ),
            "{md}"
        );
        assert!(md.contains("warpcore.log"));
        assert!(md.contains("--log2-n 22"));
        // Bytes a pair of the slab hash follow n: 1024 MiB over 2^22 pairs.
        assert!(md.contains("| gpuhash slab hash util | 0.50 | 0.5000 | 8314711 | 256.00 |"));
        assert!(svg.contains("n = 2^22"));
        // A folder with nothing to read is an error, not an empty report.
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(
            write(&empty, &empty)
                .unwrap_err()
                .contains("no RESULT lines")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
