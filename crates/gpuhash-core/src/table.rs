//! The table contract: the types and verbs every gpuhash table shares, so that a program
//! switches tables by changing one type, and a layer above (paging, sharding) takes any
//! table.
//!
//! ## Structure
//!
//! - [`Key`]: the key types every table takes, `u32` and `u64` (sealed). Every value of
//!   them is a valid key; tables keep their reserved words out of the user's way.
//! - [`Value`]: any plain-old-data type; each table says which widths it stores, and a
//!   width it does not store is refused when the table is made (a compile error where
//!   the table can check it then).
//! - Three shapes, on top of [`Table`] (what every table has: `len`, `memory`, `clear`):
//!   [`Map`] (unique keys, one value each), [`Set`] (keys only) and [`MultiMap`] (a key may
//!   hold many values).
//! - Each shape's required methods are its **device forms**: they take [`DeviceBuffer`]s
//!   and a caller's [`Stream`], queue their work there, and return without waiting unless
//!   their answer's size must be known on the host (export, `get_all`, `len`). Answers
//!   that say yes or no are one byte an element (`1` yes, `0` no). A table documents
//!   any other wait (a resize it must decide on the host, say).
//! - The **host forms** (`insert(&[K], &[V])`, `get(&[K]) -> Vec<Option<V>>`, ...) are
//!   provided once, here, on top of the device forms: each stages its slices to the device
//!   through pinned memory ([`crate::staging`]), runs its device form, and stages the
//!   answers back. A batch that changes the table takes effect, or fails and changes
//!   nothing, as one. Lookups, which change nothing, run in chunks on several streams at
//!   once, so that copies overlap kernels ([`Table::host_lookup_chunk`]; a table that
//!   pages may choose per batch, [`Table::host_lookup_chunk_for`]). Inserts and
//!   upserts of maps and sets run in chunks too ([`Table::host_insert_chunk`]), one
//!   chunk's copies overlapping the insert of the chunk before; each chunk's keys are
//!   looked up first, so that a failing chunk has the ones before it undone
//!   ([`insert_in_chunks`]). Removals, and a multimap's inserts (which add values rather
//!   than replace them), run once on the whole batch. They take `&self`, so several host
//!   threads use one table at once. Their `_into` forms (`get_into`, `contains_into`,
//!   `count_into`, `export_into`) write the answers into the caller's buffers instead of
//!   new vectors; slices the caller registered with [`Device::register`] are copied
//!   straight, with no staging. Exports have a device `_into` form too
//!   (`export_into_on`), into the caller's device buffers; a buffer too short for the
//!   table is [`ErrorKind::InvalidInput`], with nothing written.
//! - [`UndoPlan`]: the building block of those undos, for any layer that runs a batch in
//!   parts and must take the parts that ran back when a later one fails (a paged table's
//!   segments, say): from what a part's keys held before it (a flag a key and, for a map,
//!   the value), the keys to remove and the pairs to put back, applied through the table's
//!   own verbs.
//! - [`CombiningMap`]: a [`Map`] whose upserts combine values in place ([`Combine`]: add,
//!   min, max), so counting or summing per key is one batch, and whose `insert_or_find`
//!   gives each key its value or stores a candidate (dictionary encoding).
//! - One error story: every table's error type is a [`TableError`], convertible from this
//!   crate's [`Error`], and answers [`TableError::kind`] with an [`ErrorKind`], so a caller
//!   matches "out of device memory" in one place whichever table raised it.
//!
//! ## Example
//!
//! Code written against the contract runs on every table:
//!
//! ```
//! use gpuhash_core::table::{Map, TableError};
//!
//! /// How many of `keys` the map holds.
//! fn hits<M: Map<Key = u32>>(map: &M, keys: &[u32]) -> Result<usize, M::Error> {
//!     Ok(map.contains(keys)?.into_iter().filter(|&hit| hit).count())
//! }
//! ```

use std::fmt::Debug;
use std::hash::Hash;

use bytemuck::Pod;

use crate::hits::{DeviceHits, Hits, count_hits};
use crate::last_copy::LastCopyKernels;
use crate::staging::{download, downloaded, parallel_collect, upload};
use crate::{Device, DeviceBuffer, Error, Stream};

mod chunked;
mod combining;
mod host;
mod pairs;
mod undo;

pub use chunked::{insert_in_chunks, insert_keys_in_chunks, upsert_in_chunks};
pub use combining::{Combine, CombiningMap, check_values_out};
use host::{
    WHOLE, answers_into, answers_of, check_lengths, flags_of, in_lanes, insert_pairs, with_stream,
};
use pairs::check_room;
pub use pairs::{DevicePairs, DeviceRows, Pairs};
pub use undo::UndoPlan;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// A key type of every gpuhash table: `u32` or `u64`. Every value is a valid key.
pub trait Key: Pod + Eq + Ord + Hash + Debug + Send + Sync + 'static + sealed::Sealed {
    /// 32-bit words a key takes.
    const WORDS: u32;
    /// The key, widened.
    fn widen(self) -> u64;
    /// The kernels of [`crate::last_copy`] at this width.
    #[doc(hidden)]
    fn last_copy_kernels() -> &'static LastCopyKernels;
}

impl Key for u32 {
    const WORDS: u32 = 1;
    fn widen(self) -> u64 {
        u64::from(self)
    }
    fn last_copy_kernels() -> &'static LastCopyKernels {
        &crate::last_copy::U32_KERNELS
    }
}

impl Key for u64 {
    const WORDS: u32 = 2;
    fn widen(self) -> u64 {
        self
    }
    fn last_copy_kernels() -> &'static LastCopyKernels {
        &crate::last_copy::U64_KERNELS
    }
}

/// A value type: any plain-old-data type. Which widths a table stores is its own to say.
pub trait Value: Pod + PartialEq + Debug + Send + Sync + 'static {}

impl<T: Pod + PartialEq + Debug + Send + Sync + 'static> Value for T {}

/// What kind of failure an error is, the same words for every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No usable GPU: no driver, a driver too old, no such device, or kernels that cannot
    /// run on it.
    NoDevice,
    /// The device had too little free memory.
    OutOfDeviceMemory,
    /// Page-locked host memory could not be had.
    OutOfPinnedMemory,
    /// An input was malformed: mismatched lengths, a width the table does not store, bad
    /// options, an image that is not a table's.
    InvalidInput,
    /// Some inserts of a batch did not go in (the table could not make room); the error
    /// names them, and everything else of the batch took effect.
    NotInserted,
    /// The driver reported another failure.
    Device,
}

/// The error type of a table: convertible from [`Error`], and answering [`ErrorKind`].
pub trait TableError: std::error::Error + From<Error> + Send + Sync + 'static {
    /// What kind of failure this is.
    fn kind(&self) -> ErrorKind;
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NoDriver
            | Error::DriverTooOld { .. }
            | Error::NoDevice { .. }
            | Error::UnsupportedDevice { .. } => ErrorKind::NoDevice,
            Error::OutOfDeviceMemory => ErrorKind::OutOfDeviceMemory,
            Error::OutOfPinnedMemory => ErrorKind::OutOfPinnedMemory,
            Error::LengthMismatch { .. } | Error::InvalidInput(_) | Error::Compile(_) => {
                ErrorKind::InvalidInput
            }
            Error::Driver(_) => ErrorKind::Device,
        }
    }
}

impl TableError for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

/// Device memory of a table, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryUsage {
    /// Everything the table holds on the device.
    pub bytes_reserved: u64,
    /// The part of it that holds entries or structure now (the rest is free room).
    pub bytes_in_use: u64,
    /// What the live entries themselves take (key and value bytes).
    pub entry_bytes: u64,
}

impl MemoryUsage {
    /// Entry bytes over bytes in use.
    pub fn utilization(&self) -> f64 {
        self.entry_bytes as f64 / self.bytes_in_use as f64
    }

    /// Reserved bytes per live entry (infinite when empty).
    pub fn bytes_per_entry(&self, entries: usize) -> f64 {
        self.bytes_reserved as f64 / entries as f64
    }
}

/// Field by field: the memory of a table made of tables (children, shards) is the sum of
/// theirs.
impl std::ops::Add for MemoryUsage {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            bytes_reserved: self.bytes_reserved + other.bytes_reserved,
            bytes_in_use: self.bytes_in_use + other.bytes_in_use,
            entry_bytes: self.entry_bytes + other.entry_bytes,
        }
    }
}

impl std::iter::Sum for MemoryUsage {
    fn sum<I: Iterator<Item = Self>>(usages: I) -> Self {
        usages.fold(Self::default(), |sum, usage| sum + usage)
    }
}

/// What every table has.
pub trait Table: Send + Sync {
    /// The key type.
    type Key: Key;
    /// The error type.
    type Error: TableError;

    /// The device the table lives on.
    fn device(&self) -> &Device;

    /// Live entries once the work queued on `stream` before it has run; waits for them.
    fn len_on(&self, stream: &Stream) -> Result<usize, Self::Error>;

    /// Device memory, as [`Table::len_on`] counts it.
    fn memory_on(&self, stream: &Stream) -> Result<MemoryUsage, Self::Error>;

    /// Removes every entry, keeping the memory, ordered after the work queued on `stream`.
    fn clear_on(&self, stream: &Stream) -> Result<(), Self::Error>;

    /// Keys of the chunks that a lookup from host slices (`get`, `contains`, `count` and
    /// their `_into` forms) is cut into: the chunks run on several streams at once, so that
    /// one chunk's copies overlap another's kernel (a lookup changes nothing, so it answers
    /// in chunks as it would whole; a lookup of no keys runs one empty batch).
    /// [`crate::staging::CHUNK`] unless the table says otherwise; a table whose every
    /// batch costs a pass over all of it (paging its parts in, say) answers `usize::MAX`,
    /// and its lookups run whole.
    fn host_lookup_chunk(&self) -> usize {
        crate::staging::CHUNK
    }

    /// The chunk of a host lookup of `keys` ([`Table::host_lookup_chunk`] unless the table
    /// says otherwise): for a table that pages its parts in for some batches and not for
    /// others, chunks where this batch would page nothing, whole where it would.
    fn host_lookup_chunk_for(&self, keys: &[Self::Key]) -> usize {
        let _ = keys;
        self.host_lookup_chunk()
    }

    /// Keys of the chunks that an insert or upsert from host slices ([`Map::insert`],
    /// [`Set::insert`], [`CombiningMap::upsert`]) is cut into: one chunk's copies overlap
    /// the insert of the chunk before, and the batch still takes effect, or fails, as one
    /// ([`insert_in_chunks`]). A batch of at most one chunk runs whole, with no lookup.
    /// [`crate::staging::CHUNK`] unless the table says otherwise; a table whose every batch
    /// costs a pass over all of it answers `usize::MAX`, and its inserts run whole.
    fn host_insert_chunk(&self) -> usize {
        crate::staging::CHUNK
    }

    /// Live entries.
    fn len(&self) -> Result<usize, Self::Error> {
        with_stream(self.device(), |s| self.len_on(s))
    }

    /// True when the table holds nothing.
    fn is_empty(&self) -> Result<bool, Self::Error> {
        Ok(self.len()? == 0)
    }

    /// Device memory of the table.
    fn memory(&self) -> Result<MemoryUsage, Self::Error> {
        with_stream(self.device(), |s| self.memory_on(s))
    }

    /// Removes every entry, keeping the memory.
    fn clear(&self) -> Result<(), Self::Error> {
        with_stream(self.device(), |s| self.clear_on(s))
    }
}

/// The export verbs of a table of pairs, which [`Map`] and [`MultiMap`] declare in the same
/// words: `export_on` (each table's own) and, provided on top of it, `export_into_on`,
/// `export` and `export_into`.
macro_rules! pair_exports {
    () => {
        /// Every pair, in no particular order, into new device buffers; waits to size them.
        fn export_on(
            &self,
            stream: &Stream,
        ) -> Result<DevicePairs<Self::Key, Self::Value>, Self::Error>;

        /// Every pair, in no particular order, into the front of the caller's device buffers,
        /// queued on `stream`; returns how many (waiting to count them). Buffers with room for
        /// fewer (the shorter of the two counts) are [`ErrorKind::InvalidInput`]: nothing is
        /// written and the table is unchanged. Buffers kept from export to export spare the
        /// allocation of new ones.
        ///
        /// The default copies an [`export_on`](Self::export_on) into them; a table that can
        /// write the caller's buffers straight does so.
        fn export_into_on(
            &self,
            stream: &Stream,
            keys: &mut DeviceBuffer<Self::Key>,
            values: &mut DeviceBuffer<Self::Value>,
        ) -> Result<usize, Self::Error> {
            Ok(self.export_on(stream)?.copy_into(stream, keys, values)?)
        }

        /// Every pair, in no particular order.
        fn export(&self) -> Result<Pairs<Self::Key, Self::Value>, Self::Error> {
            with_stream(self.device(), |s| Ok(self.export_on(s)?.to_host(s)?))
        }

        /// Every pair, in no particular order, into the front of the caller's slices; returns
        /// how many. Slices with room for fewer (the shorter of the two counts) are
        /// [`ErrorKind::InvalidInput`]: nothing is written and the table is unchanged. Slices
        /// registered with [`Device::register`] are copied straight, with no staging.
        fn export_into(
            &self,
            keys: &mut [Self::Key],
            values: &mut [Self::Value],
        ) -> Result<usize, Self::Error> {
            with_stream(self.device(), |s| {
                Ok(self.export_on(s)?.download_into(s, keys, values)?)
            })
        }
    };
}

/// A map: unique keys, one value each; an insert of a key it holds replaces the value.
pub trait Map: Table {
    /// The value type.
    type Value: Value;

    /// Queues inserts of `keys[i] -> values[i]`.
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: &DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error>;

    /// Queues lookups: `found[i]` becomes 1 with the value in `values[i]`, or 0 (and
    /// `values[i]` is left as it was).
    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error>;

    /// Queues membership tests: `found[i]` becomes 1 where the key is there, else 0.
    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), Self::Error>;

    /// Queues removals: `removed[i]` becomes 1 where the key was there, else 0.
    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), Self::Error>;

    pair_exports!();

    /// Inserts each pair (see the table's docs for which value a key repeated in the batch
    /// keeps), in chunks of [`Table::host_insert_chunk`] pairs: the batch takes effect, or
    /// fails and leaves the map as it was, as one ([`insert_in_chunks`]).
    fn insert(&self, keys: &[Self::Key], values: &[Self::Value]) -> Result<(), Self::Error> {
        insert_in_chunks(self, keys, values)
    }

    /// The value of each key, or `None`.
    fn get(&self, keys: &[Self::Key]) -> Result<Vec<Option<Self::Value>>, Self::Error> {
        let mut found = bytemuck::zeroed_vec(keys.len());
        let mut values = bytemuck::zeroed_vec(keys.len());
        self.get_into(keys, &mut found, &mut values)?;
        Ok(parallel_collect(keys.len(), |i| {
            (found[i] != 0).then_some(values[i])
        }))
    }

    /// Looks each key up into the caller's buffers, which must have the keys' length
    /// ([`ErrorKind::InvalidInput`] otherwise, and nothing is written): `found[i]` becomes 1
    /// with the value in `values[i]`, or 0 (and `values[i]` is then unspecified).
    ///
    /// Buffers reused from batch to batch spare the host the page faults of fresh ones;
    /// registered ones ([`Device::register`]), the staging copies too: keys, flags and
    /// values then travel as one DMA each.
    fn get_into(
        &self,
        keys: &[Self::Key],
        found: &mut [u8],
        values: &mut [Self::Value],
    ) -> Result<(), Self::Error> {
        check_lengths("get_into: keys and found", keys.len(), found.len())?;
        check_lengths("get_into: keys and values", keys.len(), values.len())?;
        let chunk = self.host_lookup_chunk_for(keys).max(1);
        // No keys still run one empty batch, as `answers_into` does.
        let parts: Vec<_> = match keys.is_empty() {
            true => vec![((keys, found), values)],
            false => keys
                .chunks(chunk)
                .zip(found.chunks_mut(chunk))
                .zip(values.chunks_mut(chunk))
                .collect(),
        };
        in_lanes(self.device(), parts, |s, ((keys, found), values)| {
            let mut found_on_device = DeviceBuffer::unfilled(s, keys.len())?;
            let mut values_on_device = DeviceBuffer::unfilled(s, keys.len())?;
            let keys = upload(s, keys)?;
            self.get_async(s, &keys, &mut found_on_device, &mut values_on_device)?;
            download(s, &found_on_device, found)?;
            Ok(download(s, &values_on_device, values)?)
        })
    }

    /// The hits only: each found key's index in `keys` and its value, in no particular
    /// order ([`Hits::sorted`] orders them), gathered on the device so that only the hits
    /// travel back ([`crate::hits`]).
    fn get_hits(&self, keys: &[Self::Key]) -> Result<Hits<Self::Value>, Self::Error> {
        with_stream(self.device(), |s| {
            let mut found = DeviceBuffer::unfilled(s, keys.len())?;
            let mut values = DeviceBuffer::unfilled(s, keys.len())?;
            self.get_async(s, &upload(s, keys)?, &mut found, &mut values)?;
            let mut hits = DeviceHits::with_capacity(s, keys.len())?;
            hits.gather(s, 0, &found, &values)?;
            Ok(hits.to_host(s)?)
        })
    }

    /// How many of `keys` the map holds, counted on the device: nothing a key travels back.
    fn count_hits(&self, keys: &[Self::Key]) -> Result<usize, Self::Error> {
        with_stream(self.device(), |s| {
            let mut found = DeviceBuffer::unfilled(s, keys.len())?;
            self.contains_async(s, &upload(s, keys)?, &mut found)?;
            let mut total = DeviceBuffer::<u64>::zeroed(s, 1)?;
            count_hits(s, &found, &mut total)?;
            Ok(total.to_host(s)?[0] as usize)
        })
    }

    /// Whether each key is there.
    fn contains(&self, keys: &[Self::Key]) -> Result<Vec<bool>, Self::Error> {
        flags_of(
            self.device(),
            keys,
            self.host_lookup_chunk_for(keys),
            |s, k, f| self.contains_async(s, k, f),
        )
    }

    /// Whether each key is there, into the caller's `found` (1 yes, 0 no), which must have
    /// the keys' length ([`ErrorKind::InvalidInput`] otherwise); see [`Map::get_into`].
    fn contains_into(&self, keys: &[Self::Key], found: &mut [u8]) -> Result<(), Self::Error> {
        let chunk = self.host_lookup_chunk_for(keys);
        answers_into(self.device(), keys, found, chunk, |s, k, f| {
            self.contains_async(s, k, f)
        })
    }

    /// Removes each key; true where it was there.
    fn remove(&self, keys: &[Self::Key]) -> Result<Vec<bool>, Self::Error> {
        let flags = answers_of(self.device(), keys, WHOLE, |s, k, f| {
            self.remove_async(s, k, f)
        })?;
        Ok(parallel_collect(flags.len(), |i| flags[i] != 0))
    }
}

/// A set: keys only.
pub trait Set: Table {
    /// Queues inserts of `keys`.
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
    ) -> Result<(), Self::Error>;

    /// Queues membership tests: `found[i]` becomes 1 where the key is there, else 0.
    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<(), Self::Error>;

    /// Queues removals: `removed[i]` becomes 1 where the key was there, else 0.
    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<(), Self::Error>;

    /// Every key, in no particular order, into a new device buffer; waits to size it.
    fn export_on(&self, stream: &Stream) -> Result<DeviceBuffer<Self::Key>, Self::Error>;

    /// Every key, in no particular order, into the front of the caller's device buffer,
    /// queued on `stream`; returns how many (waiting to count them). A buffer with room
    /// for fewer is [`ErrorKind::InvalidInput`]: nothing is written and the set is
    /// unchanged. The default copies an [`export_on`](Self::export_on) into it; a table
    /// that can write the caller's buffer straight does so.
    fn export_into_on(
        &self,
        stream: &Stream,
        keys: &mut DeviceBuffer<Self::Key>,
    ) -> Result<usize, Self::Error> {
        let exported = self.export_on(stream)?;
        check_room("export_into", exported.len(), keys.len())?;
        keys.copy_from_at(stream, 0, &exported)?;
        Ok(exported.len())
    }

    /// Inserts each key, in chunks of [`Table::host_insert_chunk`] keys: the batch takes
    /// effect, or fails and leaves the set as it was, as one ([`insert_keys_in_chunks`]).
    fn insert(&self, keys: &[Self::Key]) -> Result<(), Self::Error> {
        insert_keys_in_chunks(self, keys)
    }

    /// Whether each key is there.
    fn contains(&self, keys: &[Self::Key]) -> Result<Vec<bool>, Self::Error> {
        flags_of(
            self.device(),
            keys,
            self.host_lookup_chunk_for(keys),
            |s, k, f| self.contains_async(s, k, f),
        )
    }

    /// Whether each key is there, into the caller's `found` (1 yes, 0 no), which must have
    /// the keys' length ([`ErrorKind::InvalidInput`] otherwise); see [`Map::get_into`].
    fn contains_into(&self, keys: &[Self::Key], found: &mut [u8]) -> Result<(), Self::Error> {
        let chunk = self.host_lookup_chunk_for(keys);
        answers_into(self.device(), keys, found, chunk, |s, k, f| {
            self.contains_async(s, k, f)
        })
    }

    /// Removes each key; true where it was there.
    fn remove(&self, keys: &[Self::Key]) -> Result<Vec<bool>, Self::Error> {
        let flags = answers_of(self.device(), keys, WHOLE, |s, k, f| {
            self.remove_async(s, k, f)
        })?;
        Ok(parallel_collect(flags.len(), |i| flags[i] != 0))
    }

    /// Every key, in no particular order.
    fn export(&self) -> Result<Vec<Self::Key>, Self::Error> {
        with_stream(self.device(), |s| Ok(downloaded(s, &self.export_on(s)?)?))
    }

    /// Every key, in no particular order, into the front of the caller's slice; returns
    /// how many. A slice with room for fewer is [`ErrorKind::InvalidInput`]: nothing is
    /// written and the set is unchanged. A slice registered with [`Device::register`] is
    /// copied straight, with no staging.
    fn export_into(&self, keys: &mut [Self::Key]) -> Result<usize, Self::Error> {
        with_stream(self.device(), |s| {
            let exported = self.export_on(s)?;
            let n = exported.len();
            check_room("export_into", n, keys.len())?;
            download(s, &exported, &mut keys[..n])?;
            Ok(n)
        })
    }
}

/// A multimap: a key may hold many values, duplicates included.
pub trait MultiMap: Table {
    /// The value type.
    type Value: Value;

    /// Queues inserts of `keys[i] -> values[i]`, each a value more for its key.
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: &DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error>;

    /// Queues counts: `counts[i]` becomes how many values key i holds.
    fn count_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        counts: &mut DeviceBuffer<u32>,
    ) -> Result<(), Self::Error>;

    /// Queues removals of every value of each key: `counts[i]` becomes how many there were.
    fn remove_all_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        counts: &mut DeviceBuffer<u32>,
    ) -> Result<(), Self::Error>;

    /// Every value of each key, as compressed rows on the device: `offsets` (one more than
    /// the keys) and `values`, key i's values being `values[offsets[i]..offsets[i + 1]]`.
    /// Waits to size them.
    fn get_all_on(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
    ) -> Result<DeviceRows<Self::Value>, Self::Error>;

    pair_exports!();

    /// Inserts each pair, the whole batch in one call of the device form (so that it takes
    /// effect, or fails, as one). A multimap adds values rather than replacing them, so it
    /// has no chunked form: undoing a chunk would need to take out exactly the copies it
    /// added.
    fn insert(&self, keys: &[Self::Key], values: &[Self::Value]) -> Result<(), Self::Error> {
        insert_pairs(self.device(), keys, values, |s, k, v| {
            self.insert_async(s, k, v)
        })
    }

    /// How many values each key holds.
    fn count(&self, keys: &[Self::Key]) -> Result<Vec<u32>, Self::Error> {
        let chunk = self.host_lookup_chunk_for(keys);
        answers_of(self.device(), keys, chunk, |s, k, c| {
            self.count_async(s, k, c)
        })
    }

    /// How many values each key holds, into the caller's `counts`, which must have the
    /// keys' length ([`ErrorKind::InvalidInput`] otherwise); see [`Map::get_into`].
    fn count_into(&self, keys: &[Self::Key], counts: &mut [u32]) -> Result<(), Self::Error> {
        let chunk = self.host_lookup_chunk_for(keys);
        answers_into(self.device(), keys, counts, chunk, |s, k, c| {
            self.count_async(s, k, c)
        })
    }

    /// Whether each key holds a value.
    fn contains(&self, keys: &[Self::Key]) -> Result<Vec<bool>, Self::Error> {
        Ok(self.count(keys)?.into_iter().map(|c| c > 0).collect())
    }

    /// Every value of each key, in no particular order.
    fn get_all(&self, keys: &[Self::Key]) -> Result<Vec<Vec<Self::Value>>, Self::Error> {
        with_stream(self.device(), |s| {
            let rows = self.get_all_on(s, &upload(s, keys)?)?;
            let (offsets, values) = (downloaded(s, &rows.offsets)?, downloaded(s, &rows.values)?);
            Ok(offsets
                .windows(2)
                .map(|w| values[w[0] as usize..w[1] as usize].to_vec())
                .collect())
        })
    }

    /// Removes every value of each key; how many each had.
    fn remove_all(&self, keys: &[Self::Key]) -> Result<Vec<u32>, Self::Error> {
        answers_of(self.device(), keys, WHOLE, |s, k, c| {
            self.remove_all_async(s, k, c)
        })
    }
}

/// [`Error::LengthMismatch`] unless a batch has as many values as keys.
pub fn check_pairs(keys: usize, values: usize) -> Result<(), Error> {
    check_lengths("keys and values", keys, values)
}

#[cfg(test)]
mod tests {
    use super::MemoryUsage;

    #[test]
    fn memory_usages_add_field_by_field() {
        let usage = |reserved, in_use, entries| MemoryUsage {
            bytes_reserved: reserved,
            bytes_in_use: in_use,
            entry_bytes: entries,
        };
        let parts = [usage(100, 60, 40), usage(50, 10, 8), usage(7, 7, 7)];
        assert_eq!(parts[0] + parts[1], usage(150, 70, 48));
        assert_eq!(parts.into_iter().sum::<MemoryUsage>(), usage(157, 77, 55));
        assert_eq!(
            std::iter::empty().sum::<MemoryUsage>(),
            MemoryUsage::default()
        );
    }
}
