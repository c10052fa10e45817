//! W6's data and queries: tuples of `p` attributes of a given cardinality, uniform or
//! Zipf-skewed, and batches of every operation, all deterministic from a seed.
//!
//! - Keys are the standard workload's (`KeySet::Hits`, distinct), a reserved word
//!   replaced by the key of the same index in `KeySet::Misses` (never a hit); values are
//!   the standard workload's `i + 1`.
//! - Attribute `i` takes `cardinality` distinct values, the value of rank `r` being
//!   `KeySet::Hits.key(r)`: uniform ranks, or Zipf ranks of exponent 1.0
//!   (`workload::zipf_keys`). Columns are made in chunks of 2^20 on all threads, each
//!   chunk from its own seed, so the data does not depend on the thread count.
//! - Searches ask for values that a random tuple holds (so every search matches at least
//!   one tuple, and under skew the frequent values are asked often, as they occur), by
//!   key, by one attribute, or by a conjunction; modifies give random held keys fresh
//!   attributes, each different from the old value (the bucket changes unless the hashes
//!   collide) and a new value; deletes name distinct held keys.
//! - The shifting mix: the first half of the batches search `(A1)` and `(A2)` in turn,
//!   the second half the conjunction `(A1, A3)` (`(A1, A2)` when `p = 2`).

use std::collections::HashSet;

use gpuhash_core::hash::fmix64;
use gpuhash_core::workload::{self, KeySet};
use gpuhash_hyperspace::cost::Population;
use gpuhash_hyperspace::shape::Field;
use gpuhash_test_support::SeededRng;

use super::cpu_index::{EMPTY, REMOVED, Tuples, for_chunks};
use super::cpu_search::{QueryBatch, column_prefix};

/// Values drawn from one seed.
const CHUNK: usize = 1 << 20;

/// How attribute values are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skew {
    /// Every value equally likely.
    Uniform,
    /// Value of rank `r` drawn with probability about proportional to `1 / (r + 1)`.
    Zipf,
}

/// One W6 data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Tuples.
    pub tuples: usize,
    /// Attributes of a tuple.
    pub attributes: usize,
    /// Distinct values of each attribute (100, 10^4, 10^5 in W6).
    pub cardinality: u32,
    /// How values are drawn.
    pub skew: Skew,
    /// Everything follows from it.
    pub seed: u64,
}

impl Spec {
    /// What the cost model should know of this data: the tuple count and each attribute's
    /// cardinality.
    pub fn population(&self) -> Population {
        Population::with_distinct(
            self.tuples as u64,
            &vec![u64::from(self.cardinality); self.attributes],
        )
    }
}

/// The key of tuple `i`: the standard workload's, a reserved word replaced.
pub fn key(i: u32) -> u32 {
    match KeySet::Hits.key(i) {
        EMPTY | REMOVED => KeySet::Misses.key(i),
        key => key,
    }
}

/// The value of rank `rank` of an attribute.
pub fn attribute_value(rank: u32) -> u32 {
    KeySet::Hits.key(rank)
}

/// `count` attribute values of `spec` from seed `seed`.
fn draw(spec: &Spec, count: usize, seed: u64) -> Vec<u32> {
    match spec.skew {
        Skew::Uniform => {
            let mut rng = SeededRng::new(seed);
            (0..count)
                .map(|_| attribute_value((rng.next_u64() % u64::from(spec.cardinality)) as u32))
                .collect()
        }
        Skew::Zipf => workload::zipf_keys(count, spec.cardinality, seed),
    }
}

/// The tuples of `spec`, generated on `threads` threads.
pub fn tuples(spec: &Spec, threads: usize) -> Tuples {
    let n = spec.tuples;
    let chunks = n.div_ceil(CHUNK);
    let columns: Vec<Vec<u32>> = for_chunks(spec.attributes * chunks, threads, |range| {
        range
            .map(|job| {
                let (attribute, chunk) = (job / chunks, job % chunks);
                let len = CHUNK.min(n - chunk * CHUNK);
                let seed = fmix64(spec.seed ^ ((attribute as u64) << 40) ^ chunk as u64);
                draw(spec, len, seed)
            })
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect();
    Tuples {
        keys: (0..n as u32).map(key).collect(),
        attributes: columns.concat(),
        values: (0..n as u32).map(workload::value).collect(),
    }
}

/// `count` random tuple indices below `n` (repeats allowed).
fn sample(n: usize, count: usize, seed: u64) -> Vec<usize> {
    let mut rng = SeededRng::new(seed);
    (0..count)
        .map(|_| (rng.next_u64() % n as u64) as usize)
        .collect()
}

/// `count` distinct random tuple indices below `n` (at most `n`).
fn sample_distinct(n: usize, count: usize, seed: u64) -> Vec<usize> {
    let mut rng = SeededRng::new(seed);
    let count = count.min(n);
    let mut seen = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let i = (rng.next_u64() % n as u64) as usize;
        if seen.insert(i) {
            out.push(i);
        }
    }
    out
}

/// `count` searches naming `fields`, each asking for the values a random tuple holds.
pub fn queries(data: &Tuples, fields: &[Field], count: usize, seed: u64) -> QueryBatch {
    let n = data.len();
    let p = data.attributes.len() / n.max(1);
    let picked = sample(n.max(1), count, seed);
    let values = fields
        .iter()
        .flat_map(|&field| {
            picked.iter().map(move |&t| match field {
                Field::Key => data.keys[t],
                Field::Attribute(i) => data.field(p, usize::from(i) + 1, t),
            })
        })
        .collect();
    QueryBatch {
        fields: fields.to_vec(),
        values,
    }
}

/// A modify batch: `count` distinct held keys, each with new attributes (column-major,
/// every one different from the old) and a new value.
pub struct Modifies {
    /// The keys.
    pub keys: Vec<u32>,
    /// The new attributes, column-major.
    pub attributes: Vec<u32>,
    /// The new values.
    pub values: Vec<u32>,
}

impl Modifies {
    /// The first `count` modifies (all of them when there are fewer).
    pub fn prefix(&self, count: usize) -> Modifies {
        let rows = self.keys.len();
        let count = count.min(rows);
        Modifies {
            keys: self.keys[..count].to_vec(),
            attributes: column_prefix(&self.attributes, rows, count),
            values: self.values[..count].to_vec(),
        }
    }
}

/// `count` modifies of `spec`'s tuples `data`, every attribute moved to another value.
pub fn modifies(spec: &Spec, data: &Tuples, count: usize, seed: u64) -> Modifies {
    let p = spec.attributes;
    let picked = sample_distinct(data.len(), count, seed);
    let q = picked.len();
    let mut attributes = Vec::with_capacity(p * q);
    for a in 0..p {
        let fresh = draw(spec, q, fmix64(seed ^ (a as u64 + 1)));
        let mut redraw = SeededRng::new(fmix64(!seed ^ a as u64));
        attributes.extend(picked.iter().zip(fresh).map(|(&t, value)| {
            let old = data.field(p, a + 1, t);
            if value != old {
                return value;
            }
            if spec.cardinality == 1 {
                return !old;
            }
            // The draw repeated the old value: another one, uniformly.
            loop {
                let rank = redraw.next_u64() % u64::from(spec.cardinality);
                let other = attribute_value(rank as u32);
                if other != old {
                    break other;
                }
            }
        }));
    }
    Modifies {
        keys: picked.iter().map(|&t| data.keys[t]).collect(),
        attributes,
        values: picked
            .iter()
            .map(|&t| data.values[t] ^ 0x8000_0000)
            .collect(),
    }
}

/// `count` distinct held keys to delete.
pub fn deletes(data: &Tuples, count: usize, seed: u64) -> Vec<u32> {
    sample_distinct(data.len(), count, seed)
        .into_iter()
        .map(|t| data.keys[t])
        .collect()
}

/// The shifting mix: `batches` batches of `count` searches, the first half `(A1)` and
/// `(A2)` in turn, the second half `(A1, A3)` (`(A1, A2)` for two attributes).
pub fn shifting_mix(
    data: &Tuples,
    p: usize,
    batches: usize,
    count: usize,
    seed: u64,
) -> Vec<QueryBatch> {
    let (a1, a2, a3) = (
        Field::Attribute(0),
        Field::Attribute(1),
        Field::Attribute(2),
    );
    let pair = if p >= 3 { [a1, a3] } else { [a1, a2] };
    (0..batches)
        .map(|b| {
            let fields: &[Field] = if b >= batches / 2 {
                &pair
            } else if b % 2 == 0 {
                &[a1]
            } else {
                &[a2]
            };
            queries(data, fields, count, fmix64(seed ^ b as u64))
        })
        .collect()
}
