//! A shard: a range of buckets of one space with its own super nodes, and the chain
//! operations on them (fill, walk, find, append, overwrite).

use super::cpu_index::{EMPTY, LINK, NODE_WORDS, NONE, REMOVED, SLOTS, Tuples};

/// A range of buckets of one space with its own nodes.
#[derive(Clone, Debug, Default)]
pub(super) struct Shard {
    /// First node of each bucket, [`NONE`] for an empty bucket.
    pub(super) heads: Vec<u32>,
    /// Last node of each bucket.
    pub(super) tails: Vec<u32>,
    /// Super nodes of `stride` words each.
    pub(super) nodes: Vec<u32>,
}

impl Shard {
    /// Builds the shard, empty, from `(bucket, tuple)` items: counting sort by bucket, each
    /// bucket's nodes contiguous and full but the last.
    pub(super) fn fill(
        &mut self,
        items: impl Iterator<Item = (u32, u32)> + Clone,
        tuples: &Tuples,
        p: usize,
        stride: usize,
    ) {
        let buckets = self.heads.len();
        let mut counts = vec![0usize; buckets];
        items.clone().for_each(|(b, _)| counts[b as usize] += 1);
        let mut first_node = Vec::with_capacity(buckets);
        let mut total = 0usize;
        for (b, &count) in counts.iter().enumerate() {
            first_node.push(total);
            let nodes = count.div_ceil(SLOTS);
            if nodes > 0 {
                self.heads[b] = total as u32;
                self.tails[b] = (total + nodes - 1) as u32;
            }
            total += nodes;
        }
        self.nodes = vec![EMPTY; total * stride];
        // Links inside each bucket; the last node's link stays NONE (EMPTY).
        for (b, &count) in counts.iter().enumerate() {
            let nodes = count.div_ceil(SLOTS);
            for k in 1..nodes {
                let node = first_node[b] + k - 1;
                self.nodes[node * stride + LINK] = (node + 1) as u32;
            }
        }
        let mut filled = vec![0usize; buckets];
        for (b, t) in items {
            let b = b as usize;
            let position = filled[b];
            filled[b] += 1;
            let base = (first_node[b] + position / SLOTS) * stride + position % SLOTS;
            for c in 0..p + 2 {
                self.nodes[base + c * NODE_WORDS] = tuples.field(p, c, t as usize);
            }
        }
    }

    /// A valid key held twice in one bucket, if any.
    pub(super) fn first_duplicate(&self, stride: usize) -> Option<u32> {
        let mut keys = Vec::new();
        self.heads.iter().find_map(|&head| {
            keys.clear();
            for base in self.chain(head, stride) {
                keys.extend(
                    self.nodes[base..base + SLOTS]
                        .iter()
                        .copied()
                        .filter(|&k| is_valid(k)),
                );
            }
            keys.sort_unstable();
            keys.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
        })
    }

    /// Every valid tuple, as `p + 2` columns (key, attributes, value).
    pub(super) fn columns(&self, p: usize, stride: usize) -> Vec<Vec<u32>> {
        let mut columns = vec![Vec::new(); p + 2];
        for &head in &self.heads {
            for base in self.chain(head, stride) {
                for s in (0..SLOTS).filter(|&s| is_valid(self.nodes[base + s])) {
                    for (c, column) in columns.iter_mut().enumerate() {
                        column.push(self.nodes[base + c * NODE_WORDS + s]);
                    }
                }
            }
        }
        columns
    }

    /// The first word of each super node of the chain from `head`, in order.
    pub(super) fn chain(&self, head: u32, stride: usize) -> impl Iterator<Item = usize> + '_ {
        let first = (head != NONE).then_some(head as usize * stride);
        std::iter::successors(first, move |&base| {
            let next = self.nodes[base + LINK];
            (next != NONE).then_some(next as usize * stride)
        })
    }

    /// The word index of `key`'s slot in its key node in bucket `bucket`, if there.
    pub(super) fn find(&self, bucket: usize, key: u32, stride: usize) -> Option<usize> {
        self.chain(self.heads[bucket], stride)
            .find_map(|base| (base..base + SLOTS).find(|&w| self.nodes[w] == key))
    }

    /// Writes `row` (key, attributes, value) into the first empty slot of the tail node of
    /// `bucket`, or a new node linked after it.
    pub(super) fn append(&mut self, bucket: usize, row: &[u32], stride: usize) {
        let tail = self.tails[bucket];
        let free = (tail != NONE)
            .then(|| {
                let base = tail as usize * stride;
                (0..SLOTS)
                    .map(|s| base + s)
                    .find(|&w| self.nodes[w] == EMPTY)
            })
            .flatten();
        let slot = free.unwrap_or_else(|| {
            let node = (self.nodes.len() / stride) as u32;
            self.nodes.resize(self.nodes.len() + stride, EMPTY);
            if tail == NONE {
                self.heads[bucket] = node;
            } else {
                self.nodes[tail as usize * stride + LINK] = node;
            }
            self.tails[bucket] = node;
            node as usize * stride
        });
        for (c, &word) in row.iter().enumerate() {
            self.nodes[slot + c * NODE_WORDS] = word;
        }
    }

    /// Writes the fields after the key of `row` into the slot whose key word is at `slot`.
    pub(super) fn overwrite(&mut self, slot: usize, row: &[u32]) {
        for (c, &word) in row.iter().enumerate().skip(1) {
            self.nodes[slot + c * NODE_WORDS] = word;
        }
    }

    /// The row of the slot whose key word is at `slot`.
    pub(super) fn row_at(&self, slot: usize, p: usize) -> Vec<u32> {
        (0..p + 2)
            .map(|c| self.nodes[slot + c * NODE_WORDS])
            .collect()
    }
}

/// Whether a key word holds a tuple.
pub(super) fn is_valid(key: u32) -> bool {
    key != EMPTY && key != REMOVED
}
