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
//! walk, never a wrong answer). Every group of a batch reads one buffer of the batch's
//! query words and answers at the batch's own query indices, so the passes of all groups
//! share one word a query for counts, room, offsets and cursors.
//!
//! Then two passes over every group, as the slab hash multimap's `get_all`, all queued on
//! the caller's stream: a count pass; the room of each query padded on the device to a
//! quarter more than counted (and 8) and laid end to end by an exclusive scan
//! ([`gpuhash_core::scan`]), whose total, the room's size, is the first word the host
//! waits for; a write pass that puts each query's matches at its place in that room; a
//! settling kernel that raises a flag for any query that found more than its room, and
//! an exclusive scan of what each found, whose total the host reads with the flag (the
//! second wait) to size the answer. A batch on another thread may add or remove copies
//! between the passes (a modify in flight adds one): if a query finds more than its room,
//! the write pass runs again with room laid out from what every query found; otherwise
//! every match the pass saw was written, and a compaction kernel lays the queries' matches
//! end to end. So the answer is what one write pass saw, whole: under the modify's grace
//! period, each tuple once or twice, never not at all.
//!
//! [`HyperspaceIndex::search_async`] queues the same passes into the caller's buffers and
//! waits for nothing: the rows are laid out from the counts themselves, and a settling
//! kernel raises the caller's `incomplete` word when a query wrote another number than it
//! counted or the rows pass the caller's capacity.

use std::collections::BTreeMap;

use gpuhash_core::scan::{exclusive_scan, scanned_total};
use gpuhash_core::{DeviceBuffer, Stream, staging};

use crate::Result;
use crate::build::counting_order;
use crate::cost::{self, Population};
use crate::index::{HyperspaceIndex, Spaces};
use crate::launch::{self, SearchAnswers, SearchPass, SettleRows, Subtasks};
use crate::layouts::GH_HS_MAX_FIELDS;
use crate::options::SearchStrategy;
use crate::query::{DeviceMatches, Matches, Query, check_queries};
use crate::shape::{Field, FieldSet, SpaceShape};
use crate::space::Space;
use crate::tuples::{DeviceTuples, download_reusing};

/// One group's subtasks in its space, ready for the passes.
struct Plan<'a> {
    space: &'a Space,
    field_mask: u32,
    scan_field: u32,
    grouped: bool,
    query_of: DeviceBuffer<u32>,
    bucket_of: DeviceBuffer<u32>,
}

/// A batch's groups, planned, and the words of its queries, which every pass reads at the
/// batch's query indices: counts, offsets, limits and cursors are one word a query of the
/// batch, shared by every group.
struct SearchBatch<'a> {
    plans: Vec<Plan<'a>>,
    /// GH_HS_MAX_FIELDS words a query: word f the value of field f.
    words: DeviceBuffer<u32>,
    queries: usize,
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
    /// Subtasks of the batch's queries `members` (of `words`, GH_HS_MAX_FIELDS a query),
    /// which name `named`.
    fn plan(
        &self,
        stream: &Stream,
        words: &DeviceBuffer<u32>,
        members: &[u32],
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
        let members = DeviceBuffer::from_host(stream, members)?;
        let mut query_of = DeviceBuffer::unfilled(stream, count)?;
        let mut bucket_of = DeviceBuffer::unfilled(stream, count)?;
        let field_mask = u32::from(named.mask());
        self.run(stream, |space| {
            let subtasks = Subtasks {
                queries: words,
                members: &members,
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
            let order = counting_order(stream, &bucket_of, parts)?;
            let mut sorted_queries = DeviceBuffer::unfilled(stream, count)?;
            let mut sorted_buckets = DeviceBuffer::unfilled(stream, count)?;
            launch::permute(stream, &query_of, &order, &mut sorted_queries, 1)?;
            launch::permute(stream, &bucket_of, &order, &mut sorted_buckets, 1)?;
            query_of = sorted_queries;
            bucket_of = sorted_buckets;
        }
        Ok(Plan {
            space: self,
            field_mask,
            scan_field: scan_field(self.shape(), named).index(),
            grouped,
            query_of,
            bucket_of,
        })
    }
}

impl Plan<'_> {
    fn pass<'b>(
        &'b self,
        words: &'b DeviceBuffer<u32>,
        answers: SearchAnswers<'b>,
    ) -> SearchPass<'b> {
        SearchPass {
            queries: words,
            query_of: &self.query_of,
            bucket_of: &self.bucket_of,
            field_mask: self.field_mask,
            scan_field: self.scan_field,
            grouped: self.grouped,
            answers,
        }
    }
}

impl SearchBatch<'_> {
    /// Matches of each query of the batch, counted on the device.
    fn count(&self, stream: &Stream) -> Result<DeviceBuffer<u64>> {
        let mut counts = DeviceBuffer::<u64>::zeroed(stream, self.queries)?;
        for plan in &self.plans {
            plan.space.run(stream, |space| {
                let answers = SearchAnswers::Count {
                    counts: &mut counts,
                };
                launch::search(stream, space, plan.pass(&self.words, answers))
            })?;
        }
        Ok(counts)
    }

    /// Writes each query's matches into `out` from `offsets[q]`, at most `limits[q]` (and
    /// never past `out`'s end); returns how many each query found, on the device.
    fn write(
        &self,
        stream: &Stream,
        offsets: &DeviceBuffer<u64>,
        limits: &DeviceBuffer<u64>,
        out: &mut DeviceTuples,
    ) -> Result<DeviceBuffer<u64>> {
        let mut cursors = DeviceBuffer::<u64>::zeroed(stream, self.queries)?;
        for plan in &self.plans {
            plan.space.run(stream, |space| {
                let answers = SearchAnswers::Write {
                    offsets,
                    limits,
                    cursors: &mut cursors,
                    out: &mut *out,
                };
                launch::search(stream, space, plan.pass(&self.words, answers))
            })?;
        }
        Ok(cursors)
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
            offsets: staging::downloaded(&stream, &matches.offsets)?,
            tuples: matches.tuples.to_host(&stream, self.attribute_count())?,
        })
    }

    /// [`HyperspaceIndex::search`] into `out`, whose vectors are reused from batch to
    /// batch ([`DeviceTuples::copy_to_host_into`]): a caller that loops over batches
    /// spares the host the page faults of fresh answers, and with vectors it registered
    /// ([`gpuhash_core::Device::register`]; answers past their capacity get new ones), the
    /// staging copies too. On an error `out` is unspecified.
    pub fn search_into(&self, queries: &[Query], out: &mut Matches) -> Result<()> {
        let stream = self.device().lend_stream()?;
        let matches = self.search_on(&stream, queries)?;
        download_reusing(&stream, &matches.offsets, &mut out.offsets)?;
        let p = self.attribute_count();
        matches
            .tuples
            .copy_to_host_into(&stream, p, &mut out.tuples)
    }

    /// Every tuple each query matches, as compressed rows on the device, after the work
    /// queued on `stream`. Waits twice a round, for one word each time: the room the
    /// write pass lays out, and the answer's size with whether every query fit its room
    /// (the crate docs' Structure tells the passes).
    ///
    /// The batch's fields go into the query history. Under adaptive regrouping, the batch
    /// that brings a look at the history due asks the policy after its search, and
    /// regroups on this thread before returning when the policy proposes new subspaces
    /// (a failed regroup leaves the subspaces and this answer as they are;
    /// [`HyperspaceIndex::adaptive_report`] tells it).
    pub fn search_on(&self, stream: &Stream, queries: &[Query]) -> Result<DeviceMatches> {
        check_queries(self.attribute_count(), queries)?;
        let (population, advice) = self.observe_searches(queries, true)?;
        let matches = self.search_routed(stream, queries, &population)?;
        if let Some(advice) = advice {
            // After the search has ended: a modify waiting for it may hold writes back
            // from the regroup.
            self.adapt(advice);
        }
        Ok(matches)
    }

    /// Queues a search on `stream` into the caller's device buffers and returns without
    /// waiting (the device form of [`HyperspaceIndex::search_on`]): `offsets` (one more
    /// than the queries) receives the compressed rows' offsets, the last the number of
    /// matches, and the matches go into `out` (its capacity, `out.len()`, an upper bound
    /// the caller chose) from `offsets[q]`. `incomplete` (one word) becomes 0 when every
    /// query's matches are all in `out`, else nonzero: `out` was too short for
    /// `offsets[queries]` matches (rows past its end are cut), or the index changed between
    /// the count and the write pass (a batch on another stream), so that a row may hold
    /// fewer or more than it says; search again then, with an `out` of at least the total.
    ///
    /// Only the queries are host data (they pick each group's space); nothing waits for
    /// the device. The batch's fields go into the query history, but an async search
    /// never takes an adaptive look at it (the next [`HyperspaceIndex::search_on`] that
    /// finds one due does). A modify on another thread waits for the search's kernels (an
    /// event recorded after them) before it takes old copies out, so the async search
    /// keeps the once-or-twice guarantee too; a row may then hold another number than
    /// counted, which `incomplete` tells.
    pub fn search_async(
        &self,
        stream: &Stream,
        queries: &[Query],
        offsets: &mut DeviceBuffer<u64>,
        out: &mut DeviceTuples,
        incomplete: &mut DeviceBuffer<u64>,
    ) -> Result<()> {
        check_queries(self.attribute_count(), queries)?;
        let n = queries.len();
        let capacity = out.len();
        let lengths = [
            ("queries plus one and offsets", n + 1, offsets.len()),
            ("one word and incomplete", 1, incomplete.len()),
            ("answer keys and values", capacity, out.values.len()),
            (
                "p columns of answer keys and answer attributes",
                capacity.saturating_mul(self.attribute_count()),
                out.attributes.len(),
            ),
        ];
        for (what, left, right) in lengths {
            if left != right {
                return Err(gpuhash_core::Error::LengthMismatch { what, left, right }.into());
            }
        }
        let (population, _) = self.observe_searches(queries, false)?;
        let search = self.grace.begin_search();
        let spaces = self.spaces();
        let batch = self.search_batch(&spaces, stream, queries, &population)?;
        let mut counts = batch.count(stream)?;
        exclusive_scan(stream, &counts, offsets)?;
        let found = batch.write(stream, offsets, &counts, out)?;
        incomplete.fill_zero(stream)?;
        let rows = SettleRows {
            found: &found,
            room: &mut counts,
            exact: true,
            pad: false,
            flag: Some(incomplete),
            total: Some((offsets, n)),
            capacity: capacity as u64,
        };
        launch::settle_rows(stream, rows)?;
        // A modify waits for the kernels, not for this return.
        Ok(search.end_after(stream)?)
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
        let batch = self.search_batch(&spaces, stream, queries, population)?;
        let n = queries.len();
        let p = self.attribute_count();
        let counts = batch.count(stream)?;
        // Room for a quarter more than counted (and 8): a batch on another thread may add
        // copies (a modify in flight) between the passes.
        let mut room = DeviceBuffer::<u64>::unfilled(stream, n)?;
        launch::settle_rows(stream, padding(&counts, &mut room, None))?;
        loop {
            let mut padded = DeviceBuffer::<u64>::unfilled(stream, n + 1)?;
            exclusive_scan(stream, &room, &mut padded)?;
            let capacity = words_to_usize(scanned_total(stream, &padded)?)?;
            let mut written = DeviceTuples::unfilled(stream, p, capacity)?;
            let found = batch.write(stream, &padded, &room, &mut written)?;
            // A query that found more than its room runs again with the room of what it
            // found; the room is laid out again from every query's find.
            let mut overflow = DeviceBuffer::<u64>::zeroed(stream, 1)?;
            launch::settle_rows(stream, padding(&found, &mut room, Some(&mut overflow)))?;
            let mut offsets = DeviceBuffer::<u64>::unfilled(stream, n + 1)?;
            exclusive_scan(stream, &found, &mut offsets)?;
            let (total, overflowed) = total_and_flag(stream, &offsets, &overflow)?;
            if !overflowed {
                let mut out = DeviceTuples::unfilled(stream, p, words_to_usize(total)?)?;
                launch::compact(stream, &written, &padded, &offsets, &mut out, p)?;
                return Ok(DeviceMatches {
                    offsets,
                    tuples: out,
                });
            }
        }
    }

    /// The batch's queries grouped by the fields they name, each group planned in its
    /// best space.
    fn search_batch<'a>(
        &self,
        spaces: &'a Spaces<'a>,
        stream: &Stream,
        queries: &[Query],
        population: &Population,
    ) -> Result<SearchBatch<'a>> {
        let stride = GH_HS_MAX_FIELDS as usize;
        let mut words = vec![0u32; queries.len() * stride];
        let mut groups: BTreeMap<FieldSet, Vec<u32>> = BTreeMap::new();
        for (q, query) in queries.iter().enumerate() {
            groups.entry(query.fields()).or_default().push(q as u32);
            for &(field, value) in query.predicates() {
                words[q * stride + field.index() as usize] = value;
            }
        }
        let words = DeviceBuffer::from_host(stream, &words)?;
        let grouped = self.options.read().search == SearchStrategy::Grouped;
        let all = spaces.all();
        let plans = groups
            .into_iter()
            .map(|(named, members)| {
                let space = all[best_space(spaces, named, population)];
                space.plan(stream, &words, &members, named, grouped)
            })
            .collect::<Result<_>>()?;
        Ok(SearchBatch {
            plans,
            words,
            queries: queries.len(),
        })
    }
}

/// The settling that lays out room from `found` (counts or a write pass's finds), judging
/// the room it replaces when `overflow` is given.
fn padding<'a>(
    found: &'a DeviceBuffer<u64>,
    room: &'a mut DeviceBuffer<u64>,
    overflow: Option<&'a mut DeviceBuffer<u64>>,
) -> SettleRows<'a> {
    SettleRows {
        found,
        room,
        exact: false,
        pad: true,
        flag: overflow,
        total: None,
        capacity: 0,
    }
}

/// The last of `offsets` and whether `flag` (one word) is raised, read together: one wait.
fn total_and_flag(
    stream: &Stream,
    offsets: &DeviceBuffer<u64>,
    flag: &DeviceBuffer<u64>,
) -> Result<(u64, bool)> {
    let last = offsets.len() - 1;
    let mut words = stream.device().pinned_pool().take::<u64>(2)?;
    offsets.copy_to_pinned_range_async(stream, last..last + 1, &mut words, 0)?;
    flag.copy_to_pinned_range_async(stream, 0..1, &mut words, 1)?;
    // Reading the pinned buffer waits for the copies into it.
    Ok((words[0], words[1] != 0))
}

/// A count of tuples as a buffer length.
fn words_to_usize(count: u64) -> Result<usize> {
    usize::try_from(count).map_err(|_| {
        gpuhash_core::Error::InvalidInput(format!("{count} matches do not fit the host")).into()
    })
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
