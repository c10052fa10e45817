//! `gpu-test`: two folders for a GPU machine that has no Rust toolchain, each with the
//! scripts that run what it holds, built in release mode: `target/gpu-bundle/`, every test
//! binary and the benchmark command, and `target/gpu-bench-bundle/`, the criterion
//! benchmarks. Each folder is also packed into a gzip archive beside it
//! (`target/gpu-bundle.tar.gz`), the form that travels, which must stay within 64 MiB. See
//! `docs/gpu-testing.md`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::workspace;

/// Each folder's archive must travel to the GPU machine in one copy of at most 64 MiB.
const MAX_BUNDLE_BYTES: u64 = 64 << 20;

const RUN_TESTS: &str = r#"#!/usr/bin/env bash
# Runs every test binary of this bundle with the GPU tests included, then prints one
# summary line; exits non-zero if any test or binary failed.
set -u
cd "$(dirname "$0")"
passed=0; failed=0; ignored=0; broken=()
log=$(mktemp)
for binary in tests/*; do
  echo "=== $binary"
  "./$binary" --include-ignored "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  while read -r p f i; do
    passed=$((passed + p)); failed=$((failed + f)); ignored=$((ignored + i))
  done < <(sed -n 's/^test result: .*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' "$log")
  [ "$status" -eq 0 ] || broken+=("$binary")
done
rm -f "$log"
echo
[ ${#broken[@]} -eq 0 ] || echo "failing binaries: ${broken[*]}"
echo "gpu-test: $passed passed, $failed failed, $ignored ignored"
[ ${#broken[@]} -eq 0 ] && [ "$failed" -eq 0 ]
"#;

const RUN_BENCH: &str = r#"#!/usr/bin/env bash
# Runs the benchmark command of gpuhash; arguments go to it unchanged.
cd "$(dirname "$0")" && exec ./gpuhash-bench "$@"
"#;

const RUN_CRITERION: &str = r#"#!/usr/bin/env bash
# Runs every criterion benchmark of this folder in benchmark mode; arguments go to each
# unchanged (a name filter, --sample-size N, --save-baseline NAME, ...). n = 2^22 pairs
# unless GPUHASH_BENCH_LOG2_N says otherwise. Reports, history and HTML plots go to
# $CRITERION_HOME, by default criterion/ in the current directory
# (criterion/report/index.html). Exits non-zero if any benchmark failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export CRITERION_HOME="${CRITERION_HOME:-$PWD/criterion}"
status=0
for bench in "$here"/benches/*; do
  "$bench" --bench "$@" || status=1
done
exit $status
"#;

/// Builds both folders and prints their sizes.
pub fn build() -> Result<(), String> {
    let bundle = fresh_folder("target/gpu-bundle")?;
    let tests_dir = bundle.join("tests");
    std::fs::create_dir_all(&tests_dir)
        .map_err(|e| format!("cannot create {}: {e}", tests_dir.display()))?;
    // The build-time crates have no GPU test; leaving them out keeps the bundle small.
    let tests = cargo_executables(
        &[
            "test",
            "--release",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "gpuhash-kernel-build",
            "--no-run",
        ],
        is_test_profile,
    )?;
    for test in &tests {
        copy_executable(test, &tests_dir.join(workspace::file_name(test)))?;
    }
    let bench = cargo_executables(
        &["build", "--release", "--package", "gpuhash-bench"],
        |line| !is_test_profile(line),
    )?;
    for binary in &bench {
        copy_executable(binary, &bundle.join(workspace::file_name(binary)))?;
    }
    write_script(&bundle.join("run-tests.sh"), RUN_TESTS)?;
    write_script(&bundle.join("run-bench.sh"), RUN_BENCH)?;
    pack(
        &bundle,
        &format!("{} test binaries, benchmark", tests.len()),
    )?;

    let bench_bundle = fresh_folder("target/gpu-bench-bundle")?;
    let benches_dir = bench_bundle.join("benches");
    std::fs::create_dir_all(&benches_dir)
        .map_err(|e| format!("cannot create {}: {e}", benches_dir.display()))?;
    // `cargo bench` builds with the bench profile, which is the release profile.
    let benches = cargo_executables(
        &[
            "bench",
            "--package",
            "gpuhash-bench",
            "--benches",
            "--no-run",
        ],
        is_bench_target,
    )?;
    for bench in &benches {
        let name = workspace::file_name(bench);
        copy_executable(bench, &benches_dir.join(without_hash(&name)))?;
    }
    write_script(&bench_bundle.join("run-criterion.sh"), RUN_CRITERION)?;
    pack(
        &bench_bundle,
        &format!("{} criterion benchmarks", benches.len()),
    )
}

/// The folder `path` (relative to the workspace root), emptied if it was there.
fn fresh_folder(path: &str) -> Result<PathBuf, String> {
    let folder = workspace::root().join(path);
    if folder.exists() {
        std::fs::remove_dir_all(&folder)
            .map_err(|e| format!("cannot clear {}: {e}", folder.display()))?;
    }
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    Ok(folder)
}

/// Packs `folder`, holding `what`, into `<folder>.tar.gz` beside it, prints the sizes of
/// both, and fails if the archive is too large to travel.
fn pack(folder: &Path, what: &str) -> Result<(), String> {
    let size: u64 = workspace::files_under(folder)?
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let archive = folder.with_extension("tar.gz");
    let name = workspace::file_name(folder);
    let parent = folder.parent().ok_or("a bundle folder has a parent")?;
    let status = Command::new("tar")
        .current_dir(parent)
        .arg("-czf")
        .arg(&archive)
        .arg(&name)
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    if !status.success() {
        return Err(format!(
            "tar could not pack {}",
            workspace::relative(folder)
        ));
    }
    let packed = std::fs::metadata(&archive)
        .map_err(|e| format!("cannot read {}: {e}", archive.display()))?
        .len();
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    println!(
        "bundle {}: {what}, {:.1} MiB ({} {:.1} MiB)",
        workspace::relative(folder),
        mib(size),
        workspace::relative(&archive),
        mib(packed)
    );
    if packed > MAX_BUNDLE_BYTES {
        return Err(format!(
            "{} is {packed} bytes, over the 64 MiB that travels to a GPU machine",
            workspace::relative(&archive)
        ));
    }
    Ok(())
}

/// Runs `cargo <args> --message-format=json` and returns the executables it reports
/// whose artifact message passes `keep`.
fn cargo_executables(args: &[&str], keep: fn(&str) -> bool) -> Result<Vec<PathBuf>, String> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace::root())
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!("cargo {} failed", args.join(" ")));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut executables: Vec<PathBuf> = stdout
        .lines()
        .filter(|line| line.contains(r#""reason":"compiler-artifact""#))
        .filter(|line| keep(line))
        .filter_map(|line| json_string(line, "executable"))
        .map(PathBuf::from)
        .collect();
    executables.sort();
    executables.dedup();
    Ok(executables)
}

/// The string value of `"key":"..."` in one line of cargo's JSON (paths hold no quotes).
fn json_string(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!(r#""{key}":""#))? + key.len() + 4;
    let end = line[start..].find('"')? + start;
    Some(line[start..end].to_string())
}

/// Whether a cargo artifact message is of a bench target (`benches/*.rs`), not a binary or
/// library built as a bench harness.
fn is_bench_target(line: &str) -> bool {
    line.contains(r#""kind":["bench"]"#)
}

/// An executable's name without the hash cargo appends: `tables-1a2b` becomes `tables`.
fn without_hash(name: &str) -> &str {
    name.rsplit_once('-').map_or(name, |(stem, _)| stem)
}

/// Whether a cargo artifact message was built with the test profile (its target's own
/// `"test"` flag only says the target could be tested).
fn is_test_profile(line: &str) -> bool {
    line.split(r#""profile":{"#)
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .is_some_and(|profile| profile.contains(r#""test":true"#))
}

fn copy_executable(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn write_script(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    workspace::write(path, text.as_bytes())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::{is_bench_target, is_test_profile, json_string, without_hash};

    #[test]
    fn reads_the_executable_of_a_cargo_message() {
        let line = r#"{"reason":"compiler-artifact","profile":{"test":true},"executable":"/t/release/deps/core-1a2b","fresh":true}"#;
        assert_eq!(
            json_string(line, "executable").as_deref(),
            Some("/t/release/deps/core-1a2b")
        );
        assert_eq!(json_string(r#"{"executable":null}"#, "executable"), None);
        assert!(is_test_profile(line));
        let binary = r#"{"target":{"kind":["bin"],"test":true},"profile":{"opt_level":"3","test":false},"executable":"/b"}"#;
        assert!(!is_test_profile(binary));
        assert!(!is_bench_target(binary));
        let bench = r#"{"target":{"kind":["bench"],"name":"tables"},"executable":"/t/tables-9f"}"#;
        assert!(is_bench_target(bench));
    }

    #[test]
    fn strips_the_hash_of_an_executable_name() {
        assert_eq!(without_hash("tables-c211e3dabf2e2bc7"), "tables");
        assert_eq!(without_hash("table-bench-c211"), "table-bench");
        assert_eq!(without_hash("plain"), "plain");
    }
}
