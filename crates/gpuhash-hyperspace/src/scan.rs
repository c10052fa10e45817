//! A column scan: searches answered by reading every tuple, with no index at all.
//!
//! [`ColumnScan`] holds tuples as device columns ([`DeviceTuples`]: keys, attributes
//! column-major, values) and answers a batch of [`Query`]s with the same compressed rows
//! as [`HyperspaceIndex::search_on`](crate::HyperspaceIndex::search_on), each query's
//! matches in no particular order. It is what a dataframe library does with a batch of
//! equality filters, done well, and serves two ends: the baseline the hyperspace index is
//! measured against (benchmark W6 times both through their host forms, answers copied
//! back to the host included), and an oracle on the GPU for the index's tests, built on
//! nothing the index uses.
//!
//! ## How a batch runs
//!
//! The queries that name the same fields form a group, and a group's distinct value lists
//! are its *entries*: repeated queries share an entry, which keeps the list of its
//! queries. Every group is scanned on its own, [`CHUNK`] entries at a time
//! (`cuda-src/hyperspace/column_scan.cu`):
//!
//! 1. Each block puts the chunk's entries in a hash table in shared memory, keyed by a
//!    fingerprint of their values (for one field, an invertible mix of the value, so a
//!    hit is a match; for more, a hit is confirmed against the entry's values).
//! 2. A count pass streams the named columns, several tuples a lane in flight, probes the
//!    table, adds each match to a count in shared memory (lanes meeting one entry add
//!    once) and, at the end, each block's counts into global counts, one atomic per
//!    entry and block.
//! 3. A gather gives each query its entry's count; a device exclusive scan
//!    ([`gpuhash_core::scan::exclusive_scan`]) lays the rows out, and only the total
//!    travels to the host, to size the answer.
//! 4. A write pass scans again and writes each match into the row of every query of its
//!    entry, at a place taken with one atomic per entry and warp.
//!
//! A batch thus reads the named columns twice a chunk of each group, and the whole of
//! each matching tuple once.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_hyperspace::scan::ColumnScan;
//! use gpuhash_hyperspace::shape::Field;
//! use gpuhash_hyperspace::{Query, TupleBatch};
//!
//! # fn main() -> gpuhash_hyperspace::Result<()> {
//! let device = Device::default()?;
//! let batch = TupleBatch {
//!     keys: &[1, 2, 3],
//!     attributes: &[10, 10, 20, /* second attribute: */ 5000, 7000, 5000],
//!     values: &[100, 200, 300],
//! };
//! let scan = ColumnScan::new(&device, 2, batch)?;
//! let matches = scan.search(&[
//!     Query::attribute(0, 10),
//!     Query::attribute(0, 10), // a repeated query gets the same matches
//!     Query::attribute(0, 20).and(Field::Attribute(1), 5000),
//! ])?;
//! assert_eq!(matches.range(1).len(), 2);
//! assert_eq!(matches.of(2)[0].key, 3);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use gpuhash_core::scan::{exclusive_scan, scanned_total};
use gpuhash_core::{Device, DeviceBuffer, Stream, staging};

use crate::launch::{self, ScanAnswers, ScanChunk, ScanRows};
use crate::layouts::{GH_HS_MAX_FIELDS, GH_HS_SCAN_CHUNK};
use crate::query::{DeviceMatches, Matches, Query, check_queries};
use crate::shape::{FieldSet, MAX_ATTRIBUTES};
use crate::tuples::{DeviceTuples, TupleBatch, check_shape};
use crate::{HyperspaceError, Result};

/// Entries a scan of the columns serves at once: the most a block's hash table in shared
/// memory holds.
pub const CHUNK: usize = GH_HS_SCAN_CHUNK as usize;

/// Tuples held as device columns, searched by scanning them all (see the module docs).
#[derive(Debug)]
pub struct ColumnScan {
    device: Device,
    attribute_count: usize,
    columns: DeviceTuples,
}

impl ColumnScan {
    /// The tuples of `batch`, `p` attributes each (1 to 8), copied to the device as
    /// columns. Keys need not be unique: a scan finds every row.
    pub fn new(device: &Device, p: usize, batch: TupleBatch<'_>) -> Result<Self> {
        check_shape(p, batch)?;
        let stream = device.lend_stream()?;
        let columns = DeviceTuples::from_batch(&stream, batch)?;
        stream.synchronize()?;
        Self::from_columns(device, p, columns)
    }

    /// Tuples already on `device`, `p` attributes each (1 to 8), scanned where they are.
    pub fn from_columns(device: &Device, p: usize, columns: DeviceTuples) -> Result<Self> {
        if !(1..=MAX_ATTRIBUTES).contains(&p) {
            return Err(HyperspaceError::Options(format!(
                "{p} attributes: a tuple has 1 to {MAX_ATTRIBUTES}"
            )));
        }
        let n = columns.len();
        if columns.values.len() != n {
            return Err(gpuhash_core::Error::LengthMismatch {
                what: "keys and values",
                left: n,
                right: columns.values.len(),
            }
            .into());
        }
        if Some(columns.attributes.len()) != p.checked_mul(n) {
            return Err(HyperspaceError::AttributeCount {
                expected: p,
                tuples: n,
                words: columns.attributes.len(),
            });
        }
        if u32::try_from(n).is_err() {
            return Err(gpuhash_core::Error::InvalidInput(format!(
                "{n} tuples: a column scan counts matches in 32 bits"
            ))
            .into());
        }
        Ok(Self {
            device: device.clone(),
            attribute_count: p,
            columns,
        })
    }

    /// The device the columns live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Attributes a tuple has (p).
    pub fn attribute_count(&self) -> usize {
        self.attribute_count
    }

    /// The columns scanned.
    pub fn columns(&self) -> &DeviceTuples {
        &self.columns
    }

    /// Tuples held.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether no tuple is held.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Every tuple each query matches, as compressed rows on the host.
    pub fn search(&self, queries: &[Query]) -> Result<Matches> {
        let stream = self.device.lend_stream()?;
        let matches = self.search_on(&stream, queries)?;
        Ok(Matches {
            offsets: staging::downloaded(&stream, &matches.offsets)?,
            tuples: matches.tuples.to_host(&stream, self.attribute_count)?,
        })
    }

    /// Every tuple each query matches, as compressed rows on the device, after the work
    /// queued on `stream`; waits to size them. Queries are checked as the index checks
    /// them: at least one field, each once, attributes below p.
    pub fn search_on(&self, stream: &Stream, queries: &[Query]) -> Result<DeviceMatches> {
        check_queries(self.attribute_count, queries)?;
        if u32::try_from(queries.len()).is_err() {
            return Err(gpuhash_core::Error::InvalidInput(format!(
                "{} queries in one batch: a column scan names them in 32 bits",
                queries.len()
            ))
            .into());
        }
        let plan = ScanPlan::of(queries);
        let values = DeviceBuffer::from_host(stream, &plan.entry_values)?;
        // A count slot per query, the first `entries` used: entries are never more than
        // queries, so the gather of each query's count below reads inside the buffer.
        let mut entry_counts = DeviceBuffer::<u32>::zeroed(stream, queries.len())?;
        for chunk in plan.chunks() {
            let counts = ScanAnswers::Count {
                counts: &mut entry_counts,
            };
            self.pass(stream, &values, chunk, counts)?;
        }
        let query_entry = DeviceBuffer::from_host(stream, &plan.query_entry)?;
        let mut counts = DeviceBuffer::<u32>::unfilled(stream, queries.len())?;
        launch::permute(stream, &entry_counts, &query_entry, &mut counts, 1)?;
        let mut offsets = DeviceBuffer::<u64>::unfilled(stream, queries.len() + 1)?;
        exclusive_scan(stream, &counts, &mut offsets)?;
        let total = usize::try_from(scanned_total(stream, &offsets)?).map_err(|_| {
            gpuhash_core::Error::InvalidInput("more matches than the host can count".into())
        })?;
        let mut out = DeviceTuples::unfilled(stream, self.attribute_count, total)?;
        let mut cursors = DeviceBuffer::<u32>::zeroed(stream, plan.entry_count())?;
        let query_offsets = DeviceBuffer::from_host(stream, &plan.entry_query_offsets)?;
        let entry_queries = DeviceBuffer::from_host(stream, &plan.entry_queries)?;
        for chunk in plan.chunks() {
            let write = ScanAnswers::Write {
                counts: &entry_counts,
                cursors: &mut cursors,
                rows: ScanRows {
                    query_offsets: &query_offsets,
                    queries: &entry_queries,
                    offsets: &offsets,
                },
                out: &mut out,
            };
            self.pass(stream, &values, chunk, write)?;
        }
        Ok(DeviceMatches {
            offsets,
            tuples: out,
        })
    }

    /// One pass over the columns for a chunk of the entries whose values are `values`.
    fn pass(
        &self,
        stream: &Stream,
        values: &DeviceBuffer<u32>,
        chunk: ScanChunk<'_>,
        answers: ScanAnswers<'_>,
    ) -> Result<()> {
        let p = self.attribute_count;
        Ok(launch::column_scan(
            stream,
            &self.columns,
            p,
            values,
            chunk,
            answers,
        )?)
    }
}

/// A query's values in its group's field order, the rest zero.
type ValueList = [u32; MAX_FIELDS];

const MAX_FIELDS: usize = GH_HS_MAX_FIELDS as usize;

/// A multiply-rotate hasher for the plan's value lists, with a final avalanche (the
/// MurmurHash3 finalizer) so that lists differing in high bits alone land apart: planning
/// a batch hashes each query once, and SipHash would cost more than the rest of it.
#[derive(Debug, Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

/// The queries of one batch that name the same fields.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    /// The named fields' indices (0 the key, 1 + a attribute a), rising.
    fields: Vec<u32>,
    /// The batch's index of the group's first entry.
    first_entry: usize,
    /// Distinct value lists in the group.
    entries: usize,
    /// Where the group's entry values begin in [`ScanPlan::entry_values`].
    values_from: usize,
}

/// A batch as the scan serves it: groups of queries naming the same fields, and their
/// entries, the distinct value lists, numbered group after group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ScanPlan {
    groups: Vec<Group>,
    /// Each entry's values, in its group's field order, `fields.len()` words an entry.
    entry_values: Vec<u32>,
    /// Entry e's queries are `entry_queries[entry_query_offsets[e]..entry_query_offsets[e + 1]]`.
    entry_query_offsets: Vec<u32>,
    /// The batch's queries, entry after entry.
    entry_queries: Vec<u32>,
    /// Each query's entry.
    query_entry: Vec<u32>,
}

impl ScanPlan {
    /// The plan of a checked batch (fewer than 2^32 queries, each naming distinct fields).
    fn of(queries: &[Query]) -> ScanPlan {
        let mut by_fields: BTreeMap<FieldSet, Vec<usize>> = BTreeMap::new();
        for (q, query) in queries.iter().enumerate() {
            by_fields.entry(query.fields()).or_default().push(q);
        }
        let mut plan = ScanPlan {
            query_entry: vec![0; queries.len()],
            ..ScanPlan::default()
        };
        let mut entries = 0;
        for (named, members) in by_fields {
            let fields: Vec<_> = named.fields().collect();
            let first_entry = entries;
            let values_from = plan.entry_values.len();
            let mut entry_of: HashMap<ValueList, u32, BuildHasherDefault<WordHasher>> =
                HashMap::with_capacity_and_hasher(members.len(), Default::default());
            for q in members {
                let mut values: ValueList = [0; MAX_FIELDS];
                for (value, &field) in values.iter_mut().zip(&fields) {
                    *value = queries[q]
                        .predicates()
                        .iter()
                        .find_map(|&(f, v)| (f == field).then_some(v))
                        .expect("a query names each field of its group");
                }
                plan.query_entry[q] = *entry_of.entry(values).or_insert_with(|| {
                    plan.entry_values.extend_from_slice(&values[..fields.len()]);
                    entries += 1;
                    entries as u32 - 1
                });
            }
            plan.groups.push(Group {
                fields: fields.iter().map(|f| f.index()).collect(),
                first_entry,
                entries: entries - first_entry,
                values_from,
            });
        }
        // Each entry's queries, in batch order: a counting sort of the queries by entry.
        let mut offsets = vec![0u32; entries + 1];
        for &e in &plan.query_entry {
            offsets[e as usize + 1] += 1;
        }
        for e in 0..entries {
            offsets[e + 1] += offsets[e];
        }
        let mut cursors = offsets.clone();
        plan.entry_queries = vec![0; queries.len()];
        for (q, &e) in plan.query_entry.iter().enumerate() {
            plan.entry_queries[cursors[e as usize] as usize] = q as u32;
            cursors[e as usize] += 1;
        }
        plan.entry_query_offsets = offsets;
        plan
    }

    /// Entries in the batch.
    fn entry_count(&self) -> usize {
        self.entry_query_offsets.len().saturating_sub(1)
    }

    /// Every launch the batch needs: each group's entries, [`CHUNK`] at a time.
    fn chunks(&self) -> impl Iterator<Item = ScanChunk<'_>> {
        self.groups.iter().flat_map(|group| {
            (0..group.entries)
                .step_by(CHUNK)
                .map(move |start| ScanChunk {
                    fields: &group.fields,
                    values_from: group.values_from + start * group.fields.len(),
                    first: group.first_entry + start,
                    count: CHUNK.min(group.entries - start),
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Field;
    use quickcheck::quickcheck;

    /// A query of the fields in `mask` (key and three attributes), small values so that
    /// batches repeat them; fields given last to first.
    fn query(mask: u8, values: [u8; 4]) -> Query {
        let mask = (mask % 15) + 1;
        let fields = [
            Field::Key,
            Field::Attribute(0),
            Field::Attribute(1),
            Field::Attribute(2),
        ];
        let mut named = (0..4).rev().filter(|f| mask >> f & 1 == 1);
        let first = named.next().expect("a field");
        named.fold(
            Query::new(fields[first], u32::from(values[first] % 3)),
            |q, f| q.and(fields[f], u32::from(values[f] % 3)),
        )
    }

    quickcheck! {
        fn every_query_lands_in_one_entry_that_holds_its_values(batch: Vec<(u8, [u8; 4])>) -> bool {
            let queries: Vec<Query> = batch.iter().map(|&(m, v)| query(m, v)).collect();
            let plan = ScanPlan::of(&queries);
            let mut seen = vec![false; queries.len()];
            let mut lists = std::collections::HashSet::new();
            let entries_ok = plan.groups.iter().all(|group| {
                (group.first_entry..group.first_entry + group.entries).all(|e| {
                    let k = group.fields.len();
                    let at = group.values_from + (e - group.first_entry) * k;
                    let values = &plan.entry_values[at..at + k];
                    let from = plan.entry_query_offsets[e] as usize;
                    let to = plan.entry_query_offsets[e + 1] as usize;
                    let distinct = lists.insert((group.fields.clone(), values.to_vec()));
                    distinct && from < to && plan.entry_queries[from..to].iter().all(|&q| {
                        let q = q as usize;
                        let query = &queries[q];
                        let fields: Vec<u32> = query.fields().fields().map(Field::index).collect();
                        let wanted: Vec<u32> = query.fields().fields().map(|f| {
                            query.predicates().iter().find(|p| p.0 == f).expect("named").1
                        }).collect();
                        let first_sight = !std::mem::replace(&mut seen[q], true);
                        first_sight
                            && plan.query_entry[q] as usize == e
                            && fields == group.fields
                            && wanted == values
                    })
                })
            });
            let chunked: usize = plan.chunks().map(|c| c.count).sum();
            entries_ok
                && seen.iter().all(|&s| s)
                && chunked == plan.entry_count()
                && plan.entry_values.len()
                    == plan.groups.iter().map(|g| g.entries * g.fields.len()).sum::<usize>()
        }
    }

    #[test]
    fn repeated_queries_share_an_entry_whatever_the_order_of_their_fields() {
        let queries = [
            Query::attribute(1, 7),
            Query::attribute(0, 3).and(Field::Attribute(1), 4),
            Query::attribute(1, 7),
            Query::attribute(1, 4).and(Field::Attribute(0), 3),
            Query::attribute(1, 8),
        ];
        let plan = ScanPlan::of(&queries);
        // Groups in field set order: {A1} (mask 0b100) before {A0, A1} (0b110).
        assert_eq!(
            plan.groups,
            vec![
                Group {
                    fields: vec![2],
                    first_entry: 0,
                    entries: 2,
                    values_from: 0,
                },
                Group {
                    fields: vec![1, 2],
                    first_entry: 2,
                    entries: 1,
                    values_from: 2,
                },
            ]
        );
        assert_eq!(plan.entry_values, vec![7, 8, 3, 4]);
        assert_eq!(plan.query_entry, vec![0, 2, 0, 2, 1]);
        assert_eq!(plan.entry_query_offsets, vec![0, 2, 3, 5]);
        assert_eq!(plan.entry_queries, vec![0, 2, 4, 1, 3]);
        assert_eq!(plan.entry_count(), 3);
    }

    #[test]
    fn large_groups_run_in_chunks_of_the_table_size() {
        let mut queries: Vec<Query> = (0..CHUNK as u32 * 2 + 5)
            .map(|v| Query::attribute(0, v).and(Field::Key, v))
            .collect();
        queries.push(Query::attribute(1, 1));
        let plan = ScanPlan::of(&queries);
        let chunks: Vec<_> = plan.chunks().collect();
        let pairs: &[u32] = &[0, 1];
        let chunk = |values_from, first, count| ScanChunk {
            fields: pairs,
            values_from,
            first,
            count,
        };
        assert_eq!(
            chunks[..3],
            [
                chunk(0, 0, CHUNK),
                chunk(2 * CHUNK, CHUNK, CHUNK),
                chunk(4 * CHUNK, 2 * CHUNK, 5),
            ]
        );
        assert_eq!(
            chunks[3],
            ScanChunk {
                fields: &[2],
                values_from: 4 * CHUNK + 10,
                first: 2 * CHUNK + 5,
                count: 1,
            }
        );
        assert_eq!(chunks.len(), 4);
    }

    #[test]
    fn an_empty_batch_plans_nothing() {
        let plan = ScanPlan::of(&[]);
        assert!(plan.groups.is_empty());
        assert_eq!(plan.entry_count(), 0);
        assert_eq!(plan.entry_query_offsets, vec![0]);
    }

    #[test]
    fn a_key_query_names_field_zero() {
        let plan = ScanPlan::of(&[Query::new(Field::Key, 9).and(Field::Attribute(2), 1)]);
        assert_eq!(plan.groups[0].fields, vec![0, 3]);
        assert_eq!(plan.entry_values, vec![9, 1]);
    }
}
