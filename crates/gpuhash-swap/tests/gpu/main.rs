//! GPU tests of the swap table: the contract's conformance suite with children paging on
//! every batch (`conformance`), answers against `HashMap` models across evictions, probing
//! and paging, filters and budgets (`paging`), the overlapped pipeline (`pipeline`),
//! failed inserts and removals taken back (`undo`, with children that fail on demand:
//! `faulty`), inserts and removals of many segments taking passes (`passes`), paging
//! passes of two children a group, the next brought in ahead (`prefetch`), and the public
//! partition by a spread of any seed (`partition`).
//!
//! Every test is small (tables of 2^14 pairs in 8 children, 2 resident, 4 in `prefetch`)
//! and runs alone:
//! `cargo test -p gpuhash-swap --test gpu -- --ignored --exact pipeline::NAME`.

mod common;
mod conformance;
mod faulty;
mod paging;
mod partition;
mod passes;
mod pipeline;
mod prefetch;
mod undo;
