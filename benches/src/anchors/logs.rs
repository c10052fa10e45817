//! Reading a run's folder: the anchors' `RESULT|` lines, the W1 tables `gpuhash-bench`
//! printed into `gpuhash.log`, and the provenance lines of every log.
//!
//! Ours are read by column name from the markdown tables, so a column added to a table
//! later (or missing from an older one) moves nothing; n may be any power of two.

use std::path::Path;

use gpuhash_cuckoo::{BucketLayout, CuckooTable};

use super::{PAIR_BYTES, Row, Run, Side};

/// The anchor logs, one a library.
const ANCHOR_LOGS: [&str; 4] = ["cuco", "bght", "slabhash", "warpcore"];

/// Reads every log in `dir`; a missing or unreadable log is a problem, not an error.
pub fn read_folder(dir: &Path) -> Run {
    let mut run = Run::default();
    let read = |name: &str, run: &mut Run| {
        let path = dir.join(format!("{name}.log"));
        match std::fs::read(&path) {
            Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) => {
                run.problems.push(format!("{}: {e}", path.display()));
                None
            }
        }
    };
    if let Some(text) = read("run", &mut run) {
        run.provenance.extend(run_lines(&text));
    }
    for name in ANCHOR_LOGS.iter().copied().chain(["gpuhash"]) {
        let Some(text) = read(name, &mut run) else {
            continue;
        };
        if let Some(device) = text.lines().find(|l| l.starts_with("device:")) {
            run.provenance.push(format!("{name}: {device}"));
        }
        if name == "gpuhash" {
            read_ours(&text, &mut run);
        } else {
            read_anchor(name, &text, &mut run);
        }
    }
    run
}

/// The harness's start line and the exit status of each step.
fn run_lines(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines()
        .filter(|l| {
            l.starts_with("anchors/run.sh")
                || l.starts_with("finished")
                || l.trim_start().split_once(": exit ").is_some()
        })
        .map(|l| l.trim().to_string())
}

/// The RESULT lines of an anchor log.
fn read_anchor(name: &str, text: &str, run: &mut Run) {
    for (number, line) in text.lines().enumerate() {
        if let Some(fields) = line.strip_prefix("RESULT|") {
            match anchor_row(fields) {
                Some(row) => run.rows.push(row),
                None => run.problems.push(format!(
                    "{name}.log line {}: not understood: {line}",
                    number + 1
                )),
            }
        }
    }
}

/// One anchor row from the fields after `RESULT|`: system, load asked, load built,
/// capacity, the three rates, the three failure counts, and a note (which may hold `|`).
pub fn anchor_row(fields: &str) -> Option<Row> {
    let f: Vec<&str> = fields.splitn(11, '|').map(str::trim).collect();
    if f.len() < 10 || f[0].is_empty() {
        return None;
    }
    let number = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite());
    let rate = |s: &str| number(s).map(|v| (v >= 0.0).then_some(v));
    let count = |s: &str| s.parse::<i64>().ok().map(|v| u64::try_from(v).ok());
    let asked = number(f[1])?;
    let built = number(f[2])?;
    let system = f[0].to_string();
    Some(Row {
        is_load: !system.starts_with("SlabHash head"),
        asked,
        built,
        capacity: f[3].parse().ok()?,
        // Every anchor stores u32 pairs in 8-byte slots (SlabHash: its load built is the
        // memory utilization), so its table bytes a pair are 8 over the load built.
        bytes_per_pair: (built > 0.0).then(|| PAIR_BYTES / built),
        rates: [rate(f[4])?, rate(f[5])?, rate(f[6])?],
        failures: [count(f[7])?, count(f[8])?, count(f[9])?],
        note: f.get(10).unwrap_or(&"").to_string(),
        side: Side::Anchor,
        system,
    })
}

/// A markdown table and the last line of text above it.
struct Table<'a> {
    caption: &'a str,
    header: Vec<&'a str>,
    rows: Vec<Vec<&'a str>>,
}

impl Table<'_> {
    /// Cell `name` of `row`, if the table has that column.
    fn cell<'r>(&self, row: &'r [&'r str], name: &str) -> Option<&'r str> {
        let column = self.header.iter().position(|h| *h == name)?;
        row.get(column).copied()
    }

    /// Cell `name` of `row` as a number.
    fn number(&self, row: &[&str], name: &str) -> Option<f64> {
        self.cell(row, name)?.parse().ok()
    }
}

/// The cells of a markdown table line.
fn cells(line: &str) -> Vec<&str> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(str::trim).collect()
}

/// Every markdown table in `text` (a `|` line, then a `| --- |` line, then rows); the
/// benchmark's progress lines, which a log of stdout and stderr together holds between
/// rows, are skipped.
fn tables(text: &str) -> Vec<Table<'_>> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !crate::progress::is_progress_line(line))
        .collect();
    let mut found = Vec::new();
    let mut caption = "";
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let separator = lines.get(i + 1).is_some_and(|next| {
            let next = next.trim();
            next.starts_with('|') && next.contains("---")
        });
        if line.starts_with('|') && separator {
            let mut table = Table {
                caption,
                header: cells(line),
                rows: Vec::new(),
            };
            i += 2;
            while i < lines.len() && lines[i].trim().starts_with('|') {
                table.rows.push(cells(lines[i]));
                i += 1;
            }
            found.push(table);
            continue;
        }
        if !line.is_empty() {
            caption = line;
        }
        i += 1;
    }
    found
}

/// Our rows from `gpuhash.log`: the slab hash's W1 (with its memory table for bytes a
/// pair) and DyHash's W1 for u32 keys and values.
fn read_ours(text: &str, run: &mut Run) {
    let tables = tables(text);
    let slab_memory = tables
        .iter()
        .find(|t| t.caption.starts_with("## slab-hash memory"));
    for table in &tables {
        if table.caption.starts_with("## slab-hash W1") {
            run.rows.extend(slab_rows(table, slab_memory));
        } else if table.caption.starts_with("W1:")
            && table.caption.contains("u32 keys and u32 values")
        {
            let d = table
                .caption
                .split(", ")
                .find_map(|part| part.strip_prefix("d = ")?.parse::<u64>().ok())
                .unwrap_or(3);
            // Logs of before the packed layout name none: their buckets were split.
            let (layout, suffix) = if table.caption.contains("packed buckets") {
                (BucketLayout::Packed, "")
            } else if table.caption.contains("split buckets") {
                (BucketLayout::Split, " split")
            } else {
                (BucketLayout::Split, "")
            };
            let slots = CuckooTable::<u32, u32>::bucket_slots(layout).unwrap_or(32) as u64;
            let system = format!("gpuhash DyHash d{d}{suffix}");
            run.rows.extend(
                table
                    .rows
                    .iter()
                    .filter_map(|r| dyhash_row(table, r, d * slots, &system)),
            );
        }
    }
    if !run.rows.iter().any(|r| r.side == Side::Ours) {
        run.problems
            .push("gpuhash.log: no slab-hash W1 or DyHash W1 (u32) table".to_string());
    }
}

/// A DyHash W1 row of `system`: load asked and built, buckets a subtable (`slots` pairs
/// of the whole table a bucket of each subtable), rates, table bytes a pair.
fn dyhash_row(table: &Table<'_>, row: &[&str], slots: u64, system: &str) -> Option<Row> {
    let buckets: u64 = table.cell(row, "buckets/subtable")?.parse().ok()?;
    let rate = |name: &str| table.number(row, name);
    Some(Row {
        system: system.to_string(),
        side: Side::Ours,
        asked: table.number(row, "load asked")?,
        built: table.number(row, "load built")?,
        capacity: buckets * slots,
        is_load: true,
        bytes_per_pair: table.number(row, "table bytes/pair"),
        rates: [
            rate("insert M ops/s"),
            rate("find hit M ops/s"),
            rate("find miss M ops/s"),
        ],
        // gpuhash-bench checks every answer and stops at a wrong one: a printed row had
        // no failures.
        failures: [Some(0); 3],
        note: "capacity = slots of the subtables".to_string(),
    })
}

/// What a slab hash W1 workload cell says: `slab hash OP, SIZING: B buckets, utilization
/// U` gives (OP, SIZING, B, U); other workloads (the LastCopy build) give `None`.
fn slab_workload(cell: &str) -> Option<(&str, &str, u64, f64)> {
    let (what, built) = cell.strip_prefix("slab hash ")?.split_once(": ")?;
    let (op, sizing) = what.rsplit_once(", ")?;
    let (buckets, utilization) = built.split_once(" buckets, utilization ")?;
    Some((op, sizing, buckets.parse().ok()?, utilization.parse().ok()?))
}

/// The slab hash rows of its W1 table, one a sizing; table bytes a pair from the memory
/// table's slabs in use (MiB) over the pairs.
fn slab_rows(table: &Table<'_>, memory: Option<&Table<'_>>) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for cells in &table.rows {
        let Some((op, sizing, buckets, utilization)) =
            table.cell(cells, "workload").and_then(slab_workload)
        else {
            continue;
        };
        let Some(op) = super::OPERATIONS
            .iter()
            .position(|o| *o == op || (op == "build" && *o == "insert"))
        else {
            continue;
        };
        let (kind, target) = match sizing.rsplit_once(' ') {
            Some((kind, target)) => (kind, target.parse::<f64>().ok()),
            None => continue,
        };
        let Some(target) = target else { continue };
        let short = if kind == "memory utilization" {
            "util"
        } else {
            "head"
        };
        let system = format!("gpuhash slab hash {short}");
        let pairs = table.number(cells, "items");
        let row = match rows
            .iter_mut()
            .find(|r| r.system == system && r.asked == target)
        {
            Some(row) => row,
            None => {
                let bytes_in_use = memory.and_then(|m| {
                    let line = m
                        .rows
                        .iter()
                        .find(|r| m.cell(r, "sizing") == Some(sizing))?;
                    m.number(line, "slabs in use")
                });
                rows.push(Row {
                    system,
                    side: Side::Ours,
                    asked: target,
                    built: utilization,
                    capacity: buckets,
                    is_load: short == "util",
                    bytes_per_pair: bytes_in_use
                        .zip(pairs)
                        .map(|(mib, pairs)| mib * f64::from(1 << 20) / pairs),
                    rates: [None; 3],
                    failures: [Some(0); 3],
                    note:
                        "load built = memory utilization measured (2 decimals); capacity = buckets"
                            .to_string(),
                });
                rows.last_mut().expect("just pushed")
            }
        };
        row.rates[op] = table.number(cells, "M items/s");
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_line_gives_every_field() {
        let row = anchor_row("cuco static_map DH cg4|0.90|0.8950|74981716|9533|15519|6110|0|0|0|")
            .unwrap();
        assert_eq!(row.system, "cuco static_map DH cg4");
        assert_eq!((row.asked, row.built, row.capacity), (0.9, 0.895, 74981716));
        assert_eq!(row.rates, [Some(9533.0), Some(15519.0), Some(6110.0)]);
        assert_eq!(row.failures, [Some(0); 3]);
        assert!((row.bytes_per_pair.unwrap() - 8.0 / 0.895).abs() < 1e-12);
        assert!(row.is_load && row.note.is_empty());
        // Not measured and not checked; a note holding the separator stays whole.
        let row = anchor_row("BGHT p2bht b16|0.95|0.9500|70640912|-1|-1|-1|20|-1|-1|a|b").unwrap();
        assert_eq!(row.rates, [None; 3]);
        assert_eq!(row.failures, [Some(20), None, None]);
        assert_eq!(row.note, "a|b");
        assert!(
            !anchor_row("SlabHash head|0.50|0.4667|8947849|1|2|3|-1|0|0|x")
                .unwrap()
                .is_load
        );
        // Short or garbled lines are refused, not guessed at.
        assert!(anchor_row("cuco|0.5|0.5|100|1|2|3").is_none());
        assert!(anchor_row("cuco|half|0.5|100|1|2|3|0|0|0|").is_none());
        assert!(anchor_row("|0.5|0.5|100|1|2|3|0|0|0|").is_none());
    }

    #[test]
    fn progress_lines_inside_a_table_are_skipped() {
        let text =
            "## W1\n| a | b |\n| --- | --- |\n[slab-hash] W1 (1/2), 0.0 s\n| 1 | 2 |\n| 3 | 4 |\n";
        let found = tables(text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rows.len(), 2);
    }

    #[test]
    fn tables_are_found_with_the_line_above_them() {
        let text = "intro\n\n## first\n| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 | 4 |\nafter\n| c |\n| --- |\n";
        let found = tables(text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].caption, "## first");
        assert_eq!(found[0].header, ["a", "b"]);
        assert_eq!(found[0].rows, [["1", "2"], ["3", "4"]]);
        assert_eq!(found[0].number(&found[0].rows[1], "b"), Some(4.0));
        assert_eq!(found[0].cell(&found[0].rows[1], "z"), None);
        assert_eq!(found[1].caption, "after");
        assert!(found[1].rows.is_empty());
    }

    #[test]
    fn dyhash_tables_name_their_bucket_layout() {
        let header = "| load asked | load built | buckets/subtable | insert M ops/s | find hit M ops/s | find miss M ops/s | table bytes/pair |\n| --- | --- | --- | --- | --- | --- | --- |\n| 0.90 | 0.9000 | 100 | 1 | 2 | 3 | 8.9 |\n";
        let text = format!(
            "W1: n = 2^26 pairs, u32 keys and u32 values, packed buckets, d = 3\n{header}\n\
             W1: n = 2^26 pairs, u32 keys and u32 values, split buckets, d = 3\n{header}\n\
             W1: n = 2^26 pairs, u32 keys and u32 values, d = 3\n{header}"
        );
        let mut run = Run::default();
        read_ours(&text, &mut run);
        let found: Vec<(&str, u64)> = run
            .rows
            .iter()
            .map(|r| (r.system.as_str(), r.capacity))
            .collect();
        // Packed buckets hold 16 pairs, split ones 32; logs of before the packed layout
        // name none and were split.
        assert_eq!(
            found,
            [
                ("gpuhash DyHash d3", 100 * 3 * 16),
                ("gpuhash DyHash d3 split", 100 * 3 * 32),
                ("gpuhash DyHash d3", 100 * 3 * 32),
            ]
        );
    }

    #[test]
    fn slab_workload_cells_are_split_and_others_refused() {
        assert_eq!(
            slab_workload(
                "slab hash find hit, head-slab load 0.9: 4971027 buckets, utilization 0.66"
            ),
            Some(("find hit", "head-slab load 0.9", 4971027, 0.66))
        );
        assert_eq!(
            slab_workload(
                "slab hash build, DuplicateKeys::LastCopy, memory utilization 0.5: 8314711 buckets, utilization 0.50"
            )
            .map(|w| w.0),
            Some("build, DuplicateKeys::LastCopy")
        );
        assert_eq!(slab_workload("slab hash G0 mix"), None);
    }
}
