//! GPU tests of the sharded table: the contract's conformance suite on a communicator of
//! one (`one_rank`), which every GPU run has, and on every GPU the driver sees, with keys
//! that load one shard, batches from another GPU than rank 0's and one GPU's memory full
//! (`many_ranks`, which print a note and pass where fewer than two GPUs are visible).
//!
//! Several GPUs need NCCL: `libnccl.so.2` on `LD_LIBRARY_PATH`, and `NCCL_NVLS_ENABLE=0`
//! (docs/gpu-testing.md). Each test runs alone:
//! `cargo test -p gpuhash-shard --test gpu -- --ignored --exact many_ranks::NAME`.

mod many_ranks;
mod one_rank;
