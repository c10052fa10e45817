//! Searches (the GHSH paper, sections 4.1.1 and 4.2.2). The queries of a batch that name
//! the same fields form a group, which runs in its cheapest space by the cost model
//! ([`cost::best_space`]: expected node reads, from the buckets it touches and the
//! population the index estimates; a group naming the key in the key index). Each
//! batch's fields go into the query history first, and under adaptive regrouping a batch
//! that brings a look at the history due ends with it (`adaptive.rs`). A group's
//! subtasks, one per query and bucket it touches, are made on the device and, for the
//! grouped strategy, sorted by bucket there (a counting sort on the bucket's low bits:
//! equal buckets end up in one part, side by side unless the part holds several buckets;
//! the kernel gives each run of one bucket to one warp, so a split run costs a second
//! walk, never a wrong answer). Then two passes over every group, as the slab hash
//! multimap's `get_all`: a count pass, and a write pass that puts each query's matches at its place in a layout with room for
//! a quarter more than counted (and 8). A batch on another thread may add or remove
//! copies between the passes (a modify in flight adds one): if a query finds more than
//! its room, the write pass runs again with the counts it found; otherwise every match the
//! pass saw was written, and a compaction kernel lays the queries' matches end to end.
//! So the answer is what one write pass saw, whole: under the modify's grace period, each
//! tuple once or twice, never not at all.

use std::collections::BTreeMap;

use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::build::{counting_sort, prefix_offsets};
use crate::cost::{self, Population};
use crate::index::{HyperspaceIndex, Spaces};
use crate::launch::{self, SearchAnswers, SearchPass, Subtasks};
use crate::layouts::GH_HS_MAX_FIELDS;
use crate::options::SearchStrategy;
use crate::query::{DeviceMatches, Matches, Query, check_queries};
use crate::shape::{Field, FieldSet, SpaceShape};
use crate::space::Space;
use crate::tuples::DeviceTuples;

/// One group's subtasks in its space, ready for the passes.
struct Plan<'a> {
    space: &'a Space,
    /// The batch's indices of the group's queries.
    members: Vec<usize>,
    /// GH_HS_MAX_FIELDS words a query: word f the value of field f.
    words: DeviceBuffer<u32>,
    field_mask: u32,
    scan_field: u32,
    grouped: bool,
    query_of: DeviceBuffer<u32>,
    bucket_of: DeviceBuffer<u32>,
}

/// The field whose chain a search scans: the first named field the space hashes (its
/// values are spread over the bucket's coordinates least), else the first named field.
pub(crate) fn scan_field(shape: &SpaceShape, named: FieldSet) -> Field {
    let mut fields = named.fields();
    let first = fields.next().expect("a query names a field");
    named
        .fields()
        .find(|&f| shape.fields().contains(f))
        .unwrap_or(first)
}

impl Space {
    /// Subtasks of the queries `words` (GH_HS_MAX_FIELDS a query) naming `named`.
    fn plan(
        &self,
        stream: &Stream,
        members: Vec<usize>,
        words: &[u32],
        named: FieldSet,
        grouped: bool,
    ) -> Result<Plan<'_>> {
        let queries = members.len() as u64;
        let touched = self.shape().buckets_touched(named);
        let count = queries
            .checked_mul(touched)
            .and_then(|c| usize::try_from(c).ok());
        let Some(count) = count else {
            return Err(gpuhash_core::Error::InvalidInput(format!(
                "{queries} queries touching {touched} buckets each"
            ))
            .into());
        };
        let words = DeviceBuffer::from_host(stream, words)?;
        let mut query_of = DeviceBuffer::unfilled(stream, count)?;
        let mut bucket_of = DeviceBuffer::unfilled(stream, count)?;
        let field_mask = u32::from(named.mask());
        self.run(stream, |space| {
            let subtasks = Subtasks {
                queries: &words,
                field_mask,
                touched,
                query_of: &mut query_of,
                bucket_of: &mut bucket_of,
            };
            launch::subtasks(stream, space, subtasks)
        })?;
        if grouped && count > 1 {
            let parts = self
                .shape()
                .bucket_count()
                .min((count as u64).next_power_of_two());
            let (order, _) = counting_sort(stream, &bucket_of, parts)?;
            let mut sorted_queries = DeviceBuffer::unfilled(stream, count)?;
            let mut sorted_buckets = DeviceBuffer::unfilled(stream, count)?;
            launch::permute(stream, &query_of, 0, &order, &mut sorted_queries, 0)?;
            launch::permute(stream, &bucket_of, 0, &order, &mut sorted_buckets, 0)?;
            query_of = sorted_queries;
            bucket_of = sorted_buckets;
        }
        Ok(Plan {
            space: self,
            members,
            words,
            field_mask,
            scan_field: scan_field(self.shape(), named).index(),
            grouped,
            query_of,
            bucket_of,
        })
    }
}

impl Plan<'_> {
    fn pass<'b>(&'b self, answers: SearchAnswers<'b>) -> SearchPass<'b> {
        SearchPass {
            queries: &self.words,
            query_of: &self.query_of,
            bucket_of: &self.bucket_of,
            field_mask: self.field_mask,
            scan_field: self.scan_field,
            grouped: self.grouped,
            answers,
        }
    }

    /// Matches of each query of the group.
    fn count(&self, stream: &Stream) -> Result<Vec<u64>> {
        let mut counts = DeviceBuffer::<u64>::zeroed(stream, self.members.len())?;
        self.space.run(stream, |space| {
            let pass = self.pass(SearchAnswers::Count {
                counts: &mut counts,
            });
            launch::search(stream, space, pass)
        })?;
        Ok(counts.to_host(stream)?)
    }

    /// Writes the group's matches at the batch's `offsets`, at most `limits` a query;
    /// returns how many each query found.
    fn write(
        &self,
        stream: &Stream,
        offsets: &[u64],
        limits: &[u64],
        out: &mut DeviceTuples,
    ) -> Result<Vec<u64>> {
        let own = |all: &[u64]| -> Vec<u64> { self.members.iter().map(|&q| all[q]).collect() };
        let offsets = DeviceBuffer::from_host(stream, &own(offsets))?;
        let limits = DeviceBuffer::from_host(stream, &own(limits))?;
        let mut cursors = DeviceBuffer::<u64>::zeroed(stream, self.members.len())?;
        self.space.run(stream, |space| {
            let pass = self.pass(SearchAnswers::Write {
                offsets: &offsets,
                limits: &limits,
                cursors: &mut cursors,
                out,
            });
            launch::search(stream, space, pass)
        })?;
        Ok(cursors.to_host(stream)?)
    }
}

impl HyperspaceIndex {
    /// The space a search naming `fields` runs in (0 the key index, then the attribute
    /// subspaces as [`HyperspaceIndex::space_shapes`] lists them): the key index for a
    /// search naming the key, else the one of fewest expected node reads by the cost model
    /// ([`cost::search_cost`]) for the population the index estimates
    /// ([`HyperspaceIndex::population`]), the earliest on a tie.
    pub fn best_space(&self, fields: FieldSet) -> usize {
        best_space(&self.spaces(), fields, &self.population())
    }

    /// Every tuple each query matches, as compressed rows on the host.
    pub fn search(&self, queries: &[Query]) -> Result<Matches> {
        let stream = self.device().lend_stream()?;
        let matches = self.search_on(&stream, queries)?;
        Ok(Matches {
            offsets: matches.offsets.to_host(&stream)?,
            tuples: matches.tuples.to_host(&stream, self.attribute_count())?,
        })
    }

    /// Every tuple each query matches, as compressed rows on the device, after the work
    /// queued on `stream`; waits to size them.
    ///
    /// The batch's fields go into the query history. Under adaptive regrouping, the batch
    /// that brings a look at the history due asks the policy after its search, and
    /// regroups on this thread before returning when the policy proposes new subspaces
    /// (a failed regroup leaves the subspaces and this answer as they are;
    /// [`HyperspaceIndex::adaptive_report`] tells it).
    pub fn search_on(&self, stream: &Stream, queries: &[Query]) -> Result<DeviceMatches> {
        check_queries(self.attribute_count(), queries)?;
        let (population, advice) = self.observe_searches(queries)?;
        let matches = self.search_routed(stream, queries, &population)?;
        if let Some(advice) = advice {
            // After the search has ended: a modify waiting for it may hold writes back
            // from the regroup.
            self.adapt(advice);
        }
        Ok(matches)
    }

    /// The search of checked queries, each group in its best space for `population`.
    fn search_routed(
        &self,
        stream: &Stream,
        queries: &[Query],
        population: &Population,
    ) -> Result<DeviceMatches> {
        let _search = self.grace.begin_search();
        let spaces = self.spaces();
        let plans = self.plans(&spaces, stream, queries, population)?;
        let mut limits = vec![0u64; queries.len()];
        for plan in &plans {
            for (&q, count) in plan.members.iter().zip(plan.count(stream)?) {
                limits[q] = count;
            }
        }
        loop {
            // Room for a quarter more than counted: a batch on another thread may add
            // copies (a modify in flight) between the passes.
            let room: Vec<u64> = limits.iter().map(|&l| l + l / 4 + 8).collect();
            let padded = prefix_offsets(&room);
            let total = *padded.last().unwrap_or(&0) as usize;
            let mut written = DeviceTuples::unfilled(stream, self.attribute_count(), total)?;
            let mut found = vec![0u64; queries.len()];
            for plan in &plans {
                let counts = plan.write(stream, &padded, &room, &mut written)?;
                for (&q, count) in plan.members.iter().zip(counts) {
                    found[q] = count;
                }
            }
            if found.iter().zip(&room).all(|(f, r)| f <= r) {
                return self.compacted(stream, &written, &padded, &found);
            }
            limits = found;
        }
    }

    /// The answer from a write pass's padded layout: query q's `found[q]` matches from
    /// `padded[q]` on, laid end to end.
    fn compacted(
        &self,
        stream: &Stream,
        written: &DeviceTuples,
        padded: &[u64],
        found: &[u64],
    ) -> Result<DeviceMatches> {
        let offsets = prefix_offsets(found);
        let total = *offsets.last().unwrap_or(&0) as usize;
        let mut out = DeviceTuples::unfilled(stream, self.attribute_count(), total)?;
        let from = DeviceBuffer::from_host(stream, &padded[..found.len()])?;
        let offsets = DeviceBuffer::from_host(stream, &offsets)?;
        launch::compact(
            stream,
            written,
            &from,
            &offsets,
            &mut out,
            self.attribute_count(),
        )?;
        Ok(DeviceMatches {
            offsets,
            tuples: out,
        })
    }

    /// The batch's queries grouped by the fields they name, each group planned in its
    /// best space.
    fn plans<'a>(
        &self,
        spaces: &'a Spaces<'a>,
        stream: &Stream,
        queries: &[Query],
        population: &Population,
    ) -> Result<Vec<Plan<'a>>> {
        let mut groups: BTreeMap<FieldSet, Vec<usize>> = BTreeMap::new();
        for (q, query) in queries.iter().enumerate() {
            groups.entry(query.fields()).or_default().push(q);
        }
        let grouped = self.options.read().search == SearchStrategy::Grouped;
        let all = spaces.all();
        groups
            .into_iter()
            .map(|(named, members)| {
                let stride = GH_HS_MAX_FIELDS as usize;
                let mut words = vec![0u32; members.len() * stride];
                for (k, &q) in members.iter().enumerate() {
                    for &(field, value) in queries[q].predicates() {
                        words[k * stride + field.index() as usize] = value;
                    }
                }
                let space = all[best_space(spaces, named, population)];
                space.plan(stream, members, &words, named, grouped)
            })
            .collect()
    }
}

/// Of `spaces`, the one a search naming `fields` runs in: [`cost::best_space`], the key
/// index (space 0) for a search naming the key.
fn best_space(spaces: &Spaces<'_>, fields: FieldSet, population: &Population) -> usize {
    let shapes: Vec<SpaceShape> = spaces.all().iter().map(|s| s.shape().clone()).collect();
    cost::best_space(&shapes, fields, population).map_or(0, |(space, _)| space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_scan_a_named_dimension_when_there_is_one() {
        let shape = SpaceShape::new(vec![(Field::Attribute(2), 8)]).expect("shape");
        let named = FieldSet::of([Field::Attribute(0), Field::Attribute(2)]);
        assert_eq!(scan_field(&shape, named), Field::Attribute(2));
        let elsewhere = FieldSet::of([Field::Attribute(1), Field::Attribute(3)]);
        assert_eq!(scan_field(&shape, elsewhere), Field::Attribute(1));
    }
}
