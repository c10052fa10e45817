//! Images of a [`CuckooTable`]: every device array copied as it is, with the host state
//! that gives it meaning, so that a table moves to host memory or a file and back without
//! rehashing.
//!
//! Sections, in order: the state (options, bucket layout, sizes, hash coefficients, pair
//! counts, capacity floor, settled choices), the side slot, then for each subtable its slot
//! words (keys or packed pairs), values (empty when packed), bucket locks and dirty bits.
//!
//! Version 2 records the bucket layout in the state; version 1 images, made before the
//! packed layout, hold zero there, which is the split layout's code, so they still load
//! (as split tables).

use bytemuck::{Pod, Zeroable};
use gpuhash_core::image::{
    Image, ImageHeader, PinnedImage, ProbeInPlace, Route, Routed, TableImage, check_each,
    get_each_by_map, get_in_place_each_by_image,
};
use gpuhash_core::table::{Key, Value};
use gpuhash_core::{Device, DeviceBuffer, Error, MappedAddress, PinnedPool, Stream};

use super::subtable::dirty_words;
use super::{
    CuckooTable, Mirror, SIDE_HEADER, Shared, Subtable, check_lengths, choice_seed, hash_prime,
};
use crate::launch::{FindPart, FindShared};
use crate::layouts::{
    GH_CUCKOO_BUCKET_BYTES, GH_CUCKOO_MAX_SUBTABLES, GhCuckooHome, GhCuckooSubtable, GhCuckooTable,
};
use crate::policy::{self, ChoiceRange};
use crate::{BucketLayout, CuckooError, CuckooOptions, DuplicateKeys, Result, launch};

/// The layout version of the DyHash images a table writes. It reads these and version 1
/// images (split buckets, from before the layout was recorded), and refuses others.
pub const IMAGE_LAYOUT_VERSION: u32 = 2;
/// The versions a table reads.
const READABLE_VERSIONS: [u32; 2] = [1, IMAGE_LAYOUT_VERSION];
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
pub(super) struct State {
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
    /// The bucket layout's `GH_CUCKOO_LAYOUT_*` code (0, split, in version 1 images).
    layout: u32,
}

impl State {
    /// The bucket layout it holds, checked against the pair's widths.
    fn layout(&self, key_bytes: usize, value_bytes: usize) -> Result<BucketLayout> {
        let layout = BucketLayout::from_code(self.layout).ok_or_else(|| invalid("layout"))?;
        layout
            .resolve(key_bytes, value_bytes)
            .map_err(|_| invalid("layout"))
    }

    /// The options it holds, validated, with the layout choice that gives `layout`.
    fn options(
        &self,
        layout: BucketLayout,
        key_bytes: usize,
        value_bytes: usize,
    ) -> Result<CuckooOptions> {
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
            layout: BucketLayout::choice_for(layout, key_bytes, value_bytes),
        };
        options.validate()?;
        Ok(options)
    }

    /// Refuses sizes, coefficients and counts no table of these options and `slots` pairs
    /// a bucket has.
    fn check<K: Key>(&self, options: &CuckooOptions, slots: u64) -> Result<()> {
        let d = options.subtables;
        let prime = hash_prime::<K>();
        for i in 0..d {
            let (buckets, a, b) = (self.buckets[i], self.hash_a[i], self.hash_b[i]);
            if buckets == 0 || buckets >= 1 << 31 || a == 0 || a >= prime || b >= prime {
                return Err(invalid(&format!("subtable {i}'s size or hash")));
            }
            if self.counts[i] > buckets * slots {
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
        Self::rebuild(device, image)
    }

    /// Copies every array of the table into pinned memory from `pool`, one DMA each, on a
    /// stream the device lends, once the batches queued before the call have run.
    fn to_pinned_image(&self, pool: &PinnedPool) -> Result<PinnedImage> {
        self.on_lent_stream(|stream| {
            self.count_on(stream)?;
            self.reading(stream, || self.pinned_image_on(stream, pool))
        })
    }

    /// Copies the image's arrays to the device, one DMA each, and waits for them; checked
    /// as [`Image::from_image`] checks.
    fn from_pinned_image(device: &Device, image: &PinnedImage) -> Result<Self> {
        Self::rebuild(device, image)
    }
}

/// An image a table is rebuilt from, on the host or in pinned memory: its small sections
/// read on the host, its arrays copied to the device.
pub(super) trait Sections {
    fn header(&self) -> &ImageHeader;
    fn count(&self) -> usize;
    /// Section `index`'s bytes, where they lie.
    fn bytes(&self, index: usize) -> Result<&[u8]>;
    /// Bytes of section `index`.
    fn bytes_of(&self, index: usize) -> Result<usize> {
        Ok(self.bytes(index)?.len())
    }
    /// Whether section `index` holds only zero bytes (read in place).
    fn all_zero(&self, index: usize) -> Result<bool> {
        Ok(self.bytes(index)?.iter().fold(0, |any, &b| any | b) == 0)
    }
    /// Section `index` on the host.
    fn host<T: Pod>(&self, index: usize) -> Result<Vec<T>>;
    /// Section `index` in a new device buffer, queued on `stream`.
    fn upload<T: Pod>(&self, stream: &Stream, index: usize) -> Result<DeviceBuffer<T>>;
}

impl Sections for TableImage {
    fn header(&self) -> &ImageHeader {
        self.header()
    }
    fn count(&self) -> usize {
        self.sections().len()
    }
    fn bytes(&self, index: usize) -> Result<&[u8]> {
        Ok(self.section(index)?)
    }
    fn host<T: Pod>(&self, index: usize) -> Result<Vec<T>> {
        Ok(self.section_as(index)?)
    }
    fn upload<T: Pod>(&self, stream: &Stream, index: usize) -> Result<DeviceBuffer<T>> {
        Ok(DeviceBuffer::from_host(
            stream,
            &self.section_as::<T>(index)?,
        )?)
    }
}

impl Sections for PinnedImage {
    fn header(&self) -> &ImageHeader {
        self.header()
    }
    fn count(&self) -> usize {
        self.section_count()
    }
    fn bytes(&self, index: usize) -> Result<&[u8]> {
        Ok(self.section(index)?)
    }
    fn host<T: Pod>(&self, index: usize) -> Result<Vec<T>> {
        Ok(self.section_as(index)?.to_vec())
    }
    fn upload<T: Pod>(&self, stream: &Stream, index: usize) -> Result<DeviceBuffer<T>> {
        Ok(self.upload_section(stream, index)?)
    }
}

/// What an image says of a table, checked: its state and side slot.
pub(super) struct Checked {
    pub(super) state: State,
    pub(super) options: CuckooOptions,
    /// The resolved bucket layout.
    pub(super) layout: BucketLayout,
    pub(super) side: Vec<u32>,
}

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// The table an image holds, its arrays copied to the device on a lent stream.
    fn rebuild(device: &Device, image: &impl Sections) -> Result<Self> {
        let Checked {
            state,
            options,
            layout,
            side,
        } = Self::check_image(image)?;
        let stream = device.lend_stream()?;
        let subtables = (0..options.subtables)
            .map(|i| Self::subtable_from_image(&stream, image, &state, i))
            .collect::<Result<Vec<_>>>()?;
        // A lock held in an image would never be let go: checked, in place, while the
        // copies run (a bad image's copies are dropped with the error).
        for i in 0..options.subtables {
            if !image.all_zero(FIRST_SUBTABLE + SUBTABLE_SECTIONS * i + 2)? {
                return Err(invalid(&format!("subtable {i}'s locks")));
            }
        }
        let shared = Shared {
            counts: DeviceBuffer::from_host(&stream, &state.counts)?,
            side: DeviceBuffer::from_host(&stream, &side)?,
        };
        stream.synchronize()?;
        let mirror = Mirror {
            counts: state.counts[..options.subtables].to_vec(),
            side_present: side[0] != 0,
            launches: state.launches,
            settled: std::array::from_fn(|i| ChoiceRange {
                lo: state.settled_lo[i],
                hi: state.settled_hi[i],
            }),
            floor_slots: state.floor_slots,
            ..Mirror::default()
        };
        Ok(Self::assemble(
            device, options, layout, subtables, shared, mirror,
        ))
    }

    /// The header, state, section count, side slot and every subtable's section sizes
    /// of `image`, checked against this table type.
    pub(super) fn check_image(image: &impl Sections) -> Result<Checked> {
        let header = image.header();
        let ours = Self::image_header();
        let readable = READABLE_VERSIONS.contains(&header.layout_version);
        if !readable
            || header
                != &(ImageHeader {
                    layout_version: header.layout_version,
                    ..ours.clone()
                })
        {
            return Err(Error::InvalidInput(format!(
                "table image: the image holds {header:?}, not {ours:?} (or version 1)"
            ))
            .into());
        }
        let state = one(image.host::<State>(STATE)?)?;
        let (key_bytes, value_bytes) = (size_of::<K>(), size_of::<V>());
        let layout = state.layout(key_bytes, value_bytes)?;
        let options = state.options(layout, key_bytes, value_bytes)?;
        state.check::<K>(&options, layout.slots(key_bytes))?;
        let d = options.subtables;
        if image.count() != FIRST_SUBTABLE + SUBTABLE_SECTIONS * d {
            return Err(invalid("number of sections"));
        }
        let side = image.host::<u32>(SIDE)?;
        if side.len() != SIDE_HEADER + Self::WORDS || side[1] != 0 {
            return Err(invalid("side slot"));
        }
        let value_words = layout.value_words_per_bucket(key_bytes, Self::WORDS);
        for index in 0..d {
            let buckets = state.buckets[index];
            let first = FIRST_SUBTABLE + SUBTABLE_SECTIONS * index;
            let fits = image.bytes_of(first)? == buckets as usize * GH_CUCKOO_BUCKET_BYTES as usize
                && image.bytes_of(first + 1)? == (buckets * value_words) as usize * 4
                && image.bytes_of(first + 2)? == buckets as usize * 4
                && image.bytes_of(first + 3)? == dirty_words(buckets) * 4;
            if !fits {
                return Err(invalid(&format!("subtable {index}'s arrays")));
            }
        }
        Ok(Checked {
            state,
            options,
            layout,
            side,
        })
    }

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

    /// Under the gate's read lock, the counts current: the image in pinned memory, its
    /// arrays queued on `stream` one DMA each.
    fn pinned_image_on(&self, stream: &Stream, pool: &PinnedPool) -> Result<PinnedImage> {
        let state = self.state();
        let shared = self.shared.read();
        let subs: Vec<_> = self.subtables.iter().map(|s| s.read()).collect();
        let mut lens = vec![size_of::<State>(), shared.side.size_bytes()];
        for sub in &subs {
            lens.extend([
                sub.keys.size_bytes(),
                sub.values.size_bytes(),
                sub.locks.size_bytes(),
                sub.dirty.size_bytes(),
            ]);
        }
        let mut image = PinnedImage::with_sections(pool, Self::image_header(), &lens)?;
        image
            .section_mut(STATE)?
            .copy_from_slice(bytemuck::bytes_of(&state));
        image.download_section(stream, SIDE, &shared.side)?;
        for (index, sub) in subs.iter().enumerate() {
            let first = FIRST_SUBTABLE + SUBTABLE_SECTIONS * index;
            image.download_section(stream, first, &sub.keys)?;
            image.download_section(stream, first + 1, &sub.values)?;
            image.download_section(stream, first + 2, &sub.locks)?;
            image.download_section(stream, first + 3, &sub.dirty)?;
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
            layout: self.layout.code(),
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

    /// Subtable `index` from its sections (sized by [`Self::check_image`]).
    fn subtable_from_image(
        stream: &Stream,
        image: &impl Sections,
        state: &State,
        index: usize,
    ) -> Result<Subtable<K>> {
        let first = FIRST_SUBTABLE + SUBTABLE_SECTIONS * index;
        Ok(Subtable {
            keys: image.upload(stream, first)?,
            values: image.upload(stream, first + 1)?,
            locks: image.upload(stream, first + 2)?,
            dirty: image.upload(stream, first + 3)?,
            buckets: state.buckets[index],
            hash_a: state.hash_a[index],
            hash_b: state.hash_b[index],
        })
    }
}

/// Lookups read the image where it lies: the find kernel of the image's bucket layout,
/// given the mapped addresses of the image's sections in place of the device arrays.
impl<K: Key, V: Value> ProbeInPlace for CuckooTable<K, V> {
    const PROBES_IN_PLACE: bool = true;
    /// The home half of the key's first bucket, 64 bytes, holding the value too in the
    /// layout [`BucketLayout::Auto`] gives a `u32` key and a 4-byte value (packed), plus
    /// the value apart for other pairs (split). An image forced split reads the value apart
    /// too; this is the cost of the default layout.
    const PROBE_BYTES: u64 = if size_of::<K>() == 4 && size_of::<V>() == 4 {
        64
    } else {
        64 + size_of::<V>() as u64
    };

    /// One launch of the find kernel for all the maps, each map's range served by blocks
    /// of its own, where they share a bucket layout (the children of one table do); map by
    /// map otherwise.
    fn get_each(
        stream: &Stream,
        maps: &[(&Self, std::ops::Range<usize>)],
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<()> {
        let one_layout = maps
            .windows(2)
            .all(|pair| pair[0].0.layout == pair[1].0.layout);
        match one_layout {
            true => Self::find_each(stream, maps, keys, found, values),
            false => get_each_by_map(stream, maps, keys, found, values),
        }
    }

    fn get_in_place(
        stream: &Stream,
        image: &PinnedImage,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<()> {
        check_lengths("get_in_place: keys and found", keys.len(), found.len())?;
        if let Some(values) = &values {
            check_lengths("get_in_place: keys and values", keys.len(), values.len())?;
        }
        let (_mapped, in_place) = Self::in_place(stream, image)?;
        launch::find(
            stream,
            launch::Find {
                table: in_place.table,
                home: in_place.home,
                keys,
                found: Some(found),
                values,
                hits: None,
            },
        )
    }

    /// One launch of the find kernel for all the images, each image's range served by
    /// blocks of its own, where they share a bucket layout (the children of one table do);
    /// image by image otherwise.
    fn get_in_place_each(
        stream: &Stream,
        images: &[(&PinnedImage, std::ops::Range<usize>)],
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<()> {
        let values_len = values.as_deref().map(DeviceBuffer::len);
        check_each(images, keys.len(), found.len(), values_len)?;
        let mut mapped = Vec::with_capacity(images.len());
        let mut parts = Vec::with_capacity(images.len());
        for (image, range) in images {
            let (address, in_place) = Self::in_place(stream, image)?;
            mapped.push(address);
            parts.push((in_place, range.clone()));
        }
        let Some((first, _)) = parts.first() else {
            return Ok(());
        };
        let layout = first.layout;
        if parts.iter().any(|(part, _)| part.layout != layout) {
            return get_in_place_each_by_image::<Self>(stream, images, keys, found, values);
        }
        let parts: Vec<FindPart> = parts
            .into_iter()
            .filter(|(_, range)| !range.is_empty())
            .map(|(part, range)| FindPart {
                table: part.table,
                home: part.home,
                range,
            })
            .collect();
        let shared = FindShared {
            keys,
            found,
            values,
        };
        launch::find_many(stream, layout.code(), &parts, shared)
    }

    const ROUTES: bool = true;

    /// One launch of the routed find kernel: each key's route, a table on the device or an
    /// image read in place, is read from the list the launch carries (`table/routed.rs`).
    /// Routes of two bucket layouts are an [`Error::InvalidInput`].
    fn get_routed(
        stream: &Stream,
        routes: &[Route<'_, Self>],
        batch: Routed<'_, K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<()> {
        Self::find_routed(stream, routes, batch, found, values)
    }
}

/// What the find kernel reads of a table imaged in mapped pinned memory: the table as its
/// kernels see it, with the mapped addresses of the image's sections in place of device
/// arrays, where keys start, and the bucket layout.
pub(super) struct InPlace {
    pub(super) table: GhCuckooTable,
    pub(super) home: GhCuckooHome,
    pub(super) layout: BucketLayout,
}

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// The kernels' view of the table `image` holds, read in place; the address guard must
    /// outlive the launch that reads it.
    pub(super) fn in_place<'a>(
        stream: &'a Stream,
        image: &'a PinnedImage,
    ) -> Result<(MappedAddress<'a>, InPlace)> {
        let Checked {
            state,
            options,
            layout,
            ..
        } = Self::check_image(image)?;
        let d = options.subtables;
        let (mapped, addresses) = image.mapped_sections(stream)?;
        let mut table = GhCuckooTable {
            subtables: d as u32,
            value_words: Self::WORDS as u32,
            layout: layout.code(),
            ..GhCuckooTable::default()
        };
        for (index, sub) in table.sub[..d].iter_mut().enumerate() {
            let first = FIRST_SUBTABLE + SUBTABLE_SECTIONS * index;
            let buckets = state.buckets[index];
            *sub = GhCuckooSubtable {
                keys: addresses[first] as *mut _,
                values: addresses[first + 1] as *mut u32,
                locks: addresses[first + 2] as *mut u32,
                dirty: addresses[first + 3] as *mut u32,
                buckets,
                fastmod: (u64::MAX / buckets).wrapping_add(1),
                hash_a: state.hash_a[index],
                hash_b: state.hash_b[index],
            };
        }
        // Lookups read no counts; the side slot is read in place like the buckets.
        table.side = addresses[SIDE] as *mut u32;
        let home = GhCuckooHome {
            thresholds: policy::thresholds(&policy::home_weights(
                &state.buckets[..d],
                &state.counts[..d],
                layout.slots(size_of::<K>()),
            )),
            settled_lo: state.settled_lo,
            settled_hi: state.settled_hi,
            seed: choice_seed(state.seed),
        };
        Ok((
            mapped,
            InPlace {
                table,
                home,
                layout,
            },
        ))
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
mod tests;
