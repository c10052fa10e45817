#!/usr/bin/env bash
# The anchors (public GPU hash tables timed on W1) beside gpuhash's own W1, in one run, as
# anchors.md and anchors.svg. See docs/benchmarks/README.md.
#
#   bash benches/anchors.sh prepare ANCHORS               # where the code is built
#   bash benches/anchors.sh run [--runs R] [--log2-n N]   # on the GPU host (defaults 5, 26)
#   bash benches/anchors.sh report [DIR]                  # anywhere: the report again
#
# prepare: copies the anchor harness folder ANCHORS (run.sh and bin/ with the *_bench
#   binaries) into target/anchors, builds gpuhash-bench (release) and puts it in
#   target/anchors/bin beside them. The GPU host needs this script and target/anchors.
# run: target/anchors/run.sh times the anchors and `gpuhash-bench slab-hash cuckoo` one
#   after the other, logging into $OUT (default target/anchors/out); then
#   `gpuhash-bench anchors` turns the logs into $OUT/anchors.md and $OUT/anchors.svg.
# report: the same report from the logs in DIR (default target/anchors/out), into DIR.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
anchors="$root/target/anchors"
bench="$anchors/bin/gpuhash-bench"

case ${1:-} in
  prepare)
    [[ $# == 2 && -f $2/run.sh && -d $2/bin ]] || {
      echo "usage: $0 prepare ANCHORS (a folder holding run.sh and bin/)" >&2
      exit 1
    }
    rm -rf "$anchors"
    cp -r "$2" "$anchors"
    chmod -R u+w "$anchors"
    cargo build --release -p gpuhash-bench --manifest-path "$root/Cargo.toml"
    cp "$root/target/release/gpuhash-bench" "$bench"
    echo "ready: $anchors"
    ;;
  run)
    shift
    OUT="${OUT:-$anchors/out}"
    # run.sh records each step's failure in its logs and goes on; the report shows them.
    OUT="$OUT" GPUHASH_BENCH="$bench" bash "$anchors/run.sh" "$@" || true
    "$bench" anchors --logs "$OUT" --out "$OUT"
    ;;
  report)
    dir="${2:-$anchors/out}"
    "$bench" anchors --logs "$dir" --out "$dir"
    ;;
  *)
    sed -n '2,15p' "$0" >&2
    exit 1
    ;;
esac
