//! Searches of the CPU index: by key, by one attribute, by a conjunction, all as CSR.

use std::sync::atomic::{AtomicUsize, Ordering};

use gpuhash_hyperspace::shape::{Field, FieldSet, MAX_ATTRIBUTES};

use super::cpu_index::{
    CpuHyperspace, CpuIndexError, NODE_WORDS, SLOTS, Space, Tuples, column_of, coordinate,
};
use super::shard::is_valid;

/// Queries a worker takes at a time: small, so that costly queries spread over the threads.
const QUERY_CHUNK: usize = 64;
/// Most fields a space or a query has: the key and every attribute.
const FIELDS: usize = MAX_ATTRIBUTES + 1;

/// A batch of searches that all name the same fields: query `i` asks for `fields[j] ==
/// values[j * q + i]` for every `j`, `q` the batch's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryBatch {
    /// The fields named, each once.
    pub fields: Vec<Field>,
    /// The values, column-major: one column of `q` values per field.
    pub values: Vec<u32>,
}

impl QueryBatch {
    /// How many queries.
    pub fn len(&self) -> usize {
        self.values.len() / self.fields.len().max(1)
    }

    /// The fields named, as a set.
    pub fn named(&self) -> FieldSet {
        FieldSet::of(self.fields.iter().copied())
    }

    /// The value query `i` asks of its `j`-th field.
    pub fn value(&self, j: usize, i: usize) -> u32 {
        self.values[j * self.len() + i]
    }

    /// The first `count` queries (all of them when there are fewer).
    pub fn prefix(&self, count: usize) -> QueryBatch {
        QueryBatch {
            fields: self.fields.clone(),
            values: column_prefix(&self.values, self.len(), count),
        }
    }
}

/// The first `count` rows of column-major `columns` of `rows` rows each.
pub fn column_prefix(columns: &[u32], rows: usize, count: usize) -> Vec<u32> {
    let count = count.min(rows);
    columns
        .chunks(rows.max(1))
        .flat_map(|column| column[..count].iter().copied())
        .collect()
}

/// The answers of a batch as compressed rows: query `i`'s matches are tuples
/// `offsets[i]..offsets[i + 1]` (`counts[i]` of them), in no particular order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matches {
    /// Matches of each query.
    pub counts: Vec<u32>,
    /// Start of each query's row, and the total last.
    pub offsets: Vec<u64>,
    /// The matching tuples.
    pub tuples: Tuples,
}

/// How one batch is answered: the space, the chain scanned and the fields checked.
struct Plan<'a> {
    space: &'a Space,
    /// For each dimension of the space, the position of its field in the batch's fields.
    named_dimension: Vec<Option<usize>>,
    /// Column scanned and the position of its field in the batch's fields.
    scan: (usize, usize),
    /// Columns checked on matching slots, with the positions of their fields.
    checks: Vec<(usize, usize)>,
}

/// The matches of a run of queries, as row counts and columns.
struct Local {
    counts: Vec<u32>,
    /// `p + 2` columns: key, attributes, value.
    columns: Vec<Vec<u32>>,
}

impl CpuHyperspace {
    /// Every tuple matching each query of `batch`, on all threads. Fails on a batch that
    /// names no field, a field twice or a field the tuples lack.
    pub fn search(&self, batch: &QueryBatch) -> Result<Matches, CpuIndexError> {
        let plan = self.plan(batch)?;
        let q = batch.len();
        let chunks = q.div_ceil(QUERY_CHUNK);
        let next = AtomicUsize::new(0);
        let work = || {
            let mut done = Vec::new();
            loop {
                let chunk = next.fetch_add(1, Ordering::Relaxed);
                if chunk >= chunks {
                    return done;
                }
                let mut local = Local {
                    counts: Vec::new(),
                    columns: vec![Vec::new(); self.attributes + 2],
                };
                for i in chunk * QUERY_CHUNK..((chunk + 1) * QUERY_CHUNK).min(q) {
                    self.answer(&plan, batch, i, &mut local);
                }
                done.push((chunk, local));
            }
        };
        let mut locals: Vec<(usize, Local)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.threads.min(chunks))
                .map(|_| scope.spawn(work))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a search worker does not panic"))
                .collect()
        });
        locals.sort_unstable_by_key(|&(chunk, _)| chunk);
        Ok(self.gather(locals.into_iter().map(|(_, local)| local).collect()))
    }

    /// Checks `batch` and picks its space and chains.
    fn plan(&self, batch: &QueryBatch) -> Result<Plan<'_>, CpuIndexError> {
        let named = batch.named();
        let in_range = batch.fields.iter().all(|&f| match f {
            Field::Key => true,
            Field::Attribute(i) => usize::from(i) < self.attributes,
        });
        if batch.fields.is_empty() || named.len() as usize != batch.fields.len() || !in_range {
            return Err(CpuIndexError::BadFields(batch.fields.clone()));
        }
        if !batch.values.len().is_multiple_of(batch.fields.len()) {
            return Err(CpuIndexError::LengthMismatch {
                what: "query values",
                expected: batch.values.len().next_multiple_of(batch.fields.len()),
                got: batch.values.len(),
            });
        }
        let space = &self.spaces[self.space_for(named)];
        let position = |field: Field| batch.fields.iter().position(|&f| f == field);
        // The most selective named field: the key, else the attribute of most distinct
        // values (unknown counting as most), the first of equals.
        let distinct = |field: Field| match field {
            Field::Key => u64::MAX,
            _ => self.population.distinct_of(field).unwrap_or(u64::MAX - 1),
        };
        let scanned = named
            .fields()
            .fold(None, |best: Option<Field>, f| match best {
                Some(b) if distinct(b) >= distinct(f) => Some(b),
                _ => Some(f),
            })
            .expect("a batch names a field");
        let with_position = |f: Field| (column_of(f), position(f).expect("a named field"));
        Ok(Plan {
            space,
            named_dimension: space
                .shape
                .dimensions()
                .iter()
                .map(|&(field, _)| position(field))
                .collect(),
            scan: with_position(scanned),
            checks: named
                .fields()
                .filter(|&f| f != scanned)
                .map(with_position)
                .collect(),
        })
    }

    /// Appends the matches of query `i` to `out`.
    fn answer(&self, plan: &Plan<'_>, batch: &QueryBatch, i: usize, out: &mut Local) {
        let space = plan.space;
        // Per dimension, the coordinate the query fixes; the others are enumerated.
        let mut fixed = [None; FIELDS];
        let mut free_bits = 0;
        for ((slot, d), named) in fixed
            .iter_mut()
            .zip(&space.dimensions)
            .zip(&plan.named_dimension)
        {
            match named {
                Some(j) => *slot = Some(coordinate(batch.value(*j, i), d.seed, d.bits)),
                None => free_bits += d.bits,
            }
        }
        let mut checks = [(0, 0); FIELDS];
        for (check, &(column, j)) in checks.iter_mut().zip(&plan.checks) {
            *check = (column * NODE_WORDS, batch.value(j, i));
        }
        let checks = &checks[..plan.checks.len()];
        let scan_value = batch.value(plan.scan.1, i);
        let scan_offset = plan.scan.0 * NODE_WORDS;
        // Keys are unique: a key search stops at its first match.
        let unique = plan.scan.0 == 0;
        let before = out.columns[0].len();
        for free in 0..1usize << free_bits {
            let mut rest = free;
            let bucket = space
                .dimensions
                .iter()
                .zip(&fixed)
                .fold(0usize, |id, (d, c)| {
                    let coordinate = c.map_or_else(
                        || {
                            let part = rest & ((1 << d.bits) - 1);
                            rest >>= d.bits;
                            part
                        },
                        |c| c as usize,
                    );
                    (id << d.bits) | coordinate
                });
            let (s, local) = space.locate(bucket);
            let shard = &space.shards[s];
            let nodes = &shard.nodes;
            for base in shard.chain(shard.heads[local], space.stride) {
                for slot in 0..SLOTS {
                    if nodes[base + scan_offset + slot] == scan_value
                        && is_valid(nodes[base + slot])
                        && checks.iter().all(|&(off, v)| nodes[base + off + slot] == v)
                    {
                        for (c, column) in out.columns.iter_mut().enumerate() {
                            column.push(nodes[base + c * NODE_WORDS + slot]);
                        }
                        if unique {
                            out.counts.push(1);
                            return;
                        }
                    }
                }
            }
        }
        out.counts.push((out.columns[0].len() - before) as u32);
    }

    /// The CSR of the runs' matches, in order, copied in parallel.
    fn gather(&self, locals: Vec<Local>) -> Matches {
        let p = self.attributes;
        let counts: Vec<u32> = locals
            .iter()
            .flat_map(|l| l.counts.iter().copied())
            .collect();
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        let mut total = 0u64;
        offsets.push(0);
        for &c in &counts {
            total += u64::from(c);
            offsets.push(total);
        }
        let m = total as usize;
        let mut tuples = Tuples {
            keys: vec![0; m],
            attributes: vec![0; p * m],
            values: vec![0; m],
        };
        // Each output column cut at the runs' starts, the cuts handed out to threads in
        // contiguous groups.
        let mut columns: Vec<&mut [u32]> = vec![&mut tuples.keys[..]];
        let mut rest = &mut tuples.attributes[..];
        for _ in 0..p {
            let (column, tail) = rest.split_at_mut(m);
            columns.push(column);
            rest = tail;
        }
        columns.push(&mut tuples.values[..]);
        let lengths: Vec<usize> = locals.iter().map(|l| l.columns[0].len()).collect();
        let mut pieces: Vec<Vec<&mut [u32]>> = (0..locals.len()).map(|_| Vec::new()).collect();
        for column in columns {
            let mut rest = column;
            for (piece, &len) in pieces.iter_mut().zip(&lengths) {
                let (head, tail) = rest.split_at_mut(len);
                piece.push(head);
                rest = tail;
            }
        }
        let group = locals.len().div_ceil(self.threads).max(1);
        std::thread::scope(|scope| {
            for (locals, pieces) in locals.chunks(group).zip(pieces.chunks_mut(group)) {
                scope.spawn(move || {
                    for (local, piece) in locals.iter().zip(pieces) {
                        for (target, source) in piece.iter_mut().zip(&local.columns) {
                            target.copy_from_slice(source);
                        }
                    }
                });
            }
        });
        Matches {
            counts,
            offsets,
            tuples,
        }
    }
}
