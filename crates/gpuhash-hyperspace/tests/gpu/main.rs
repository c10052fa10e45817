//! The hyperspace index on a real GPU, held against a host model (a map of tuples,
//! scanned for searches), on random and adversarial inputs: one test binary for all, so
//! that the GPU test bundle stays small. Run on a GPU machine with `--include-ignored`
//! (see docs/gpu-testing.md).

mod adaptive;
mod build;
mod column_scan;
mod common;
mod concurrency;
mod contract;
mod device_forms;
mod operations;
mod reclaim;
mod regroup;
mod sequences;
