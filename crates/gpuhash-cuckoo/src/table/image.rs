//! Images of a [`CuckooTable`]: every device array copied as it is, with the host state
//! that gives it meaning, so that a table moves to host memory or a file and back without
//! rehashing.
//!
//! Sections, in order: the state (options, sizes, hash coefficients, pair counts,
//! capacity floor, settled choices), the side slot, then for each subtable its keys,
//! values, bucket locks and dirty bits.

use bytemuck::{Pod, Zeroable};
use gpuhash_core::image::{Image, ImageHeader, TableImage};
use gpuhash_core::table::{Key, Value};
use gpuhash_core::{Device, DeviceBuffer, Error, Stream};

use super::subtable::dirty_words;
use super::{CuckooTable, Mirror, SIDE_HEADER, Shared, Subtable, hash_prime};
use crate::key::KeyLayout;
use crate::layouts::GH_CUCKOO_MAX_SUBTABLES;
use crate::policy::ChoiceRange;
use crate::{CuckooError, CuckooOptions, DuplicateKeys, Result};

/// The layout version of DyHash images: a table refuses images of another.
pub const IMAGE_LAYOUT_VERSION: u32 = 1;
/// How DyHash names itself in an image header.
const TABLE_NAME: &str = "gpuhash-cuckoo/CuckooTable";
/// Sections before the subtables': the state, then the side slot.
const STATE: usize = 0;
const SIDE: usize = 1;
const FIRST_SUBTABLE: usize = 2;
/// Sections of each subtable: keys, values, bucket locks, dirty bits.
const SUBTABLE_SECTIONS: usize = 4;
const MAX_SUBTABLES: usize = GH_CUCKOO_MAX_SUBTABLES as usize;

/// The host state of a table, as its image's first section holds it.
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct State {
    initial_capacity: u64,
    /// 0 for none.
    initial_buckets: u64,
    subtables: u64,
    alpha: f64,
    beta: f64,
    min_buckets: u64,
    seed: u64,
    floor_slots: u64,
    launches: u64,
    buckets: [u64; MAX_SUBTABLES],
    hash_a: [u64; MAX_SUBTABLES],
    hash_b: [u64; MAX_SUBTABLES],
    counts: [u64; MAX_SUBTABLES],
    settled_lo: [u32; MAX_SUBTABLES],
    settled_hi: [u32; MAX_SUBTABLES],
    max_evictions: u32,
    rehash_all: u32,
    /// 1 for [`DuplicateKeys::LastCopy`], 0 for `AnyCopy`.
    last_copy: u32,
    pad: u32,
}

impl State {
    /// The options it holds, validated.
    fn options(&self) -> Result<CuckooOptions> {
        let options = CuckooOptions {
            initial_capacity: usize::try_from(self.initial_capacity)
                .map_err(|_| invalid("capacity"))?,
            initial_buckets: (self.initial_buckets != 0).then_some(self.initial_buckets),
            subtables: self.subtables as usize,
            alpha: self.alpha,
            beta: self.beta,
            min_buckets: self.min_buckets,
            max_evictions: self.max_evictions,
            rehash_all: self.rehash_all != 0,
            seed: self.seed,
            duplicate_keys: if self.last_copy != 0 {
                DuplicateKeys::LastCopy
            } else {
                DuplicateKeys::AnyCopy
            },
        };
        options.validate()?;
        Ok(options)
    }

    /// Refuses sizes, coefficients and counts no table of these options has.
    fn check<K: Key>(&self, options: &CuckooOptions) -> Result<()> {
        let d = options.subtables;
        let prime = hash_prime::<K>();
        for i in 0..d {
            let (buckets, a, b) = (self.buckets[i], self.hash_a[i], self.hash_b[i]);
            if buckets == 0 || buckets >= 1 << 31 || a == 0 || a >= prime || b >= prime {
                return Err(invalid(&format!("subtable {i}'s size or hash")));
            }
            if self.counts[i] > buckets * K::SLOTS {
                return Err(invalid(&format!("subtable {i}'s pair count")));
            }
        }
        if self.counts[d..].iter().any(|&c| c != 0) {
            return Err(invalid("pair counts past the subtables"));
        }
        Ok(())
    }
}

fn invalid(what: &str) -> CuckooError {
    Error::InvalidInput(format!("DyHash image: {what} out of range")).into()
}

impl<K: Key, V: Value> Image for CuckooTable<K, V> {
    /// Copies every array of the table to the host, on a stream the device lends, once
    /// the batches queued before the call have run (a reading batch: writers wait).
    fn to_image(&self) -> Result<TableImage> {
        self.on_lent_stream(|stream| {
            self.count_on(stream)?;
            self.reading(stream, || self.image_on(stream))
        })
    }

    /// Copies the image's arrays to the device, on a stream the device lends, and waits
    /// for them. [`Error::InvalidInput`] for an image of another table, key or value
    /// width, or layout version, or one whose sections do not fit together.
    fn from_image(device: &Device, image: &TableImage) -> Result<Self> {
        image.expect(&Self::image_header())?;
        let state = one(image.section_as::<State>(STATE)?)?;
        let options = state.options()?;
        state.check::<K>(&options)?;
        let d = options.subtables;
        if image.sections().len() != FIRST_SUBTABLE + SUBTABLE_SECTIONS * d {
            return Err(invalid("number of sections"));
        }
        let side = image.section_as::<u32>(SIDE)?;
        if side.len() != SIDE_HEADER + Self::WORDS || side[1] != 0 {
            return Err(invalid("side slot"));
        }
        let stream = device.lend_stream()?;
        let subtables = (0..d)
            .map(|i| Self::subtable_from_image(&stream, image, &state, i))
            .collect::<Result<Vec<_>>>()?;
        let shared = Shared {
            counts: DeviceBuffer::from_host(&stream, &state.counts)?,
            side: DeviceBuffer::from_host(&stream, &side)?,
        };
        stream.synchronize()?;
        let mirror = Mirror {
            counts: state.counts[..d].to_vec(),
            side_present: side[0] != 0,
            launches: state.launches,
            settled: std::array::from_fn(|i| ChoiceRange {
                lo: state.settled_lo[i],
                hi: state.settled_hi[i],
            }),
            floor_slots: state.floor_slots,
            ..Mirror::default()
        };
        Ok(Self::assemble(device, options, subtables, shared, mirror))
    }
}

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// What a DyHash image of this key and value type says of itself.
    fn image_header() -> ImageHeader {
        ImageHeader {
            table: TABLE_NAME.into(),
            key_bytes: size_of::<K>() as u32,
            value_bytes: size_of::<V>() as u32,
            layout_version: IMAGE_LAYOUT_VERSION,
        }
    }

    /// Under the gate's read lock, the counts current: the image; waits for `stream`.
    fn image_on(&self, stream: &Stream) -> Result<TableImage> {
        let mut image = TableImage::new(Self::image_header());
        image.push_section(bytemuck::bytes_of(&self.state()).to_vec());
        image.push_section(bytes(self.shared.read().side.to_host(stream)?));
        for sub in &self.subtables {
            let sub = sub.read();
            image.push_section(bytes(sub.keys.to_host(stream)?));
            image.push_section(bytes(sub.values.to_host(stream)?));
            image.push_section(bytes(sub.locks.to_host(stream)?));
            image.push_section(bytes(sub.dirty.to_host(stream)?));
        }
        Ok(image)
    }

    /// The host state, as the image holds it.
    fn state(&self) -> State {
        let o = &self.options;
        let m = self.mirror.lock();
        let mut state = State {
            initial_capacity: o.initial_capacity as u64,
            initial_buckets: o.initial_buckets.unwrap_or(0),
            subtables: o.subtables as u64,
            alpha: o.alpha,
            beta: o.beta,
            min_buckets: o.min_buckets,
            seed: o.seed,
            floor_slots: m.floor_slots,
            launches: m.launches,
            settled_lo: m.settled.map(|r| r.lo),
            settled_hi: m.settled.map(|r| r.hi),
            max_evictions: o.max_evictions,
            rehash_all: u32::from(o.rehash_all),
            last_copy: u32::from(o.duplicate_keys == DuplicateKeys::LastCopy),
            ..State::zeroed()
        };
        state.counts[..m.counts.len()].copy_from_slice(&m.counts);
        for (i, sub) in self.subtables.iter().enumerate() {
            let sub = sub.read();
            (state.buckets[i], state.hash_a[i], state.hash_b[i]) =
                (sub.buckets, sub.hash_a, sub.hash_b);
        }
        state
    }

    /// Subtable `index` from its sections, each checked against its size in `state`.
    fn subtable_from_image(
        stream: &Stream,
        image: &TableImage,
        state: &State,
        index: usize,
    ) -> Result<Subtable<K>> {
        let buckets = state.buckets[index];
        let slots = (buckets * K::SLOTS) as usize;
        let first = FIRST_SUBTABLE + SUBTABLE_SECTIONS * index;
        let keys = image.section_as::<K>(first)?;
        let values = image.section_as::<u32>(first + 1)?;
        let locks = image.section_as::<u32>(first + 2)?;
        let dirty = image.section_as::<u32>(first + 3)?;
        let fits = keys.len() == slots
            && values.len() == slots * Self::WORDS
            && locks.len() == buckets as usize
            && dirty.len() == dirty_words(buckets);
        // A lock held in an image would never be let go.
        if !fits || locks.iter().any(|&l| l != 0) {
            return Err(invalid(&format!("subtable {index}'s arrays")));
        }
        Ok(Subtable {
            keys: DeviceBuffer::from_host(stream, &keys)?,
            values: DeviceBuffer::from_host(stream, &values)?,
            locks: DeviceBuffer::from_host(stream, &locks)?,
            dirty: DeviceBuffer::from_host(stream, &dirty)?,
            buckets,
            hash_a: state.hash_a[index],
            hash_b: state.hash_b[index],
        })
    }
}

/// The one value of a section, or an error.
fn one(values: Vec<State>) -> Result<State> {
    match values.as_slice() {
        [state] => Ok(*state),
        _ => Err(invalid("state section")),
    }
}

fn bytes<T: Pod>(values: Vec<T>) -> Vec<u8> {
    bytemuck::cast_slice(&values).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_of(options: &CuckooOptions) -> State {
        State {
            initial_capacity: options.initial_capacity as u64,
            initial_buckets: options.initial_buckets.unwrap_or(0),
            subtables: options.subtables as u64,
            alpha: options.alpha,
            beta: options.beta,
            min_buckets: options.min_buckets,
            seed: options.seed,
            max_evictions: options.max_evictions,
            rehash_all: u32::from(options.rehash_all),
            last_copy: u32::from(options.duplicate_keys == DuplicateKeys::LastCopy),
            buckets: [4; MAX_SUBTABLES],
            hash_a: [1; MAX_SUBTABLES],
            ..State::zeroed()
        }
    }

    #[test]
    fn the_state_keeps_the_options() {
        let options = CuckooOptions::with_capacity(12345)
            .initial_buckets(64)
            .subtables(4)
            .alpha(0.2)
            .max_evictions(7)
            .rehash_all(true)
            .duplicate_keys(DuplicateKeys::LastCopy);
        let state = state_of(&options);
        assert_eq!(state.options().unwrap(), options);
        state.check::<u32>(&options).unwrap();
    }

    #[test]
    fn states_no_table_has_are_refused() {
        let options = CuckooOptions::default();
        let mut bad_options = state_of(&options);
        bad_options.subtables = 9;
        assert!(bad_options.options().is_err());
        let mut no_buckets = state_of(&options);
        no_buckets.buckets[1] = 0;
        assert!(no_buckets.check::<u32>(&options).is_err());
        let mut overfull = state_of(&options);
        overfull.counts[0] = 4 * 32 + 1;
        assert!(overfull.check::<u32>(&options).is_err());
        assert!(overfull.check::<u64>(&options).is_err());
        let mut stray = state_of(&options);
        stray.counts[5] = 1;
        assert!(stray.check::<u32>(&options).is_err());
        assert!(one(Vec::new()).is_err());
    }
}
