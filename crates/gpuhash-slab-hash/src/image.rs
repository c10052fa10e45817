//! Table images: the bucket heads and the allocator's memory as bytes, with the options
//! that give them meaning, so that a table moves to the host or a file and back with no
//! rehashing.
//!
//! Sections, in order: the hash and options (u64 words: `a`, `b`, buckets of the bucket
//! hash, then 1 if the map keeps last copies, else 0), the head slabs (u32 words), then
//! the allocator's sections ([`gpuhash_slab_alloc::SlabAlloc::to_sections`]). Slab
//! addresses are 32-bit indices into the allocator's arrays, so these bytes are valid at
//! any device address; the regular allocator's table of super block pointers is built
//! again on load, never copied.

use gpuhash_core::hash::Universal32;
use gpuhash_core::image::{ImageHeader, TableImage};
use gpuhash_core::last_copy::DuplicateKeys;
use gpuhash_core::{Device, DeviceBuffer};
use gpuhash_slab_alloc::{Exhaustion, SlabAlloc};

use crate::Result;
use crate::layouts::GH_RESERVED_BUCKETS;
use crate::options::invalid;
use crate::shape::Shape;
use crate::table::{SlabTable, Slabs};

/// The layout version of slab hash images; a table refuses images of another.
pub const IMAGE_LAYOUT_VERSION: u32 = 1;

/// Sections before the allocator's.
const OPTIONS_SECTION: usize = 0;
const HEADS_SECTION: usize = 1;
const ALLOC_SECTIONS: usize = 2;

/// The header of an image of a table of `shape`.
fn header_of(shape: Shape) -> ImageHeader {
    ImageHeader {
        table: shape.kind.image_name().into(),
        key_bytes: 4 * shape.key_words,
        value_bytes: 4 * shape.value_words,
        layout_version: IMAGE_LAYOUT_VERSION,
    }
}

impl SlabTable {
    /// The table's image, once every kernel queued before the call has run; batches
    /// queued meanwhile wait for it.
    pub(crate) fn to_image(&self) -> Result<TableImage> {
        let stream = self.device.lend_stream()?;
        let mut image = TableImage::new(header_of(self.shape));
        {
            let slabs = self.slabs.write();
            self.device.synchronize()?;
            let hash = self.hash.layout();
            let last_copy = u64::from(self.duplicate_keys == DuplicateKeys::LastCopy);
            let options = [hash.a.into(), hash.b.into(), hash.buckets.into(), last_copy];
            image.push_section(options.iter().flat_map(|w: &u64| w.to_le_bytes()).collect());
            let heads = slabs.heads.to_host(&stream)?;
            image.push_section(heads.iter().flat_map(|w| w.to_le_bytes()).collect());
            for section in slabs.alloc.to_sections(&stream)? {
                image.push_section(section);
            }
        }
        self.check_lost(&stream)?;
        Ok(image)
    }

    /// The table an image of a table of `shape` holds, on `device`.
    pub(crate) fn from_image(device: &Device, shape: Shape, image: &TableImage) -> Result<Self> {
        image.expect(&header_of(shape))?;
        let (hash, duplicate_keys) = read_options(&image.section_as::<u64>(OPTIONS_SECTION)?)?;
        let heads = image.section_as::<u32>(HEADS_SECTION)?;
        let head_words = (u64::from(hash.layout().buckets) + u64::from(GH_RESERVED_BUCKETS)) * 32;
        if heads.len() as u64 != head_words {
            return Err(invalid(
                "table image: the head slabs disagree with the bucket count",
            ));
        }
        let stream = device.lend_stream()?;
        let sections = image.sections().get(ALLOC_SECTIONS..).unwrap_or_default();
        let alloc = SlabAlloc::from_sections(&stream, sections)?;
        let slabs = Slabs {
            heads: DeviceBuffer::from_host(&stream, &heads)?,
            lost: Exhaustion::new(&stream)?,
            alloc,
        };
        let in_use = slabs.alloc.slabs_in_use(&stream)?;
        Ok(SlabTable::assemble(
            device,
            shape,
            hash,
            duplicate_keys,
            slabs,
            in_use,
            u64::MAX, // not counted: the first inserts read whole slabs
        ))
    }
}

/// The bucket hash and the duplicate rule of an options section.
fn read_options(words: &[u64]) -> Result<(Universal32, DuplicateKeys)> {
    let &[a, b, buckets, last_copy] = words else {
        return Err(invalid("table image: an options section of another size"));
    };
    let word =
        |w: u64| u32::try_from(w).map_err(|_| invalid("table image: a hash word past 32 bits"));
    let hash = Universal32::new(word(a)?, word(b)?, word(buckets)?)?;
    let duplicate_keys = match last_copy {
        0 => DuplicateKeys::AnyCopy,
        1 => DuplicateKeys::LastCopy,
        _ => return Err(invalid("table image: an unknown duplicate-key rule")),
    };
    Ok((hash, duplicate_keys))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Kind;

    #[test]
    fn options_sections_are_checked() {
        let hash = Universal32::from_seed(7, 100).unwrap().layout();
        let words = [u64::from(hash.a), u64::from(hash.b), 100, 1];
        let (read, duplicates) = read_options(&words).unwrap();
        assert_eq!(read.layout(), hash);
        assert_eq!(duplicates, DuplicateKeys::LastCopy);
        assert!(read_options(&words[..3]).is_err());
        assert!(read_options(&[words[0], words[1], 0, 0]).is_err());
        assert!(read_options(&[words[0], words[1], 100, 2]).is_err());
        assert!(read_options(&[1 << 40, words[1], 100, 0]).is_err());
    }

    #[test]
    fn headers_name_the_kind_and_widths() {
        let map = header_of(Shape::of::<u64, u32>(Kind::Map));
        assert_eq!(
            (map.table.as_str(), map.key_bytes, map.value_bytes),
            ("gpuhash-slab-hash/map", 8, 4)
        );
        let set = header_of(Shape::of::<u32, u64>(Kind::Set));
        assert_eq!((set.key_bytes, set.value_bytes), (4, 0));
        assert_ne!(
            header_of(Shape::of::<u32, u32>(Kind::MultiMap)),
            header_of(Shape::of::<u32, u32>(Kind::Map))
        );
    }
}
