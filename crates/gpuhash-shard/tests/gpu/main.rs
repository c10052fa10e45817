//! GPU tests of the sharded table: the contract's conformance suites (maps, combining
//! maps) on a communicator of one (`one_rank`), which every GPU run has, both without NCCL
//! and through it (rank 0 of 1, the several-process path with no peer); on every GPU the
//! driver sees, with keys that load one shard, batches from another GPU than rank 0's and
//! one GPU's memory full (`many_ranks`); and one table over several processes, one a GPU
//! (`processes`: the test binary starts itself again once a GPU). Tests over several GPUs
//! print a note and pass where fewer than two are visible.
//!
//! NCCL: `libnccl.so.2` on `LD_LIBRARY_PATH`, and `NCCL_NVLS_ENABLE=0` over several GPUs
//! (docs/gpu-testing.md); the `one_rank::*through_nccl*` tests print a note and pass
//! without the library. Each test runs alone:
//! `cargo test -p gpuhash-shard --test gpu -- --ignored --exact many_ranks::NAME`.

mod many_ranks;
mod one_rank;
mod processes;
