//! `gpu-test`: one folder, `target/gpu-bundle/`, holding every test binary and the
//! benchmark built in release mode, with the scripts that run them on a GPU machine
//! that has no Rust toolchain. See `docs/gpu-testing.md`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::workspace;

/// The bundle must travel to the GPU machine in one copy of at most 64 MiB.
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

/// Builds the bundle and prints its size.
pub fn build() -> Result<(), String> {
    let bundle = workspace::root().join("target/gpu-bundle");
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle)
            .map_err(|e| format!("cannot clear {}: {e}", bundle.display()))?;
    }
    let tests_dir = bundle.join("tests");
    std::fs::create_dir_all(&tests_dir)
        .map_err(|e| format!("cannot create {}: {e}", tests_dir.display()))?;

    // The build-time crates have no GPU test; leaving them out keeps the bundle small.
    let tests = cargo_executables(
        &[
            "test",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "gpuhash-kernel-build",
            "--no-run",
        ],
        true,
    )?;
    for test in &tests {
        copy_executable(test, &tests_dir.join(workspace::file_name(test)))?;
    }
    let bench = cargo_executables(&["build", "--package", "gpuhash-bench"], false)?;
    for binary in &bench {
        copy_executable(binary, &bundle.join(workspace::file_name(binary)))?;
    }
    write_script(&bundle.join("run-tests.sh"), RUN_TESTS)?;
    write_script(&bundle.join("run-bench.sh"), RUN_BENCH)?;

    let size: u64 = workspace::files_under(&bundle)?
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    println!(
        "bundle {}: {} test binaries, benchmark, {:.1} MiB",
        workspace::relative(&bundle),
        tests.len(),
        size as f64 / f64::from(1 << 20)
    );
    if size > MAX_BUNDLE_BYTES {
        return Err(format!(
            "the bundle is {size} bytes, over the 64 MiB that travels to a GPU machine"
        ));
    }
    Ok(())
}

/// Runs `cargo <args> --release --message-format=json` and returns the executables it
/// reports, only test harnesses when `tests` is set.
fn cargo_executables(args: &[&str], tests: bool) -> Result<Vec<PathBuf>, String> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace::root())
        .args(args)
        .args(["--release", "--message-format=json-render-diagnostics"])
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
        .filter(|line| is_test_profile(line) == tests)
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
    use super::{is_test_profile, json_string};

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
    }
}
