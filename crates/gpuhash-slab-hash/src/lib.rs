//! # gpuhash-slab-hash
//!
//! The slab hash of seed 002 (Ashkiani, Farach-Colton, Owens, *A Dynamic Hash Table for the
//! GPU*, IPDPS 2018): a dynamic, fully concurrent hash table with chaining, whose lists are
//! made of 128-byte slabs from [`gpuhash_slab_alloc`].
//!
//! ## Structure
//!
//! A table is an array of bucket heads, each the first slab of a list. A key-value slab
//! holds 15 pairs (key in an even lane, value in the next lane), a key-only slab 30 keys;
//! lane 31 holds the next slab's 32-bit address. Operations are served by
//! **warp-cooperative work sharing** (`cuda-src/slab_hash/slab_list.cuh`): every thread
//! owns one operation, the warp takes them one at a time, and all 32 lanes read each slab
//! together, ballots finding the key or a free spot. Inserts claim a spot with one
//! compare-and-swap (64 bits for a pair); a full list grows by a slab from the warp
//! allocator; removals leave tombstones, compacted away when memory runs short (below).
//!
//! Batches of one kind only take a faster road. Lookup-only batches (`get`, `contains`) and
//! insert-only batches (`insert`) are served by **tiles** of 4 lanes
//! (`cuda-src/slab_hash/slab_tile.cuh`): a tile reads a whole slab with 16-byte loads, so a
//! warp has 8 slabs in flight instead of one, and each tile takes its own lanes' operations
//! in turn. The list invariants are the same (a key is added only at the first empty spot
//! of its list), so tiled and warp-cooperative batches follow each other on one table. On
//! an H100 this took 2^26-pair builds from 7661 to 10152 M pairs/s and lookups from 12898
//! to 21210 M/s (docs/benchmarks/slab-hash.md); mixed batches, removals and counts keep the
//! paper's warp-cooperative work sharing.
//!
//! Three tables share the engine: [`SlabHashMap`] (unique keys, insert replaces),
//! [`SlabHashSet`] (keys only) and [`SlabHashMultiMap`] (duplicates kept, with
//! [`SlabHashMultiMap::get_all`], `count` and `remove_all`). Keys and values are `u32` or
//! `u64` ([`SlabWord`]); an entry with a 64-bit part takes 2 or 4 lanes, so a slab holds 7
//! to 30 entries.
//!
//! ## What readers see
//!
//! No reader, in the same launch or in a batch running at once on another stream, ever
//! sees a key without its own value. A key alone, or a 32-bit key with a 32-bit value, is
//! stored with one compare-and-swap. A wider entry cannot be: its insert claims the spot
//! as *busy* (a third reserved key word), writes the value, and publishes the key after a
//! memory fence. Lookups take a busy spot for one that holds no key (the insert has not
//! happened yet for them); inserts of a map's or set's keys that reach a busy spot wait for
//! it to resolve, since it may hold their own key, so a key is never stored twice. The
//! price is one fence per insert of a wide entry; 32-bit pairs pay nothing.
//!
//! ## Memory under churn
//!
//! A removal leaves a tombstone, and inserts only ever use never-used spots at the end of
//! a list, so a table whose keys come and go fills its slabs with tombstones. When an
//! insert batch finds no free slab and removals have left tombstones since the last
//! compaction, the table compacts every list first (moving live entries to the front and
//! giving emptied slabs back) and grows the allocator only if a quarter of its slabs are
//! still not free. So memory holds steady under any mix of inserts and removals with no
//! call from the user, and a table that only grows never pays for a compaction. Compaction
//! and growth wait for every batch already queued on the device and hold off new ones while
//! they run; [`SlabHashMap::flush`] runs the same compaction on demand, on a shared table
//! (`&self`).
//!
//! ## Equal keys in one batch
//!
//! Of the pairs of one map insert batch that share a key, one whole value stays, never a
//! mix of two. Which one is not specified by default ([`DuplicateKeys::AnyCopy`]; on an
//! H100 the last copy won for 90 to 95% of such keys); with
//! [`SlabHashOptions::duplicate_keys`] set to [`DuplicateKeys::LastCopy`] it is the last
//! copy's, as inserting the pairs one by one in order would leave it: the earlier copies are
//! found on the device ([`gpuhash_core::last_copy::mark_repeated`]) and skipped.
//!
//! Beyond the paper:
//! - **Every key is usable.** The three words slabs reserve (empty, tombstone, busy) are
//!   stored in three extra buckets, so `u32::MAX` is a key like any other.
//! - **Nothing is dropped.** An insert that finds no free slab reports it; the batch grows
//!   the allocator and runs those inserts again, or, if the GPU is out of memory, fails with
//!   [`SlabHashError::NotInserted`] naming exactly the inserts that did not go in.
//! - **Shared by threads.** Batch calls take `&self`; each runs on a stream of its own, so
//!   several host threads use one table at once, flushes included.
//! - **Counting costs no memory.** `len` sums the live entries of every bucket on the
//!   device into one word.
//!
//! ## Example
//!
//! ```no_run
//! use gpuhash_core::Device;
//! use gpuhash_slab_hash::{SlabHashMap, SlabHashOptions};
//!
//! # fn main() -> gpuhash_slab_hash::Result<()> {
//! let device = Device::default()?;
//! let map = SlabHashMap::new(&device.new_stream()?, SlabHashOptions::with_capacity(1 << 20))?;
//! let keys: Vec<u32> = (0..1000).chain([u32::MAX]).collect();
//! let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
//! map.insert(&keys, &values)?;
//! assert_eq!(map.get(&[7, u32::MAX, 5000])?, vec![Some(21), Some(u32::MAX.wrapping_mul(3)), None]);
//! map.remove(&keys[..10])?;
//! assert_eq!(map.len()?, keys.len() - 10);
//! # Ok(()) }
//! ```

mod error;
mod launch;
pub mod layouts;
mod map;
mod multimap;
mod op;
mod set;
pub mod sizing;
mod table;

pub use error::{Result, SlabHashError};
pub use gpuhash_core::last_copy::DuplicateKeys;
pub use map::SlabHashMap;
pub use multimap::SlabHashMultiMap;
pub use op::{Op, Outcome};
pub use set::SlabHashSet;
pub use table::{MemoryUsage, SlabHashOptions, SlabWord};
