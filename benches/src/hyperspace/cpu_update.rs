//! Modifies and deletes of the CPU index, each space's items grouped by shard so that a
//! thread owns each shard.
//!
//! A modify that moves a tuple to another bucket of a space follows GHSH's order: the new
//! copy goes into the new bucket first, then the old copy is deleted (the temporary
//! repeated read); within the bucket it has, the tuple is overwritten in place.

use std::collections::HashSet;

use super::cpu_index::{CpuHyperspace, CpuIndexError, REMOVED, Space, check_len, for_chunks};
use super::shard::{Shard, is_valid};

/// Items of a batch for one space: the bucket each concerns and the item's index.
type Ops = Vec<(usize, usize)>;

impl Space {
    /// Runs `op(shard, bucket in shard, item)` for each of `ops`, each shard's items on a
    /// thread of their own, in batch order within a shard.
    fn per_shard(&mut self, ops: &Ops, op: impl Fn(&mut Shard, usize, usize) + Sync) {
        let mut by_shard: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.shards.len()];
        for &(bucket, item) in ops {
            let (shard, local) = self.locate(bucket);
            by_shard[shard].push((local, item));
        }
        std::thread::scope(|scope| {
            for (shard, items) in self.shards.iter_mut().zip(&by_shard) {
                if items.is_empty() {
                    continue;
                }
                let op = &op;
                scope.spawn(move || {
                    items
                        .iter()
                        .for_each(|&(local, item)| op(shard, local, item))
                });
            }
        });
    }

    /// The bucket of a row (key, attributes, value).
    fn bucket_of(&self, row: &[u32]) -> usize {
        self.bucket(|c| row[c])
    }
}

impl CpuHyperspace {
    /// The row of each key, read from the key index on all threads.
    fn rows_of(&self, keys: &[u32]) -> Vec<Option<Vec<u32>>> {
        let key_index = &self.spaces[0];
        for_chunks(keys.len(), self.threads, |range| {
            keys[range]
                .iter()
                .map(|&key| {
                    let (s, local) = key_index.locate(key_index.bucket(|_| key));
                    let shard = &key_index.shards[s];
                    let slot = is_valid(key)
                        .then(|| shard.find(local, key, key_index.stride))
                        .flatten();
                    slot.map(|slot| shard.row_at(slot, self.attributes))
                })
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect()
    }

    /// Gives each key's tuple the attributes (column-major, `p * q`) and value given;
    /// returns whether each key was there. A tuple whose bucket changes in a space is
    /// inserted into the new bucket, then deleted from the old. Fails, changing nothing,
    /// on bad lengths or a key twice.
    pub fn modify(
        &mut self,
        keys: &[u32],
        attributes: &[u32],
        values: &[u32],
    ) -> Result<Vec<bool>, CpuIndexError> {
        let (p, q) = (self.attributes, keys.len());
        check_len("modify values", q, values.len())?;
        check_len("modify attributes", p * q, attributes.len())?;
        let mut seen = HashSet::with_capacity(q);
        if let Some(&key) = keys.iter().find(|&&k| !seen.insert(k)) {
            return Err(CpuIndexError::DuplicateKey(key));
        }
        let old = self.rows_of(keys);
        let new: Vec<Vec<u32>> = (0..q)
            .map(|i| {
                let mut row = Vec::with_capacity(p + 2);
                row.push(keys[i]);
                row.extend((0..p).map(|a| attributes[a * q + i]));
                row.push(values[i]);
                row
            })
            .collect();
        let found: Vec<usize> = (0..q).filter(|&i| old[i].is_some()).collect();
        let old_row = |i: usize| old[i].as_deref().expect("found items have a row");
        let threads = self.threads;
        for space in &mut self.spaces {
            let stride = space.stride;
            let buckets: Vec<(usize, usize, usize)> = for_chunks(found.len(), threads, |range| {
                found[range]
                    .iter()
                    .map(|&i| (space.bucket_of(old_row(i)), space.bucket_of(&new[i]), i))
                    .collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect();
            let (stay, moves): (Vec<_>, Vec<_>) =
                buckets.into_iter().partition(|&(from, to, _)| from == to);
            let stay: Ops = stay.into_iter().map(|(from, _, i)| (from, i)).collect();
            space.per_shard(&stay, |shard, bucket, i| {
                let slot = shard
                    .find(bucket, keys[i], stride)
                    .expect("a held tuple is in its bucket");
                shard.overwrite(slot, &new[i]);
            });
            let inserts: Ops = moves.iter().map(|&(_, to, i)| (to, i)).collect();
            space.per_shard(&inserts, |shard, bucket, i| {
                shard.append(bucket, &new[i], stride)
            });
            let deletes: Ops = moves.iter().map(|&(from, _, i)| (from, i)).collect();
            space.per_shard(&deletes, |shard, bucket, i| {
                shard.remove(bucket, keys[i], stride);
            });
        }
        Ok(old.iter().map(Option::is_some).collect())
    }

    /// Deletes each key's tuple from every space; returns whether each key was there (a
    /// key twice in the batch: the first deletes, the second finds nothing).
    pub fn delete(&mut self, keys: &[u32]) -> Vec<bool> {
        let old = self.rows_of(keys);
        let mut seen = HashSet::with_capacity(keys.len());
        let deleted: Vec<bool> = keys
            .iter()
            .zip(&old)
            .map(|(&key, row)| row.is_some() && seen.insert(key))
            .collect();
        let items: Vec<usize> = (0..keys.len()).filter(|&i| deleted[i]).collect();
        for space in &mut self.spaces {
            let stride = space.stride;
            let ops: Ops = items
                .iter()
                .map(|&i| (space.bucket_of(old[i].as_deref().expect("found")), i))
                .collect();
            space.per_shard(&ops, |shard, bucket, i| {
                shard.remove(bucket, keys[i], stride);
            });
        }
        self.len -= items.len();
        self.population.tuples = self.len as u64;
        deleted
    }
}

impl Shard {
    /// Marks `key`'s slot in `bucket` removed; whether it was there.
    fn remove(&mut self, bucket: usize, key: u32, stride: usize) -> bool {
        match self.find(bucket, key, stride) {
            Some(slot) => {
                self.nodes[slot] = REMOVED;
                true
            }
            None => false,
        }
    }
}
