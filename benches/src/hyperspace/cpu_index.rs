//! The CPU hyperspace index, W6's baseline: GHSH's structure on every core of the host.
//!
//! The GHSH paper compares its GPU index with a CPU hyperspace hash on OpenMP threads
//! (section 6.2); this is that baseline, with `std::thread::scope` threads. It keeps the
//! logical structure of the GPU index (gpuhash-hyperspace):
//!
//! - a key index (the key its only dimension) and attribute subspaces, each a
//!   [`SpaceShape`] whose buckets are the cells of its grid, each holding every tuple;
//! - the coordinate of a field is the top `bits` bits of `fmix32(value ^ seed)`, a seed per
//!   field; a bucket's id is the coordinates concatenated in dimension order;
//! - per bucket a chain of super nodes: `p + 2` nodes of 32 words (key node, one node per
//!   attribute, value node), 31 slots each, slot `s` of every node of a super node the same
//!   tuple; the key node's last word links the next super node. A slot is valid when its
//!   key is neither [`EMPTY`] nor [`REMOVED`]; a delete writes [`REMOVED`], an insert
//!   appends at the chain's tail.
//!
//! Each space's buckets are cut into shards, contiguous ranges of buckets, one a thread,
//! each with its own node array: a bulk build partitions the tuples by shard and each
//! thread builds its shard alone (counting sort by bucket, whole nodes filled, a bucket's
//! nodes contiguous); modifies and deletes group their items by shard the same way. Searches
//! read only, and share the queries of a batch among the threads in small chunks taken in
//! turn, so that a few costly queries (skewed values) do not hold one thread up.
//!
//! A search runs in the space [`best_space`] names (the key index for a key search) and
//! scans, in each bucket it touches, the chain of the named field with the most distinct
//! values the [`Population`] knows of (the key, if named; else the first such attribute),
//! then checks the other named fields on the matching slots. Results are CSR, like the
//! multimap's `get_all`: counts, offsets (one more than the queries) and the matching
//! tuples, the order within one query's row unspecified.
//!
//! Host batches are column-major: `attributes[i * n + t]` is attribute `i` of tuple `t`.

use std::fmt;
use std::ops::Range;

use gpuhash_core::hash::fmix32;
use gpuhash_hyperspace::cost::{Population, best_space};
use gpuhash_hyperspace::shape::{Field, FieldSet, MAX_ATTRIBUTES, SpaceShape};

use super::shard::{Shard, is_valid};

/// The key of an empty slot (and the link of a chain's last super node).
pub const EMPTY: u32 = u32::MAX;
/// The key of a deleted slot.
pub const REMOVED: u32 = u32::MAX - 1;
/// Slots of a node.
pub const SLOTS: usize = 31;
/// Words of a node: 31 slots and the link lane.
pub(super) const NODE_WORDS: usize = 32;
/// The link lane of a key node.
pub(super) const LINK: usize = 31;
/// No node.
pub(super) const NONE: u32 = u32::MAX;

/// Bad input to the CPU index; the index is unchanged by a batch that fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuIndexError {
    /// The attribute count is not in `1..=MAX_ATTRIBUTES`.
    AttributeCount(usize),
    /// Columns of a batch have lengths that do not agree.
    LengthMismatch {
        /// Which columns.
        what: &'static str,
        /// The length expected.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A key is one of the reserved words [`EMPTY`] and [`REMOVED`].
    ReservedKey(u32),
    /// A key appears twice in a build or modify batch.
    DuplicateKey(u32),
    /// A query batch names no field, a field twice, or a field the tuples lack.
    BadFields(Vec<Field>),
    /// A subspace has the key as a dimension, or the spaces are not a key index and
    /// attribute subspaces.
    BadSpaces,
}

impl fmt::Display for CpuIndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuIndexError::AttributeCount(p) => {
                write!(f, "a tuple has 1 to {MAX_ATTRIBUTES} attributes, not {p}")
            }
            CpuIndexError::LengthMismatch {
                what,
                expected,
                got,
            } => write!(f, "{what}: expected length {expected}, got {got}"),
            CpuIndexError::ReservedKey(key) => write!(f, "key {key:#x} is reserved"),
            CpuIndexError::DuplicateKey(key) => write!(f, "key {key:#x} appears twice"),
            CpuIndexError::BadFields(fields) => write!(f, "a query cannot name {fields:?}"),
            CpuIndexError::BadSpaces => write!(
                f,
                "spaces must be a key index over the key alone and subspaces over attributes, \
                 the key only as a subspace's last dimension"
            ),
        }
    }
}

impl std::error::Error for CpuIndexError {}

/// Tuples as host columns: `keys` and `values` n long, `attributes` column-major, `p * n`
/// long.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tuples {
    /// The keys.
    pub keys: Vec<u32>,
    /// Attribute `i` of tuple `t` at `i * n + t`.
    pub attributes: Vec<u32>,
    /// The values.
    pub values: Vec<u32>,
}

impl Tuples {
    /// How many tuples.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Checks the columns' lengths for `p` attributes.
    pub(super) fn check(&self, p: usize) -> Result<(), CpuIndexError> {
        let n = self.keys.len();
        check_len("values", n, self.values.len())?;
        check_len("attributes", p * n, self.attributes.len())
    }

    /// Field column `column` (0 the key, `1..=p` the attributes, `p + 1` the value) of
    /// tuple `t`, for `p` attributes.
    pub(super) fn field(&self, p: usize, column: usize, t: usize) -> u32 {
        match column {
            0 => self.keys[t],
            c if c <= p => self.attributes[(c - 1) * self.keys.len() + t],
            _ => self.values[t],
        }
    }

    /// Tuple `t` as `p + 2` words: key, attributes, value.
    #[cfg(test)]
    pub(super) fn row(&self, p: usize, t: usize) -> Vec<u32> {
        (0..p + 2).map(|c| self.field(p, c, t)).collect()
    }
}

/// Checks that a column has the length expected.
pub(super) fn check_len(
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), CpuIndexError> {
    if expected == got {
        Ok(())
    } else {
        Err(CpuIndexError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

/// The column of a field in a row: 0 the key, `i + 1` attribute `i`.
pub(super) fn column_of(field: Field) -> usize {
    match field {
        Field::Key => 0,
        Field::Attribute(i) => usize::from(i) + 1,
    }
}

/// The coordinate of `value` on a dimension of `bits` bits whose seed is `seed`.
pub(super) fn coordinate(value: u32, seed: u32, bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        fmix32(value ^ seed) >> (32 - bits)
    }
}

/// The hash seed of a field's dimension, the same in every space.
fn seed_of(column: usize) -> u32 {
    fmix32(0x9e37_79b9_u32.wrapping_mul(column as u32 + 1))
}

/// One dimension of a space, ready to hash.
#[derive(Clone, Debug)]
pub(super) struct Dimension {
    /// The field's column in a row.
    pub(super) column: usize,
    /// Coordinate bits.
    pub(super) bits: u32,
    /// Hash seed.
    pub(super) seed: u32,
}

/// One space: its shape, hashing and shards.
#[derive(Clone, Debug)]
pub(super) struct Space {
    pub(super) shape: SpaceShape,
    pub(super) dimensions: Vec<Dimension>,
    /// Buckets of each shard (the last may have fewer).
    pub(super) per_shard: usize,
    pub(super) shards: Vec<Shard>,
    /// Words of a super node: `(p + 2) * 32`.
    pub(super) stride: usize,
}

impl Space {
    /// An empty space of `shape` for tuples of `p` attributes, with up to `threads` shards.
    fn empty(shape: SpaceShape, p: usize, threads: usize) -> Space {
        let dimensions = shape
            .dimensions()
            .iter()
            .map(|&(field, bits)| Dimension {
                column: column_of(field),
                bits: u32::from(bits),
                seed: seed_of(column_of(field)),
            })
            .collect();
        let buckets = shape.bucket_count() as usize;
        let shard_count = threads.clamp(1, buckets);
        let per_shard = buckets.div_ceil(shard_count);
        let shards = (0..shard_count)
            .map(|s| {
                let len = per_shard.min(buckets - s * per_shard);
                Shard {
                    heads: vec![NONE; len],
                    tails: vec![NONE; len],
                    nodes: Vec::new(),
                }
            })
            .collect();
        Space {
            shape,
            dimensions,
            per_shard,
            shards,
            stride: (p + 2) * NODE_WORDS,
        }
    }

    /// The bucket of a tuple whose field of column `c` is `field(c)`.
    pub(super) fn bucket(&self, field: impl Fn(usize) -> u32) -> usize {
        self.dimensions.iter().fold(0usize, |id, d| {
            (id << d.bits) | coordinate(field(d.column), d.seed, d.bits) as usize
        })
    }

    /// The shard of a bucket and its index there.
    pub(super) fn locate(&self, bucket: usize) -> (usize, usize) {
        (bucket / self.per_shard, bucket % self.per_shard)
    }

    /// Bytes of its nodes and bucket heads.
    fn memory(&self) -> usize {
        self.shards
            .iter()
            .map(|s| 4 * (s.nodes.len() + s.heads.len() + s.tails.len()))
            .sum()
    }

    /// Fills the space, empty, with `tuples` (all valid), on `threads` threads.
    fn build(&mut self, tuples: &Tuples, p: usize, threads: usize) {
        let shard_count = self.shards.len();
        // Each chunk of tuples split by shard, chunks in order so the result is the same
        // for any thread count.
        let parts: Vec<Vec<Vec<(u32, u32)>>> = for_chunks(tuples.len(), threads, |range| {
            let mut by_shard = vec![Vec::new(); shard_count];
            for t in range {
                let (shard, local) = self.locate(self.bucket(|c| tuples.field(p, c, t)));
                by_shard[shard].push((local as u32, t as u32));
            }
            by_shard
        });
        let stride = self.stride;
        std::thread::scope(|scope| {
            for (s, shard) in self.shards.iter_mut().enumerate() {
                let parts = &parts;
                scope.spawn(move || {
                    let items = parts.iter().flat_map(|chunk| chunk[s].iter().copied());
                    shard.fill(items, tuples, p, stride);
                });
            }
        });
    }

    /// Every valid tuple, in shard and chain order, each shard read on a thread of its own.
    fn tuples(&self, p: usize) -> Tuples {
        let parts: Vec<Vec<Vec<u32>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .shards
                .iter()
                .map(|shard| scope.spawn(move || shard.columns(p, self.stride)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a shard reader does not panic"))
                .collect()
        });
        let column = |c: usize| parts.iter().flat_map(move |part| part[c].iter().copied());
        Tuples {
            keys: column(0).collect(),
            attributes: (1..=p).flat_map(column).collect(),
            values: column(p + 1).collect(),
        }
    }
}

/// Runs `work` on `threads` contiguous chunks of `0..n` at once and returns the results in
/// chunk order.
pub(super) fn for_chunks<T: Send>(
    n: usize,
    threads: usize,
    work: impl Fn(Range<usize>) -> T + Sync,
) -> Vec<T> {
    let chunks = threads.clamp(1, n.max(1));
    let size = n.div_ceil(chunks);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..chunks)
            .map(|c| {
                let work = &work;
                let range = (c * size).min(n)..((c + 1) * size).min(n);
                scope.spawn(move || work(range))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker does not panic"))
            .collect()
    })
}

/// The CPU hyperspace index: a key index and attribute subspaces (see the module docs).
#[derive(Clone, Debug)]
pub struct CpuHyperspace {
    pub(super) attributes: usize,
    pub(super) threads: usize,
    pub(super) population: Population,
    pub(super) len: usize,
    /// The key index first, then the attribute subspaces.
    pub(super) spaces: Vec<Space>,
}

impl CpuHyperspace {
    /// Builds the index of `tuples` over `attributes` attributes with the key index
    /// `key_index` (the key its only dimension) and the attribute subspaces `subspaces`,
    /// on `threads` threads. `population` tells the cost model which space answers a
    /// search (its tuple count is set to the tuples'). Fails on bad lengths or spaces, a
    /// reserved key or a key twice.
    pub fn build(
        attributes: usize,
        tuples: &Tuples,
        key_index: SpaceShape,
        subspaces: Vec<SpaceShape>,
        population: Population,
        threads: usize,
    ) -> Result<CpuHyperspace, CpuIndexError> {
        if !(1..=MAX_ATTRIBUTES).contains(&attributes) {
            return Err(CpuIndexError::AttributeCount(attributes));
        }
        tuples.check(attributes)?;
        check_spaces(&key_index, &subspaces, attributes)?;
        if let Some(&key) = tuples.keys.iter().find(|&&k| !is_valid(k)) {
            return Err(CpuIndexError::ReservedKey(key));
        }
        let threads = threads.max(1);
        let mut key_space = Space::empty(key_index, attributes, threads);
        key_space.build(tuples, attributes, threads);
        if let Some(key) = first_duplicate(&key_space) {
            return Err(CpuIndexError::DuplicateKey(key));
        }
        let mut index = CpuHyperspace {
            attributes,
            threads,
            population: Population {
                tuples: tuples.len() as u64,
                ..population
            },
            len: tuples.len(),
            spaces: vec![key_space],
        };
        index.build_subspaces(tuples, subspaces);
        Ok(index)
    }

    fn build_subspaces(&mut self, tuples: &Tuples, subspaces: Vec<SpaceShape>) {
        self.spaces.truncate(1);
        for shape in subspaces {
            let mut space = Space::empty(shape, self.attributes, self.threads);
            space.build(tuples, self.attributes, self.threads);
            self.spaces.push(space);
        }
    }

    /// Tuples held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Attributes of a tuple.
    #[cfg(test)]
    pub fn attributes(&self) -> usize {
        self.attributes
    }

    /// The shapes of the spaces, the key index first.
    pub fn shapes(&self) -> Vec<SpaceShape> {
        self.spaces.iter().map(|s| s.shape.clone()).collect()
    }

    /// Bytes of nodes and bucket heads in all spaces.
    pub fn memory(&self) -> usize {
        self.spaces.iter().map(Space::memory).sum()
    }

    /// Every tuple, read from the key index, in no particular order.
    pub fn tuples(&self) -> Tuples {
        self.spaces[0].tuples(self.attributes)
    }

    /// Replaces the attribute subspaces with `subspaces`, rebuilt from the key index (which
    /// never moves). Fails, changing nothing, on bad spaces.
    pub fn regroup(&mut self, subspaces: Vec<SpaceShape>) -> Result<(), CpuIndexError> {
        check_spaces(&self.spaces[0].shape, &subspaces, self.attributes)?;
        let tuples = self.tuples();
        self.build_subspaces(&tuples, subspaces);
        Ok(())
    }

    /// The index of the space a search naming `named` runs in.
    pub(super) fn space_for(&self, named: FieldSet) -> usize {
        let shapes: Vec<SpaceShape> = self.shapes();
        best_space(&shapes, named, &self.population).map_or(0, |(i, _)| i)
    }
}

/// Checks that `key_index` is over the key alone and every subspace over attributes below
/// `p` (at least one), and the key only as its last dimension (a key-spread subspace).
fn check_spaces(
    key_index: &SpaceShape,
    subspaces: &[SpaceShape],
    p: usize,
) -> Result<(), CpuIndexError> {
    let attributes = FieldSet::of((0..p as u8).map(Field::Attribute));
    let key_ok = key_index.fields() == FieldSet::of([Field::Key]);
    let subspace_ok = |s: &SpaceShape| {
        let dimensions = s.dimensions();
        let key_last = dimensions
            .iter()
            .position(|&(f, _)| f == Field::Key)
            .is_none_or(|d| d + 1 == dimensions.len());
        let allowed = attributes.union(FieldSet::of([Field::Key]));
        let within = s.fields().union(allowed) == allowed;
        key_last && within && !s.fields().intersection(attributes).is_empty()
    };
    let subspaces_ok = subspaces.iter().all(subspace_ok);
    if key_ok && subspaces_ok {
        Ok(())
    } else {
        Err(CpuIndexError::BadSpaces)
    }
}

/// A key held twice in the key index, if any (both copies share a bucket); the shards
/// are looked at on threads of their own.
fn first_duplicate(key_index: &Space) -> Option<u32> {
    let stride = key_index.stride;
    let found: Vec<Option<u32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = key_index
            .shards
            .iter()
            .map(|shard| scope.spawn(move || shard.first_duplicate(stride)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a shard reader does not panic"))
            .collect()
    });
    found.into_iter().flatten().next()
}
