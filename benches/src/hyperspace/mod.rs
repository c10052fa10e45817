//! W6's CPU side: the CPU hyperspace index (the baseline the GPU index is measured
//! against) and the W6 data and query generator.
//!
//! - [`cpu_index`]: the structure and bulk build, its chains in `shard`; [`cpu_search`]: key, attribute and
//!   conjunctive searches as CSR; [`cpu_update`]: modifies (bucket changes in GHSH's
//!   order) and deletes.
//! - [`workload`]: W6's tuples (n, p, cardinality, uniform or Zipf values), search,
//!   modify and delete batches, and the query mix that shifts halfway.
//!
//! The GPU side of W6 and the tables it prints are in `hyperspace_bench`.

pub mod cpu_index;
pub mod cpu_search;
pub mod cpu_update;
mod shard;
pub mod workload;

#[cfg(test)]
mod tests;
