//! Table images: a table's device memory as plain bytes, so that a table moves between
//! device memory and host memory or a file without rehashing.
//!
//! An image is a small header (what table, key and value widths, layout version) and the
//! table's sections (its device arrays and host state, each a run of bytes), in the order
//! the table wrote them. [`TableImage::write_to`] lays it out as:
//!
//! ```text
//! magic "GPUHASH\x01" | header length u32 | header | section count u32
//! | (section length u64 | section bytes)* | FNV-1a 64 checksum of everything before it
//! ```
//!
//! all integers little-endian. [`TableImage::read_from`] checks the magic, every length
//! against what is left of the input, and the checksum, so a truncated, damaged or foreign
//! input is an [`Error::InvalidInput`], never a panic or a wrong table; a table checks the
//! header against its own type with [`TableImage::expect`].
//!
//! ```
//! use gpuhash_core::image::{ImageHeader, TableImage};
//!
//! let header = ImageHeader { table: "example".into(), key_bytes: 4, value_bytes: 4, layout_version: 1 };
//! let mut image = TableImage::new(header.clone());
//! image.push_section(vec![1, 2, 3]);
//! let mut bytes = Vec::new();
//! image.write_to(&mut bytes)?;
//! let back = TableImage::read_from(&mut bytes.as_slice())?;
//! back.expect(&header)?;
//! assert_eq!(back.sections(), &[vec![1u8, 2, 3]]);
//! bytes[12] ^= 1; // any damaged byte is refused
//! assert!(TableImage::read_from(&mut bytes.as_slice()).is_err());
//! # Ok::<(), gpuhash_core::Error>(())
//! ```

use std::io::{Read, Write};
use std::ops::Range;

use bytemuck::Pod;

pub use crate::pinned::PinnedImage;
use crate::table::Map;
use crate::{Device, DeviceBuffer, Error, PinnedPool, Result, Stream};

const MAGIC: &[u8; 8] = b"GPUHASH\x01";
/// Sections and names longer than this are not a table's: refused before allocating.
const MAX_SECTIONS: u32 = 1 << 16;
const MAX_NAME: u32 = 256;

/// What table an image holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageHeader {
    /// The table type, as the table names itself (e.g. `"gpuhash-slab-hash/map"`).
    pub table: String,
    /// Bytes of a key.
    pub key_bytes: u32,
    /// Bytes of a value (0 for sets).
    pub value_bytes: u32,
    /// The table's layout version: a table refuses images of another.
    pub layout_version: u32,
}

/// A table's image: a header and the table's sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableImage {
    header: ImageHeader,
    sections: Vec<Vec<u8>>,
}

/// Tables that give an image of themselves and are rebuilt from one.
pub trait Image: crate::table::Table + Sized {
    /// The table's image, once the work queued before the call has run.
    fn to_image(&self) -> std::result::Result<TableImage, Self::Error>;

    /// The same table, rebuilt on `device` from `image`, with no rehashing. An image of
    /// another table, width or layout version is an error value.
    fn from_image(device: &Device, image: &TableImage) -> std::result::Result<Self, Self::Error>;

    /// Writes the table's image to `out`.
    fn save(&self, out: &mut impl Write) -> std::result::Result<(), Self::Error> {
        Ok(self.to_image()?.write_to(out)?)
    }

    /// Reads an image from `input` and rebuilds its table on `device`.
    fn load(device: &Device, input: &mut impl Read) -> std::result::Result<Self, Self::Error> {
        Self::from_image(device, &TableImage::read_from(input)?)
    }

    /// The table's image in pinned memory from `pool`, once the work queued before the
    /// call has run. Tables that can copy their arrays straight into it (one DMA each)
    /// override this; the default goes through [`Image::to_image`].
    /// [`Error::OutOfPinnedMemory`] when the pool refuses the memory.
    fn to_pinned_image(&self, pool: &PinnedPool) -> std::result::Result<PinnedImage, Self::Error> {
        Ok(PinnedImage::from_image(pool, &self.to_image()?)?)
    }

    /// The table rebuilt on `device` from a pinned image, as [`Image::from_image`] does.
    /// Tables that copy their arrays straight from it (one DMA each) override this; the
    /// default goes through [`PinnedImage::to_image`].
    fn from_pinned_image(
        device: &Device,
        image: &PinnedImage,
    ) -> std::result::Result<Self, Self::Error> {
        Self::from_image(device, &image.to_image()?)
    }
}

/// Maps whose lookups can run on an image in mapped pinned memory, read in place over the
/// bus (zero-copy), without rebuilding the table on the device: worth it when a batch
/// touches few of the image's bytes. Every method has a default for maps that cannot:
/// [`ProbeInPlace::PROBES_IN_PLACE`] is false and [`ProbeInPlace::get_in_place`] refuses,
/// so `impl ProbeInPlace for MyMap {}` is all such a map needs.
pub trait ProbeInPlace: Map + Image {
    /// Whether [`ProbeInPlace::get_in_place`] works for this map.
    const PROBES_IN_PLACE: bool = false;
    /// Bytes a lookup reads from the image, on average, for a key it finds (the rest of a
    /// lookup reads device memory): what a cost model weighs against paging the image.
    const PROBE_BYTES: u64 = 128;

    /// Looks up `keys` in the map that `image` holds, reading the image in place; `image`
    /// must come from a mapped pool ([`PinnedPool::new_mapped`]). Queued on `stream`:
    /// `found[i]` becomes 1 where `keys[i]` is present, 0 elsewhere, and `values[i]` (when
    /// given) its value where found, untouched elsewhere. Answers equal those of
    /// [`Map::get_async`] on [`Image::from_pinned_image`] of the image.
    ///
    /// An image of another map, or one not mapped, is an [`Error::InvalidInput`]; the
    /// default refuses every image.
    fn get_in_place(
        stream: &Stream,
        image: &PinnedImage,
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<Self::Value>>,
    ) -> std::result::Result<(), Self::Error> {
        let _ = (stream, image, keys, found, values);
        Err(Error::InvalidInput(format!(
            "{} cannot be probed in place",
            std::any::type_name::<Self>()
        ))
        .into())
    }
    /// Looks up `keys[range]` in `map` for each `(map, range)` of `maps`, queued on
    /// `stream`, each answer at its key's place: `found[i]` becomes 1 where `keys[i]` is
    /// in its range's map, 0 elsewhere in the ranges, and `values[i]` (when given) its value
    /// where found, untouched elsewhere; places outside every range are not written. The
    /// ranges lie within `keys`, `found` and `values`, and a map appears once. For a batch
    /// already split among many maps (the children of a larger table): maps that can look
    /// them all up in one launch override this; the default runs each map's own lookup on
    /// a copy of its range ([`get_each_by_map`]).
    fn get_each(
        stream: &Stream,
        maps: &[(&Self, Range<usize>)],
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<Self::Value>>,
    ) -> std::result::Result<(), Self::Error> {
        get_each_by_map(stream, maps, keys, found, values)
    }

    /// Looks up `keys[range]` in the map that `image` holds for each `(image, range)` of
    /// `images`, reading each image in place (each from a mapped pool), queued on
    /// `stream`; answers as [`ProbeInPlace::get_each`] gives them, an image appearing once.
    /// For the children of a larger table left on the host: maps that can probe them all
    /// in one launch override this; the default probes each image with
    /// [`ProbeInPlace::get_in_place`] on a copy of its range.
    fn get_in_place_each(
        stream: &Stream,
        images: &[(&PinnedImage, Range<usize>)],
        keys: &DeviceBuffer<Self::Key>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<Self::Value>>,
    ) -> std::result::Result<(), Self::Error> {
        get_in_place_each_by_image::<Self>(stream, images, keys, found, values)
    }

    /// Whether [`ProbeInPlace::get_routed`] works for this map.
    const ROUTES: bool = false;

    /// Looks up every key of `batch.keys[batch.range]` in one call, each in the map its
    /// route names: `keys[i]` in `routes[route_of[i - range.start]]`, where a route past the
    /// end of `routes` ([`NO_ROUTE`], say) leaves the key out. Queued on `stream`, with no
    /// wait: `found[i]` becomes 1 where `keys[i]` is in its route's map, 0 where it is not;
    /// `values[i]` (when given) its value where found. The places of keys left out, of
    /// misses' values and outside the range are not written, so that a batch may be
    /// answered in several calls, each routing some of its keys. Answers equal
    /// those of [`Map::get_async`] on each route's map (an image's as
    /// [`ProbeInPlace::get_in_place`] gives them). For a batch spread over many maps, some
    /// on the device and some imaged on the host (the children of a larger table), with
    /// nothing partitioned first.
    ///
    /// `keys`, `found` and `values` must hold the range, `route_of` a route for each of its
    /// keys ([`Error::InvalidInput`] otherwise, nothing written), and a map on the device
    /// may appear once (an image, which is only read, in several routes). The default
    /// refuses, for maps that cannot ([`ProbeInPlace::ROUTES`] false).
    fn get_routed(
        stream: &Stream,
        routes: &[Route<'_, Self>],
        batch: Routed<'_, Self::Key>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<Self::Value>>,
    ) -> std::result::Result<(), Self::Error> {
        let _ = (stream, routes, batch, found, values);
        Err(Error::InvalidInput(format!(
            "{} cannot route a lookup",
            std::any::type_name::<Self>()
        ))
        .into())
    }
}

/// The route of a key that [`ProbeInPlace::get_routed`] leaves out (its answer is not
/// written): past the end of every list of routes.
pub const NO_ROUTE: u32 = u32::MAX;

/// Where [`ProbeInPlace::get_routed`] looks up the keys sent to one route.
#[derive(Debug)]
pub enum Route<'a, M> {
    /// A map on the device.
    Device(&'a M),
    /// A map's image in mapped pinned memory ([`PinnedPool::new_mapped`]), read in place
    /// over the bus.
    InPlace(&'a PinnedImage),
}

impl<M> Clone for Route<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Route<'_, M> {}

/// The keys of a [`ProbeInPlace::get_routed`]: `keys[range]`, the key at `i` with its
/// route at `route_of[i - range.start]`.
#[derive(Debug)]
pub struct Routed<'a, K> {
    /// The batch's keys, of which the lookup reads `range`.
    pub keys: &'a DeviceBuffer<K>,
    /// The keys looked up (and the answers written).
    pub range: Range<usize>,
    /// The route of each key of the range, from its start.
    pub route_of: &'a DeviceBuffer<u32>,
}

/// Checks the buffers of a [`ProbeInPlace::get_routed`]: keys, flags and values (when
/// given) that hold the range, a route for each of its keys, each map on the device in one
/// route at most (an image, only read, may serve several).
pub fn check_routed<M, K: Pod>(
    routes: &[Route<'_, M>],
    batch: &Routed<'_, K>,
    found: usize,
    values: Option<usize>,
) -> Result<()> {
    let range = &batch.range;
    let room = [batch.keys.len(), found]
        .into_iter()
        .chain(values)
        .min()
        .unwrap_or(0);
    if range.start > range.end || range.end > room || batch.route_of.len() < range.len() {
        return Err(Error::InvalidInput(format!(
            "get_routed: range {range:?} of {} keys, {found} flags, {values:?} values and \
             {} routes",
            batch.keys.len(),
            batch.route_of.len()
        )));
    }
    let map = |route: &Route<'_, M>| match route {
        Route::Device(map) => Some(std::ptr::from_ref(*map)),
        Route::InPlace(_) => None,
    };
    for (at, route) in routes.iter().enumerate() {
        if map(route).is_some() && routes[..at].iter().any(|other| map(other) == map(route)) {
            return Err(Error::InvalidInput(
                "get_routed: a map appears twice".into(),
            ));
        }
    }
    Ok(())
}

/// [`ProbeInPlace::get_each`] map by map: each map's keys copied out, looked up with
/// [`Map::get_async`] (or [`Map::contains_async`] without values), the answers copied
/// back to their places.
pub fn get_each_by_map<M: Map>(
    stream: &Stream,
    maps: &[(&M, Range<usize>)],
    keys: &DeviceBuffer<M::Key>,
    found: &mut DeviceBuffer<u8>,
    values: Option<&mut DeviceBuffer<M::Value>>,
) -> std::result::Result<(), M::Error> {
    each_on_copies(
        stream,
        maps,
        keys,
        found,
        values,
        |map, keys, found, values| match values {
            Some(values) => map.get_async(stream, keys, found, values),
            None => map.contains_async(stream, keys, found),
        },
    )
}

/// [`ProbeInPlace::get_in_place_each`] image by image: each image's keys copied out,
/// probed with [`ProbeInPlace::get_in_place`], the answers copied back to their places.
pub fn get_in_place_each_by_image<M: ProbeInPlace>(
    stream: &Stream,
    images: &[(&PinnedImage, Range<usize>)],
    keys: &DeviceBuffer<M::Key>,
    found: &mut DeviceBuffer<u8>,
    values: Option<&mut DeviceBuffer<M::Value>>,
) -> std::result::Result<(), M::Error> {
    each_on_copies(
        stream,
        images,
        keys,
        found,
        values,
        |image, keys, found, values| M::get_in_place(stream, image, keys, found, values),
    )
}

/// For each `(part, range)` of `parts` (checked by [`check_each`]), `lookup` on a copy of
/// the range's keys, its flags and values (when given) copied back to the range. The
/// caller's values go out and back, so those the lookup leaves alone stay as they were.
fn each_on_copies<P, K: Pod, V: Pod, E: From<Error>>(
    stream: &Stream,
    parts: &[(&P, Range<usize>)],
    keys: &DeviceBuffer<K>,
    found: &mut DeviceBuffer<u8>,
    mut values: Option<&mut DeviceBuffer<V>>,
    mut lookup: impl FnMut(
        &P,
        &DeviceBuffer<K>,
        &mut DeviceBuffer<u8>,
        Option<&mut DeviceBuffer<V>>,
    ) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    check_each(
        parts,
        keys.len(),
        found.len(),
        values.as_deref().map(DeviceBuffer::len),
    )?;
    for (part, range) in parts {
        let len = range.len();
        let mut part_keys = DeviceBuffer::unfilled(stream, len)?;
        part_keys.copy_range_from(stream, 0, keys, range.clone())?;
        let mut part_found = DeviceBuffer::unfilled(stream, len)?;
        match values.as_deref_mut() {
            Some(values) => {
                let mut part_values = DeviceBuffer::unfilled(stream, len)?;
                part_values.copy_range_from(stream, 0, values, range.clone())?;
                lookup(part, &part_keys, &mut part_found, Some(&mut part_values))?;
                values.copy_range_from(stream, range.start, &part_values, 0..len)?;
            }
            None => lookup(part, &part_keys, &mut part_found, None)?,
        }
        found.copy_range_from(stream, range.start, &part_found, 0..len)?;
    }
    Ok(())
}

/// The rules of [`ProbeInPlace::get_each`] (and [`ProbeInPlace::get_in_place_each`]):
/// ranges within the buffers, each map (or image) once.
pub fn check_each<M>(
    maps: &[(&M, Range<usize>)],
    keys: usize,
    found: usize,
    values: Option<usize>,
) -> Result<()> {
    let room = values.map_or(keys.min(found), |v| keys.min(found).min(v));
    for (at, (map, range)) in maps.iter().enumerate() {
        if range.start > range.end || range.end > room {
            return Err(Error::InvalidInput(format!(
                "get_each: range {range:?} of buffers of {keys} keys, {found} flags and {values:?} values"
            )));
        }
        if maps[..at]
            .iter()
            .any(|(other, _)| std::ptr::eq(*other, *map))
        {
            return Err(Error::InvalidInput("get_each: a map appears twice".into()));
        }
    }
    Ok(())
}

impl TableImage {
    /// An image with this header and no sections yet.
    pub fn new(header: ImageHeader) -> Self {
        Self {
            header,
            sections: Vec::new(),
        }
    }

    /// Appends a section.
    pub fn push_section(&mut self, bytes: Vec<u8>) {
        self.sections.push(bytes);
    }

    /// The header.
    pub fn header(&self) -> &ImageHeader {
        &self.header
    }

    /// The sections, in the order they were pushed.
    pub fn sections(&self) -> &[Vec<u8>] {
        &self.sections
    }

    /// [`Error::InvalidInput`] unless the header is `expected`. Tables read their sections
    /// with [`TableImage::section`] and [`TableImage::section_as`], which refuse a missing
    /// or ill-sized one.
    pub fn expect(&self, expected: &ImageHeader) -> Result<()> {
        if &self.header == expected {
            Ok(())
        } else {
            Err(invalid(format!(
                "the image holds {:?}, not {:?}",
                self.header, expected
            )))
        }
    }

    /// Section `index`, or [`Error::InvalidInput`] if the image has fewer.
    pub fn section(&self, index: usize) -> Result<&[u8]> {
        self.sections
            .get(index)
            .map(Vec::as_slice)
            .ok_or_else(|| invalid(format!("the image has no section {index}")))
    }

    /// Section `index` as values of `T`, or [`Error::InvalidInput`] if it is missing or
    /// not a whole number of them.
    pub fn section_as<T: bytemuck::Pod>(&self, index: usize) -> Result<Vec<T>> {
        let bytes = self.section(index)?;
        if bytes.len() % size_of::<T>().max(1) != 0 {
            return Err(invalid(format!(
                "section {index} is {} bytes, not whole values of {} bytes",
                bytes.len(),
                size_of::<T>()
            )));
        }
        let mut values = vec![T::zeroed(); bytes.len() / size_of::<T>().max(1)];
        bytemuck::cast_slice_mut::<T, u8>(&mut values).copy_from_slice(bytes);
        Ok(values)
    }

    /// Writes the image (layout in the module docs).
    pub fn write_to(&self, out: &mut impl Write) -> Result<()> {
        let mut writer = Checksummed::new(out);
        writer.put(MAGIC)?;
        let name = self.header.table.as_bytes();
        writer.put(&(name.len() as u32).to_le_bytes())?;
        writer.put(name)?;
        for word in [
            self.header.key_bytes,
            self.header.value_bytes,
            self.header.layout_version,
            self.sections.len() as u32,
        ] {
            writer.put(&word.to_le_bytes())?;
        }
        for section in &self.sections {
            writer.put(&(section.len() as u64).to_le_bytes())?;
            writer.put(section)?;
        }
        let sum = writer.sum;
        writer.put(&sum.to_le_bytes())
    }

    /// Reads an image written by [`TableImage::write_to`], checking it whole.
    pub fn read_from(input: &mut impl Read) -> Result<Self> {
        let mut reader = Checksummed::new(input);
        if reader.take::<8>()? != *MAGIC {
            return Err(invalid("not a gpuhash table image (magic differs)".into()));
        }
        let name_len = reader.u32()?;
        if name_len > MAX_NAME {
            return Err(invalid(format!("table name of {name_len} bytes")));
        }
        let name = String::from_utf8(reader.bytes(name_len as u64)?)
            .map_err(|_| invalid("table name is not UTF-8".into()))?;
        let (key_bytes, value_bytes, layout_version) =
            (reader.u32()?, reader.u32()?, reader.u32()?);
        let count = reader.u32()?;
        if count > MAX_SECTIONS {
            return Err(invalid(format!("{count} sections")));
        }
        let mut image = TableImage::new(ImageHeader {
            table: name,
            key_bytes,
            value_bytes,
            layout_version,
        });
        for _ in 0..count {
            let len = u64::from_le_bytes(reader.take::<8>()?);
            image.push_section(reader.bytes(len)?);
        }
        let expected = reader.sum;
        if u64::from_le_bytes(reader.take::<8>()?) != expected {
            return Err(invalid("the image's checksum does not match".into()));
        }
        Ok(image)
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidInput(format!("table image: {message}"))
}

/// FNV-1a 64 over every byte that passes through.
struct Checksummed<'a, S: ?Sized> {
    inner: &'a mut S,
    sum: u64,
}

impl<'a, S: ?Sized> Checksummed<'a, S> {
    fn new(inner: &'a mut S) -> Self {
        Self {
            inner,
            sum: 0xcbf2_9ce4_8422_2325,
        }
    }

    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.sum = (self.sum ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

impl<S: Write + ?Sized> Checksummed<'_, S> {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.add(bytes);
        self.inner
            .write_all(bytes)
            .map_err(|e| invalid(format!("cannot write: {e}")))
    }
}

impl<S: Read + ?Sized> Checksummed<'_, S> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take::<4>()?))
    }

    /// `len` bytes, read in pieces so that a length the input does not back is refused
    /// when the input ends, not by allocating it up front.
    fn bytes(&mut self, len: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut left = len;
        let mut piece = [0u8; 1 << 16];
        while left > 0 {
            let n = left.min(piece.len() as u64) as usize;
            self.fill(&mut piece[..n])?;
            out.extend_from_slice(&piece[..n]);
            left -= n as u64;
        }
        Ok(out)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner
            .read_exact(buf)
            .map_err(|_| invalid("the input ends before the image does".into()))?;
        self.add(buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableImage {
        let mut image = TableImage::new(ImageHeader {
            table: "test/table".into(),
            key_bytes: 8,
            value_bytes: 4,
            layout_version: 3,
        });
        image.push_section((0..=255).collect());
        image.push_section(Vec::new());
        image.push_section(bytemuck::cast_slice(&[7u32, u32::MAX]).to_vec());
        image
    }

    fn bytes_of(image: &TableImage) -> Vec<u8> {
        let mut out = Vec::new();
        image.write_to(&mut out).unwrap();
        out
    }

    #[test]
    fn an_image_reads_back_as_written() {
        let image = sample();
        let back = TableImage::read_from(&mut bytes_of(&image).as_slice()).unwrap();
        assert_eq!(back, image);
        assert_eq!(back.section_as::<u32>(2).unwrap(), vec![7, u32::MAX]);
        assert!(back.section_as::<u64>(2).is_ok());
        assert!(back.section_as::<u32>(0).is_ok());
        assert!(back.section(3).is_err());
        assert!(back.section_as::<[u8; 3]>(2).is_err());
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let bytes = bytes_of(&sample());
        for len in 0..bytes.len() {
            assert!(TableImage::read_from(&mut &bytes[..len]).is_err(), "{len}");
        }
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(
                TableImage::read_from(&mut damaged.as_slice()).is_err(),
                "{at}"
            );
        }
    }

    #[test]
    fn a_header_of_another_table_is_refused() {
        let image = sample();
        let mut other = image.header().clone();
        other.value_bytes = 8;
        assert!(image.expect(&other).is_err());
        assert!(image.expect(image.header()).is_ok());
    }

    #[test]
    fn a_huge_declared_length_fails_on_the_input_not_on_memory() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.push(b'x');
        for word in [4u32, 4, 1, 1] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(TableImage::read_from(&mut bytes.as_slice()).is_err());
    }
}
