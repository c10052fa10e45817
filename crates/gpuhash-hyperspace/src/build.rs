//! Bulk build (the GHSH paper, section 4.2.1) and the counting sort it shares with
//! searches: items sorted by a part number with a histogram kernel, a prefix sum on the
//! host, and a scatter kernel; then one warp per bucket writes whole super nodes.

use gpuhash_core::{DeviceBuffer, Stream};
use gpuhash_slab_alloc::Exhaustion;
use gpuhash_slab_list::layouts::GH_SLAB_DATA_LANES;

use crate::Result;
use crate::launch::{self, Partition};
use crate::space::Space;
use crate::tuples::DeviceTuples;

/// The order that sorts `keys` by `key & (parts - 1)` (`parts` a power of two), and the
/// offsets of each part in it (`parts + 1` of them). Items of one part keep no particular
/// order.
pub(crate) fn counting_sort(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    parts: u64,
) -> Result<(DeviceBuffer<u32>, Vec<u64>)> {
    debug_assert!(parts.is_power_of_two() && parts <= 1 << 32);
    let mask = (parts - 1) as u32;
    let mut histogram = DeviceBuffer::<u64>::zeroed(stream, parts as usize)?;
    launch::partition(
        stream,
        keys,
        mask,
        Partition::Histogram {
            histogram: &mut histogram,
        },
    )?;
    let offsets = prefix_offsets(&histogram.to_host(stream)?);
    let mut cursors = DeviceBuffer::from_host(stream, &offsets[..parts as usize])?;
    let mut order = DeviceBuffer::<u32>::unfilled(stream, keys.len())?;
    launch::partition(
        stream,
        keys,
        mask,
        Partition::Scatter {
            cursors: &mut cursors,
            order: &mut order,
        },
    )?;
    Ok((order, offsets))
}

/// Where each group starts when groups of `counts` lie end to end, and the total last.
pub(crate) fn prefix_offsets(counts: &[u64]) -> Vec<u64> {
    std::iter::once(0)
        .chain(counts.iter().scan(0u64, |total, &c| {
            *total += c;
            Some(*total)
        }))
        .collect()
}

/// Super nodes past the heads that buckets of these offsets fill: a bucket of c tuples
/// takes ceil(c / 31), its head among them.
pub(crate) fn super_nodes_beyond_heads(offsets: &[u64]) -> u64 {
    offsets
        .windows(2)
        .map(|w| {
            (w[1] - w[0])
                .div_ceil(u64::from(GH_SLAB_DATA_LANES))
                .saturating_sub(1)
        })
        .sum()
}

/// `column` (`columns` columns of `order.len()` words) reordered by `order`.
fn permuted(
    stream: &Stream,
    column: &DeviceBuffer<u32>,
    columns: usize,
    order: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u32>> {
    let n = order.len();
    let mut out = DeviceBuffer::unfilled(stream, n * columns)?;
    for c in 0..columns {
        launch::permute(stream, column, c * n, order, &mut out, c * n)?;
    }
    Ok(out)
}

impl Space {
    /// Fills this space, which must be empty, with `tuples` (whose keys are unique):
    /// sorted by bucket, then written whole node by node. If a warp finds no super node
    /// the space is cleared, grown and built again; a growth error leaves it empty.
    pub(crate) fn build(&self, stream: &Stream, tuples: &DeviceTuples) -> Result<()> {
        let buckets = self.buckets(stream, tuples)?;
        let (order, offsets) = counting_sort(stream, &buckets, self.shape().bucket_count())?;
        let sorted = DeviceTuples {
            keys: permuted(stream, &tuples.keys, 1, &order)?,
            attributes: permuted(stream, &tuples.attributes, self.attribute_count(), &order)?,
            values: permuted(stream, &tuples.values, 1, &order)?,
        };
        let needed = super_nodes_beyond_heads(&offsets) * (self.attribute_count() as u64 + 2);
        let offsets = DeviceBuffer::from_host(stream, &offsets)?;
        let mut slabs = self.write_with_room(stream, needed)?;
        loop {
            let mut exhaustion = Exhaustion::new(stream)?;
            self.with_space(&slabs, stream, exhaustion.address(stream), |space| {
                launch::build(stream, space, &sorted, &offsets)
            })?;
            if !exhaustion.happened(stream)? {
                return Ok(());
            }
            Space::clear_locked(&mut slabs, stream)?;
            Space::grow_locked(&mut slabs, stream)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_lay_parts_end_to_end() {
        assert_eq!(prefix_offsets(&[3, 0, 2]), vec![0, 3, 3, 5]);
        assert_eq!(prefix_offsets(&[]), vec![0]);
    }

    #[test]
    fn buckets_past_one_node_take_more_super_nodes() {
        assert_eq!(super_nodes_beyond_heads(&[0, 0, 31, 63, 156]), 3);
    }
}
