//! Bulk build (the GHSH paper, section 4.2.1) and the counting sort it shares with
//! searches: items sorted by a part number with a histogram kernel, a prefix sum on the
//! device ([`gpuhash_core::scan`]) and a scatter kernel; then the super nodes, numbered
//! bucket after bucket from the prefix sums of their counts (also scanned on the device:
//! only the two totals cross to the host), are allocated and written whole, any warp taking
//! any super node.

use gpuhash_core::scan::exclusive_scan;
use gpuhash_core::{DeviceBuffer, Stream};
use gpuhash_slab_alloc::Exhaustion;

use crate::Result;
use crate::launch::{self, BuildPass, BuildPlan, Partition};
use crate::space::{Slabs, Space};
use crate::tuples::DeviceTuples;

/// A counting sort's outcome: the order that sorts the items by part, and the histogram
/// of the parts with its exclusive prefix sums (`parts + 1` offsets, the total last).
struct Sorted {
    order: DeviceBuffer<u32>,
    histogram: DeviceBuffer<u64>,
    offsets: DeviceBuffer<u64>,
}

/// The order that sorts `keys` by `key & (parts - 1)` (`parts` a power of two), the
/// parts' histogram and offsets, all on the device: queued, nothing waits. Items of one
/// part keep no particular order.
fn counting_sort(stream: &Stream, keys: &DeviceBuffer<u32>, parts: u64) -> Result<Sorted> {
    let histogram = part_histogram(stream, keys, parts)?;
    let mut offsets = DeviceBuffer::unfilled(stream, parts as usize + 1)?;
    exclusive_scan(stream, &histogram, &mut offsets)?;
    let mut cursors = DeviceBuffer::unfilled(stream, parts as usize + 1)?;
    cursors.copy_from(stream, &offsets)?;
    let order = scatter_parts(stream, keys, parts, &mut cursors)?;
    Ok(Sorted {
        order,
        histogram,
        offsets,
    })
}

/// The order of [`counting_sort`] alone (searches sort their subtasks so).
pub(crate) fn counting_order(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    parts: u64,
) -> Result<DeviceBuffer<u32>> {
    Ok(counting_sort(stream, keys, parts)?.order)
}

/// Items of each part `key & (parts - 1)`.
fn part_histogram(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    parts: u64,
) -> Result<DeviceBuffer<u64>> {
    debug_assert!(parts.is_power_of_two() && parts <= 1 << 32);
    let mut histogram = DeviceBuffer::<u64>::zeroed(stream, parts as usize)?;
    let histogram_pass = Partition::Histogram {
        histogram: &mut histogram,
    };
    launch::partition(stream, keys, (parts - 1) as u32, histogram_pass)?;
    Ok(histogram)
}

/// The scatter of a counting sort, from `cursors` (at least `parts` words: where each
/// part starts).
fn scatter_parts(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    parts: u64,
    cursors: &mut DeviceBuffer<u64>,
) -> Result<DeviceBuffer<u32>> {
    let mut order = DeviceBuffer::<u32>::unfilled(stream, keys.len())?;
    let scatter = Partition::Scatter {
        cursors,
        order: &mut order,
    };
    launch::partition(stream, keys, (parts - 1) as u32, scatter)?;
    Ok(order)
}

/// The rows of a batch's tuples ([`launch::tuple_rows`]), which every space's build
/// sorts by its buckets.
pub(crate) fn tuple_rows(stream: &Stream, tuples: &DeviceTuples) -> Result<DeviceBuffer<u32>> {
    let p = tuples.attributes.len() / tuples.len().max(1);
    let mut rows = DeviceBuffer::unfilled(stream, tuples.len() * (p + 2))?;
    launch::tuple_rows(stream, tuples, p, &mut rows)?;
    Ok(rows)
}

/// Where the super nodes of a build lie: each bucket's first super node, numbered bucket
/// after bucket (`bucket_count + 1` words, the total last), on the device, and on the host
/// the total and the super nodes past the heads (those the allocator serves). One wait.
struct NodePlan {
    starts: DeviceBuffer<u64>,
    nodes: u64,
    past_heads: u64,
}

/// The [`NodePlan`] of buckets of `histogram`: a bucket of c tuples takes ceil(c / 31)
/// super nodes, its head among them, an empty bucket none.
fn node_plan(stream: &Stream, histogram: &DeviceBuffer<u64>) -> Result<NodePlan> {
    let mut nodes = DeviceBuffer::unfilled(stream, histogram.len())?;
    let mut totals = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    launch::node_counts(stream, histogram, &mut nodes, &mut totals)?;
    let mut starts = DeviceBuffer::unfilled(stream, histogram.len() + 1)?;
    exclusive_scan(stream, &nodes, &mut starts)?;
    let totals = totals.to_host(stream)?;
    Ok(NodePlan {
        starts,
        nodes: totals[0],
        past_heads: totals[1],
    })
}

impl Space {
    /// Fills this space, which must be empty, with `tuples` (whose keys are unique; `rows`
    /// the same tuples as [`tuple_rows`] lays them out): sorted by bucket, a run of slabs
    /// taken for every super node past a head, then every super node written whole. When
    /// some super node finds no run, every run is given back, the allocator grows and the
    /// runs are taken again, before anything is written; a growth error leaves the space
    /// empty.
    pub(crate) fn build(
        &self,
        stream: &Stream,
        tuples: &DeviceTuples,
        rows: &DeviceBuffer<u32>,
    ) -> Result<()> {
        let buckets = self.buckets(stream, tuples)?;
        let sorted = counting_sort(stream, &buckets, self.shape().bucket_count())?;
        drop(buckets);
        let mut sorted_rows = DeviceBuffer::unfilled(stream, rows.len())?;
        let width = self.attribute_count() + 2;
        launch::permute(stream, rows, &sorted.order, &mut sorted_rows, width)?;
        let plan = node_plan(stream, &sorted.histogram)?;
        let (node_starts, offsets) = (plan.starts, sorted.offsets);
        let needed = plan.past_heads * (self.attribute_count() as u64 + 2);
        let mut links = DeviceBuffer::<u32>::unfilled(stream, plan.nodes as usize)?;
        let mut slabs = self.write_with_room(stream, needed)?;
        let mut run = |slabs: &Slabs, exhaustion: &mut Exhaustion, pass: BuildPass| {
            self.with_space(slabs, stream, exhaustion.address(stream), |space| {
                let plan = BuildPlan {
                    offsets: &offsets,
                    node_starts: &node_starts,
                    links: &mut links,
                };
                launch::build(stream, space, &sorted_rows, plan, pass)
            })
        };
        loop {
            let mut exhaustion = Exhaustion::new(stream)?;
            run(&slabs, &mut exhaustion, BuildPass::Links)?;
            if !exhaustion.happened(stream)? {
                run(&slabs, &mut exhaustion, BuildPass::Nodes)?;
                return Ok(());
            }
            Space::clear_locked(&mut slabs, stream)?;
            Space::grow_locked(&mut slabs, stream)?;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The host model of the plan the kernels lay out (`gh_hs_node_counts`, the scans, and
    //! the build kernels' search of a node's bucket).
    use gpuhash_slab_list::layouts::GH_SLAB_DATA_LANES;

    /// Where each group starts when groups of `counts` lie end to end, and the total last.
    fn prefix_offsets(counts: &[u64]) -> Vec<u64> {
        std::iter::once(0)
            .chain(counts.iter().scan(0u64, |total, &c| {
                *total += c;
                Some(*total)
            }))
            .collect()
    }

    /// Super nodes past the heads that buckets of these offsets fill: a bucket of c tuples
    /// takes ceil(c / 31), its head among them.
    fn super_nodes_beyond_heads(offsets: &[u64]) -> u64 {
        offsets
            .windows(2)
            .map(|w| {
                (w[1] - w[0])
                    .div_ceil(u64::from(GH_SLAB_DATA_LANES))
                    .saturating_sub(1)
            })
            .sum()
    }

    /// Where each bucket's super nodes start when they are numbered bucket after bucket (and
    /// the total last): a bucket of `c` tuples (between `offsets` that lie end to end) takes
    /// ceil(c / 31) super nodes, its head among them, an empty bucket none.
    fn node_starts(offsets: &[u64]) -> Vec<u64> {
        let nodes: Vec<u64> = offsets
            .windows(2)
            .map(|w| (w[1] - w[0]).div_ceil(u64::from(GH_SLAB_DATA_LANES)))
            .collect();
        prefix_offsets(&nodes)
    }

    #[test]
    fn offsets_lay_parts_end_to_end() {
        assert_eq!(prefix_offsets(&[3, 0, 2]), vec![0, 3, 3, 5]);
        assert_eq!(prefix_offsets(&[]), vec![0]);
    }

    #[test]
    fn buckets_past_one_node_take_more_super_nodes() {
        assert_eq!(super_nodes_beyond_heads(&[0, 0, 31, 63, 156]), 3);
    }

    #[test]
    fn super_nodes_are_numbered_bucket_after_bucket() {
        // Buckets of 0, 31, 32, 93 and 1 tuples: 0, 1, 2, 3 and 1 super nodes.
        let offsets = [0, 0, 31, 63, 156, 157];
        let starts = node_starts(&offsets);
        assert_eq!(starts, vec![0, 0, 1, 3, 6, 7]);
        // The super nodes past the heads are those the allocator serves.
        let buckets = offsets.len() - 1;
        let non_empty = offsets.windows(2).filter(|w| w[1] > w[0]).count() as u64;
        assert_eq!(
            starts[buckets] - non_empty,
            super_nodes_beyond_heads(&offsets)
        );
        assert_eq!(node_starts(&[0]), vec![0]);
    }

    /// What the kernels compute for super node `t`, on the host: its bucket, its place in
    /// the bucket, and its first tuple; with the next super node of the bucket, if any.
    fn node_on_host(offsets: &[u64], starts: &[u64], t: u64) -> (usize, u64, u64, Option<u64>) {
        // The build kernels' search: the last bucket starting at or before t.
        let (mut low, mut high) = (0usize, offsets.len() - 2);
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if starts[middle] <= t {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        let j = t - starts[low];
        let next = (t + 1 < starts[low + 1]).then_some(t + 1);
        (
            low,
            j,
            offsets[low] + j * u64::from(GH_SLAB_DATA_LANES),
            next,
        )
    }

    #[test]
    fn every_tuple_lands_in_one_super_node_of_its_bucket_linked_in_order() {
        // Empty buckets first, between and last; one huge bucket; single-node buckets.
        let counts = [0u64, 0, 5, 0, 31, 32, 0, 0, 5000, 1, 62, 0];
        let offsets = prefix_offsets(&counts);
        let starts = node_starts(&offsets);
        let nodes = *starts.last().unwrap();
        let mut holder = vec![None; *offsets.last().unwrap() as usize];
        let mut heads = 0;
        for t in 0..nodes {
            let (bucket, j, first, next) = node_on_host(&offsets, &starts, t);
            assert!(
                counts[bucket] > 0,
                "super node {t} in empty bucket {bucket}"
            );
            heads += u64::from(j == 0);
            let end = offsets[bucket + 1];
            assert!(first < end, "super node {t} holds no tuple");
            for i in first..(first + u64::from(GH_SLAB_DATA_LANES)).min(end) {
                assert_eq!(holder[i as usize].replace(t), None, "tuple {i} twice");
            }
            // The link: the bucket's next super node, which starts where this one ends.
            if let Some(next) = next {
                let (next_bucket, next_j, next_first, _) = node_on_host(&offsets, &starts, next);
                assert_eq!((next_bucket, next_j), (bucket, j + 1));
                assert_eq!(next_first, first + u64::from(GH_SLAB_DATA_LANES));
            } else {
                assert!(first + u64::from(GH_SLAB_DATA_LANES) >= end);
            }
        }
        assert!(holder.iter().all(Option::is_some));
        assert_eq!(nodes - heads, super_nodes_beyond_heads(&offsets));
    }
}
