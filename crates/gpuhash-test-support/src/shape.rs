//! The three shapes of the contract seen through one interface, so that one check serves
//! maps, sets and multimaps: a table is a multiset of pairs (a set's value is `()`) that
//! answers lookups with every value of a key, counts, and removals with how many went.

use std::fmt;

use bytemuck::Pod;
use gpuhash_core::table::{Key, Map, MultiMap, Pairs, Set, Table, Value};
use gpuhash_core::{Device, DeviceBuffer, Error, Stream};

use crate::caller_buffers::PageAlone;
use crate::model::Rule;

/// Through which forms a check calls the table.
#[derive(Debug, Clone, Copy)]
pub enum Via<'a> {
    /// The host forms (`insert(&[K], ..)`, `get(&[K])`, ...) on the device's lent streams.
    Host,
    /// The device forms (`insert_async`, `get_async`, ...) on this stream of the caller's,
    /// with the answers copied back.
    Device(&'a Stream),
}

impl fmt::Display for Via<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Host => "the host forms",
            Via::Device(_) => "the device forms on a caller's stream",
        })
    }
}

/// Marks [`Shape`]'s implementation for every [`Map`].
#[derive(Debug)]
pub enum MapShape {}
/// Marks [`Shape`]'s implementation for every [`Set`].
#[derive(Debug)]
pub enum SetShape {}
/// Marks [`Shape`]'s implementation for every [`MultiMap`].
#[derive(Debug)]
pub enum MultiMapShape {}

/// A map, set or multimap as the conformance suite sees it. Implemented for every table
/// of the contract (`Tag` tells the three implementations apart and is inferred); there is
/// nothing to implement by hand.
pub trait Shape<Tag>: Table {
    /// The value type (`()` for sets).
    type Value: Value;
    /// What an insert does to a key the table holds.
    const RULE: Rule;

    /// Inserts the pairs (a set ignores the values).
    fn insert_via(
        &self,
        via: Via<'_>,
        keys: &[Self::Key],
        values: &[Self::Value],
    ) -> Result<(), Self::Error>;

    /// Every value of each key: `get`, `contains` or `get_all`.
    fn lookup_via(
        &self,
        via: Via<'_>,
        keys: &[Self::Key],
    ) -> Result<Vec<Vec<Self::Value>>, Self::Error>;

    /// The raw answer of `contains` (maps, sets: the flag) or `count` (multimaps) a key.
    fn count_via(&self, via: Via<'_>, keys: &[Self::Key]) -> Result<Vec<u32>, Self::Error>;

    /// The raw answer of `remove` (the flag) or `remove_all` (the count) a key.
    fn remove_via(&self, via: Via<'_>, keys: &[Self::Key]) -> Result<Vec<u32>, Self::Error>;

    /// Every pair.
    fn export_via(&self, via: Via<'_>) -> Result<Pairs<Self::Key, Self::Value>, Self::Error>;

    /// Every pair into the front of caller buffers of `rooms` keys and values (a set's
    /// values take none), each filled with junk first: `export_into` (the keys' slice
    /// registered with the device when `registered`) or `export_into_on`.
    fn export_into_via(
        &self,
        via: Via<'_>,
        rooms: (usize, usize),
        registered: bool,
    ) -> ExportedInto<Self::Key, Self::Value, Self::Error>;
}

/// What an `_into` export answered and left in the caller's buffers.
#[derive(Debug)]
pub struct ExportedInto<K, V, E> {
    /// How many pairs the call said it wrote, or its error (or that of readying the
    /// buffers).
    pub written: Result<usize, E>,
    /// The pairs in the front of the buffers, as many as it said (none after an error).
    pub pairs: Pairs<K, V>,
    /// Whether every slot past them still holds the junk the caller put there.
    pub rest_untouched: bool,
}

/// A value of all bytes 0xA5: what caller buffers hold before an `_into` export.
fn junk<T: Pod>() -> T {
    let mut value = T::zeroed();
    bytemuck::bytes_of_mut(&mut value).fill(0xA5);
    value
}

/// Caller buffers after an `_into` export: what it answered, and their whole contents.
struct Filled<K, V, E> {
    written: Result<usize, E>,
    keys: Vec<K>,
    values: Vec<V>,
}

/// Buffers of `rooms` keys and values, filled with [`junk`], exported into through a
/// host form (the keys' slice registered when `registered`) or a device form.
fn export_into_buffers<K: Key, V: Value, E: From<Error>>(
    via: Via<'_>,
    device: &Device,
    rooms: (usize, usize),
    registered: bool,
    host: impl FnOnce(&mut [K], &mut [V]) -> Result<usize, E>,
    device_form: impl FnOnce(&Stream, &mut DeviceBuffer<K>, &mut DeviceBuffer<V>) -> Result<usize, E>,
) -> Filled<K, V, E> {
    let mut keys = vec![junk::<K>(); rooms.0];
    let mut values = vec![junk::<V>(); rooms.1];
    let written = fill_via(
        via,
        device,
        registered,
        (&mut keys, &mut values),
        host,
        device_form,
    );
    Filled {
        written,
        keys,
        values,
    }
}

/// Runs the `_into` export of [`export_into_buffers`] on the caller's `buffers`.
fn fill_via<K: Key, V: Value, E: From<Error>>(
    via: Via<'_>,
    device: &Device,
    registered: bool,
    (keys, values): (&mut [K], &mut [V]),
    host: impl FnOnce(&mut [K], &mut [V]) -> Result<usize, E>,
    device_form: impl FnOnce(&Stream, &mut DeviceBuffer<K>, &mut DeviceBuffer<V>) -> Result<usize, E>,
) -> Result<usize, E> {
    match via {
        Via::Device(stream) => {
            let mut k = DeviceBuffer::from_host(stream, keys)?;
            let mut v = DeviceBuffer::from_host(stream, values)?;
            let written = device_form(stream, &mut k, &mut v);
            k.copy_to_host(stream, keys)?;
            v.copy_to_host(stream, values)?;
            written
        }
        // An empty slice cannot be registered: it goes as it is.
        Via::Host if registered && !keys.is_empty() => {
            let mut alone = PageAlone::from_slice(keys);
            let written = {
                let mut k = device.register(alone.values_mut())?;
                host(&mut k, values)
            };
            keys.copy_from_slice(alone.values());
            written
        }
        Via::Host => host(keys, values),
    }
}

/// The pairs a map or multimap's `_into` export wrote, and whether it left the rest alone.
fn exported_pairs<K: Key, V: Value, E>(
    Filled {
        written,
        keys,
        values,
    }: Filled<K, V, E>,
) -> ExportedInto<K, V, E> {
    let (junk_key, junk_value) = (junk::<K>(), junk::<V>());
    let n = *written.as_ref().unwrap_or(&0);
    let n_keys = n.min(keys.len());
    let n_values = n.min(values.len());
    ExportedInto {
        pairs: keys[..n_keys]
            .iter()
            .copied()
            .zip(values[..n_values].iter().copied())
            .collect(),
        rest_untouched: keys[n_keys..].iter().all(|&k| k == junk_key)
            && values[n_values..].iter().all(|&v| v == junk_value),
        written,
    }
}

/// Live entries, through `len` or `len_on`.
pub(crate) fn len_via<T: Table>(table: &T, via: Via<'_>) -> Result<usize, T::Error> {
    match via {
        Via::Host => table.len(),
        Via::Device(stream) => table.len_on(stream),
    }
}

/// Removes everything, through `clear` or `clear_on`.
pub(crate) fn clear_via<T: Table>(table: &T, via: Via<'_>) -> Result<(), T::Error> {
    match via {
        Via::Host => table.clear(),
        Via::Device(stream) => {
            table.clear_on(stream)?;
            Ok(stream.synchronize()?)
        }
    }
}

/// Answers a key, from a host form or from a device form writing them into a buffer
/// (copied back, which waits for the stream).
fn answers_via<K: Key, A: Pod, E: From<Error>>(
    via: Via<'_>,
    keys: &[K],
    host: impl FnOnce(&[K]) -> Result<Vec<A>, E>,
    device: impl FnOnce(&Stream, &DeviceBuffer<K>, &mut DeviceBuffer<A>) -> Result<(), E>,
) -> Result<Vec<A>, E> {
    match via {
        Via::Host => host(keys),
        Via::Device(stream) => {
            let mut answers = DeviceBuffer::zeroed(stream, keys.len())?;
            device(
                stream,
                &DeviceBuffer::from_host(stream, keys)?,
                &mut answers,
            )?;
            Ok(answers.to_host(stream)?)
        }
    }
}

/// Inserts through a host form, or uploads and runs a device form, waiting for it so that
/// an error the work raises shows at this step.
fn insert_pairs_via<K: Key, V: Pod, E: From<Error>>(
    via: Via<'_>,
    keys: &[K],
    values: &[V],
    host: impl FnOnce(&[K], &[V]) -> Result<(), E>,
    device: impl FnOnce(&Stream, &DeviceBuffer<K>, &DeviceBuffer<V>) -> Result<(), E>,
) -> Result<(), E> {
    match via {
        Via::Host => host(keys, values),
        Via::Device(stream) => {
            let keys = DeviceBuffer::from_host(stream, keys)?;
            device(stream, &keys, &DeviceBuffer::from_host(stream, values)?)?;
            Ok(stream.synchronize()?)
        }
    }
}

/// Flags a key (`contains`, `remove` of maps and sets) as counts of 0 or 1; a device
/// form's flag is passed on as it is, so that one other than 0 or 1 shows.
fn flags_via<K: Key, E: From<Error>>(
    via: Via<'_>,
    keys: &[K],
    host: impl FnOnce(&[K]) -> Result<Vec<bool>, E>,
    device: impl FnOnce(&Stream, &DeviceBuffer<K>, &mut DeviceBuffer<u8>) -> Result<(), E>,
) -> Result<Vec<u32>, E> {
    let host = |k: &[K]| Ok(host(k)?.into_iter().map(u8::from).collect());
    let flags = answers_via(via, keys, host, device)?;
    Ok(flags.into_iter().map(u32::from).collect())
}

/// `export_via` and `export_into_via` for a table of type `$table` whose trait
/// ([`Map`] or [`MultiMap`]) names its exports in the same words, so both shapes read a
/// [`Via`] in one place.
macro_rules! pair_exports_via {
    ($table:ident) => {
        fn export_via(
            &self,
            via: Via<'_>,
        ) -> Result<Pairs<$table::Key, $table::Value>, $table::Error> {
            match via {
                Via::Host => self.export(),
                Via::Device(s) => Ok(self.export_on(s)?.to_host(s)?),
            }
        }

        fn export_into_via(
            &self,
            via: Via<'_>,
            rooms: (usize, usize),
            registered: bool,
        ) -> ExportedInto<$table::Key, $table::Value, $table::Error> {
            exported_pairs(export_into_buffers(
                via,
                self.device(),
                rooms,
                registered,
                |k, v| self.export_into(k, v),
                |s, k, v| self.export_into_on(s, k, v),
            ))
        }
    };
}

impl<M: Map> Shape<MapShape> for M {
    type Value = M::Value;
    const RULE: Rule = Rule::Replace;

    fn insert_via(
        &self,
        via: Via<'_>,
        keys: &[M::Key],
        values: &[M::Value],
    ) -> Result<(), M::Error> {
        insert_pairs_via(
            via,
            keys,
            values,
            |k, v| self.insert(k, v),
            |s, k, v| self.insert_async(s, k, v),
        )
    }

    fn lookup_via(&self, via: Via<'_>, keys: &[M::Key]) -> Result<Vec<Vec<M::Value>>, M::Error> {
        let found = match via {
            Via::Host => self.get(keys)?,
            Via::Device(s) => {
                let mut found = DeviceBuffer::zeroed(s, keys.len())?;
                let mut values = DeviceBuffer::zeroed(s, keys.len())?;
                self.get_async(
                    s,
                    &DeviceBuffer::from_host(s, keys)?,
                    &mut found,
                    &mut values,
                )?;
                let values = values.to_host(s)?;
                let found = found.to_host(s)?;
                found
                    .iter()
                    .zip(values)
                    .map(|(&f, v)| (f != 0).then_some(v))
                    .collect()
            }
        };
        Ok(found.into_iter().map(Vec::from_iter).collect())
    }

    fn count_via(&self, via: Via<'_>, keys: &[M::Key]) -> Result<Vec<u32>, M::Error> {
        flags_via(
            via,
            keys,
            |k| self.contains(k),
            |s, k, f| self.contains_async(s, k, f),
        )
    }

    fn remove_via(&self, via: Via<'_>, keys: &[M::Key]) -> Result<Vec<u32>, M::Error> {
        flags_via(
            via,
            keys,
            |k| self.remove(k),
            |s, k, f| self.remove_async(s, k, f),
        )
    }

    pair_exports_via!(M);
}

impl<S: Set> Shape<SetShape> for S {
    type Value = ();
    const RULE: Rule = Rule::Once;

    fn insert_via(&self, via: Via<'_>, keys: &[S::Key], _: &[()]) -> Result<(), S::Error> {
        match via {
            Via::Host => self.insert(keys),
            Via::Device(s) => {
                self.insert_async(s, &DeviceBuffer::from_host(s, keys)?)?;
                Ok(s.synchronize()?)
            }
        }
    }

    fn lookup_via(&self, via: Via<'_>, keys: &[S::Key]) -> Result<Vec<Vec<()>>, S::Error> {
        let counts = self.count_via(via, keys)?;
        Ok(counts
            .into_iter()
            .map(|c| vec![(); usize::from(c != 0)])
            .collect())
    }

    fn count_via(&self, via: Via<'_>, keys: &[S::Key]) -> Result<Vec<u32>, S::Error> {
        flags_via(
            via,
            keys,
            |k| self.contains(k),
            |s, k, f| self.contains_async(s, k, f),
        )
    }

    fn remove_via(&self, via: Via<'_>, keys: &[S::Key]) -> Result<Vec<u32>, S::Error> {
        flags_via(
            via,
            keys,
            |k| self.remove(k),
            |s, k, f| self.remove_async(s, k, f),
        )
    }

    fn export_via(&self, via: Via<'_>) -> Result<Pairs<S::Key, ()>, S::Error> {
        let keys = match via {
            Via::Host => self.export()?,
            Via::Device(s) => self.export_on(s)?.to_host(s)?,
        };
        Ok(keys.into_iter().map(|k| (k, ())).collect())
    }

    fn export_into_via(
        &self,
        via: Via<'_>,
        (key_room, _): (usize, usize),
        registered: bool,
    ) -> ExportedInto<S::Key, (), S::Error> {
        // A set's values take no room: the pairs are its keys with `()`.
        let filled = export_into_buffers::<_, (), _>(
            via,
            self.device(),
            (key_room, 0),
            registered,
            |k, _| self.export_into(k),
            |s, k, _| self.export_into_on(s, k),
        );
        let n = *filled.written.as_ref().unwrap_or(&0);
        let values = vec![(); n.min(key_room)];
        exported_pairs(Filled { values, ..filled })
    }
}

impl<M: MultiMap> Shape<MultiMapShape> for M {
    type Value = M::Value;
    const RULE: Rule = Rule::Append;

    fn insert_via(
        &self,
        via: Via<'_>,
        keys: &[M::Key],
        values: &[M::Value],
    ) -> Result<(), M::Error> {
        insert_pairs_via(
            via,
            keys,
            values,
            |k, v| self.insert(k, v),
            |s, k, v| self.insert_async(s, k, v),
        )
    }

    fn lookup_via(&self, via: Via<'_>, keys: &[M::Key]) -> Result<Vec<Vec<M::Value>>, M::Error> {
        match via {
            Via::Host => self.get_all(keys),
            Via::Device(s) => {
                let rows = self.get_all_on(s, &DeviceBuffer::from_host(s, keys)?)?;
                let (offsets, values) = (rows.offsets.to_host(s)?, rows.values.to_host(s)?);
                Ok(split_rows::<Self, _>(keys.len(), &offsets, &values))
            }
        }
    }

    fn count_via(&self, via: Via<'_>, keys: &[M::Key]) -> Result<Vec<u32>, M::Error> {
        answers_via(
            via,
            keys,
            |k| self.count(k),
            |s, k, c| self.count_async(s, k, c),
        )
    }

    fn remove_via(&self, via: Via<'_>, keys: &[M::Key]) -> Result<Vec<u32>, M::Error> {
        answers_via(
            via,
            keys,
            |k| self.remove_all(k),
            |s, k, c| self.remove_all_async(s, k, c),
        )
    }

    pair_exports_via!(M);
}

/// Compressed rows as one list a key. Offsets that do not describe `keys` rows of
/// `values` break the contract: the check panics, naming the table.
fn split_rows<T, V: Clone>(keys: usize, offsets: &[u64], values: &[V]) -> Vec<Vec<V>> {
    let well_formed = offsets.len() == keys + 1
        && offsets.first() == Some(&0)
        && offsets.windows(2).all(|w| w[0] <= w[1])
        && offsets.last() == Some(&(values.len() as u64));
    assert!(
        well_formed,
        "{}: get_all_on gave {} offsets from {:?} to {:?} for {keys} keys and {} values",
        std::any::type_name::<T>(),
        offsets.len(),
        offsets.first(),
        offsets.last(),
        values.len()
    );
    offsets
        .windows(2)
        .map(|w| values[w[0] as usize..w[1] as usize].to_vec())
        .collect()
}
