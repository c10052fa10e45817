//! [`ShardedTable`]: one shard table a rank of a [`Comm`].

use gpuhash_core::table::{Key, Map};
use gpuhash_core::{Result, Stream};
use gpuhash_cuckoo::CuckooTable;
use gpuhash_swap::policy::Spread;
use parking_lot::Mutex;

use crate::comm::Comm;
use crate::options::ShardOptions;

/// A map spread over the GPUs of a [`Comm`]: shard `i`, a table `T` of the contract, lives
/// on rank `i`'s GPU and holds the keys [`ShardedTable::owner_of`] gives it. Speaks the
/// contract itself ([`gpuhash_core::table::Map`]): a batch may come from a stream of any
/// of the local ranks' GPUs. On a communicator of several processes
/// ([`Comm::from_rank`]) each process holds its own rank's shard, and every verb is
/// collective (see the crate docs).
pub struct ShardedTable<T> {
    pub(crate) comm: Comm,
    /// The local ranks' shards, in order.
    pub(crate) shards: Vec<T>,
    /// Serializes batches: the ranks' own streams and NCCL communicators take one batch at
    /// a time.
    pub(crate) batch: Mutex<()>,
}

/// The default: DyHash shards ([`gpuhash_cuckoo::CuckooTable`]).
pub type ShardedMap<K, V> = ShardedTable<CuckooTable<K, V>>;

impl<T: Map> ShardedTable<T> {
    /// A table over `comm`'s GPUs, one shard a local rank made by `options.make_shard` for
    /// its share of the capacity (the share of every rank, local or not). The first shard
    /// that cannot be made fails the whole.
    pub fn new(comm: Comm, options: ShardOptions<T>) -> Result<Self, T::Error> {
        let capacity = options.shard_capacity(comm.ranks());
        let shards = comm
            .local_ranks()
            .map(|rank| (options.make_shard)(comm.device(rank), capacity))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            comm,
            shards,
            batch: Mutex::new(()),
        })
    }

    /// The communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// The shard of rank `rank`, to read on its own (its device is the rank's).
    ///
    /// # Panics
    /// When `rank` is not one of the communicator's [`Comm::local_ranks`].
    pub fn shard(&self, rank: usize) -> &T {
        let local = self.comm.local_ranks();
        assert!(
            local.contains(&rank),
            "rank {rank} is not one of this process's ({local:?})"
        );
        &self.shards[rank - local.start]
    }

    /// The local place of `stream`'s rank and the stream to work on there, and whether
    /// the stream is refused. Where every rank is local a stream of another device is an
    /// error at once; in several processes this process still takes part, with no keys,
    /// on its rank's own stream, so that its peers are not left waiting, and the refusal
    /// returns after.
    pub(crate) fn caller<'s>(
        &'s self,
        stream: &'s Stream,
    ) -> Result<(usize, &'s Stream, Result<()>)> {
        match self.comm.local_of(stream) {
            Ok(local) => Ok((local, stream, Ok(()))),
            Err(error) if self.comm.is_whole() => Err(error),
            Err(error) => Ok((0, &self.comm.local_list()[0].stream, Err(error))),
        }
    }

    /// The rank that owns `key` in a table of `ranks` shards: [`owners`]`(ranks)`'s part,
    /// the same choice the partition kernel makes on the GPU, which follows neither the
    /// shards' own hashing nor a Starfish shard's choice of its children.
    pub fn owner_of(key: T::Key, ranks: usize) -> usize {
        owners(ranks).part_of(Key::widen(key)) as usize
    }
}

/// The seed of the owners' spread, apart from the Starfish children's (`GH_SWAP_SEED`).
pub const OWNER_SEED: u64 = 0x0bd5_c3a1_e7f2_9d47;

/// How keys spread over `ranks` shards: [`Spread`] with [`OWNER_SEED`].
pub fn owners(ranks: usize) -> Spread {
    Spread {
        parts: ranks as u32,
        seed: OWNER_SEED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuhash_swap::policy::child_of;

    /// The keys of each owner, put in a Starfish table of 16 children, reach every child:
    /// the owners' seed is not the children's.
    #[test]
    fn each_owners_keys_reach_every_child_of_a_starfish_shard() {
        for ranks in [2usize, 4, 8] {
            let mut reached = vec![vec![0usize; 16]; ranks];
            for key in 0..200_000u64 {
                let owner = ShardedMap::<u64, u64>::owner_of(key, ranks);
                reached[owner][child_of(key, 16) as usize] += 1;
            }
            for (owner, children) in reached.iter().enumerate() {
                let fewest = children.iter().min().copied().unwrap_or(0);
                let even = 200_000 / ranks / 16;
                assert!(fewest > even / 2, "owner {owner} of {ranks}: {children:?}");
            }
        }
    }

    #[test]
    fn owners_are_ranks_and_spread_evenly() {
        for ranks in [1usize, 2, 3, 8] {
            let mut counts = vec![0usize; ranks];
            for key in 0..80_000u64 {
                let owner = ShardedMap::<u64, u64>::owner_of(key, ranks);
                assert!(owner < ranks);
                counts[owner] += 1;
            }
            let even = 80_000 / ranks;
            assert!(
                counts.iter().all(|&c| c.abs_diff(even) < even / 20),
                "{counts:?}"
            );
        }
    }

    #[test]
    fn owners_of_u32_keys_follow_their_widened_value() {
        for key in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(
                ShardedMap::<u32, u32>::owner_of(key, 8),
                ShardedMap::<u64, u32>::owner_of(u64::from(key), 8)
            );
        }
    }
}
