//! [`ShardOptions`]: how big a [`crate::ShardedTable`] is and what its shards are.

use std::fmt;
use std::sync::Arc;

use gpuhash_core::Device;
use gpuhash_core::table::{Key, Table, Value};
use gpuhash_cuckoo::CuckooTable;

/// Builds a shard table of a capacity (in pairs) on a device.
pub type MakeShard<T> = Arc<dyn Fn(&Device, usize) -> Result<T, <T as Table>::Error> + Send + Sync>;

/// Pairs a table is made for unless set: 2^20 a shard's worth for one shard.
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// How a [`crate::ShardedTable`] is made: `ShardOptions::with_capacity(n)`, and
/// [`ShardOptions::make_shard`] for shards other than DyHash.
#[non_exhaustive]
pub struct ShardOptions<T: Table> {
    /// Pairs the whole table is made for; each shard is made for its share, rounded up
    /// (shards grow past it as their own tables do).
    pub capacity: usize,
    /// Builds a shard.
    pub make_shard: MakeShard<T>,
}

impl<K: Key, V: Value> Default for ShardOptions<CuckooTable<K, V>> {
    fn default() -> Self {
        Self {
            capacity: DEFAULT_CAPACITY,
            make_shard: Arc::new(|device, capacity| CuckooTable::with_capacity(device, capacity)),
        }
    }
}

impl<K: Key, V: Value> ShardOptions<CuckooTable<K, V>> {
    /// DyHash shards, for `capacity` pairs in all.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::default().capacity(capacity)
    }
}

impl<T: Table> ShardOptions<T> {
    /// Sets [`ShardOptions::capacity`].
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The same options with shards that `make_shard(device, capacity)` builds.
    pub fn make_shard<U: Table>(
        self,
        make_shard: impl Fn(&Device, usize) -> Result<U, U::Error> + Send + Sync + 'static,
    ) -> ShardOptions<U> {
        ShardOptions {
            capacity: self.capacity,
            make_shard: Arc::new(make_shard),
        }
    }

    /// The capacity each of `shards` shards is made for.
    pub fn shard_capacity(&self, shards: usize) -> usize {
        self.capacity.div_ceil(shards.max(1)).max(1)
    }
}

impl<T: Table> Clone for ShardOptions<T> {
    fn clone(&self) -> Self {
        Self {
            capacity: self.capacity,
            make_shard: Arc::clone(&self.make_shard),
        }
    }
}

impl<T: Table> fmt::Debug for ShardOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardOptions")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_round_up_and_never_reach_zero() {
        let options = ShardOptions::<CuckooTable<u32, u32>>::with_capacity(10);
        assert_eq!(options.shard_capacity(3), 4);
        assert_eq!(options.shard_capacity(1), 10);
        assert_eq!(options.shard_capacity(0), 10);
        assert_eq!(options.clone().capacity(0).shard_capacity(8), 1);
    }
}
