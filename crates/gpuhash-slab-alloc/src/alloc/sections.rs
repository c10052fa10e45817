//! The allocator's state as plain bytes, for table images: what it reserved, which slabs
//! are in use, and the slabs themselves.
//!
//! Slab addresses are 32-bit indices into the allocator's arrays, never device pointers,
//! so a byte copy of the bitmaps and slabs is valid wherever it is loaded. The one thing
//! that holds pointers, the regular variant's super block table, is not copied: it is
//! built again for the new arrays.

use gpuhash_core::{DeviceBuffer, Stream};

use super::{BlockMemory, SlabAlloc, Storage, SuperBlock, upload_table};
use crate::layouts::{
    GH_BITMAP_WORDS, GH_MAX_BLOCKS_PER_SUPER_BLOCK, GH_MAX_LIGHT_BLOCKS, GH_MAX_SUPER_BLOCKS,
    GH_SLAB_WORDS, GH_SLABS_PER_BLOCK,
};
use crate::{Result, Variant};

/// The header section's first word for each variant.
const REGULAR: u32 = 0;
const LIGHT: u32 = 1;

impl SlabAlloc {
    /// The allocator's state as byte sections, once the work queued on `stream` before the
    /// call has run (the caller keeps other streams' kernels off the allocator meanwhile):
    /// a header of u32 words (variant, number of memories, then the memory blocks of each
    /// super block, or of the light array), then each memory's bitmaps and slabs. Waits
    /// for the stream.
    pub fn to_sections(&self, stream: &Stream) -> Result<Vec<Vec<u8>>> {
        let variant = match self.variant {
            Variant::Regular => REGULAR,
            Variant::Light => LIGHT,
        };
        let memories: Vec<&BlockMemory> = self.block_memories().collect();
        let mut header = vec![variant, memories.len() as u32];
        header.extend(memories.iter().map(|m| m.blocks));
        let mut sections = vec![bytes_of(&header)];
        for memory in memories {
            sections.push(bytes_of(&memory.bitmaps.to_host(stream)?));
            sections.push(bytes_of(&memory.slabs.to_host(stream)?));
        }
        Ok(sections)
    }

    /// The allocator that [`SlabAlloc::to_sections`] described, on the stream's device,
    /// with the same slabs at the same addresses. Sections that do not describe an
    /// allocator (sizes that disagree, a variant or block count out of range) are an
    /// [`gpuhash_core::Error::InvalidInput`].
    pub fn from_sections(stream: &Stream, sections: &[Vec<u8>]) -> Result<Self> {
        let header = words_of(sections.first().ok_or_else(|| invalid("no header"))?)?;
        let (variant, blocks) = read_header(&header)?;
        if sections.len() != 1 + 2 * blocks.len() {
            return Err(invalid("the section count disagrees with the header"));
        }
        let mut memories = Vec::with_capacity(blocks.len());
        for (i, &count) in blocks.iter().enumerate() {
            memories.push(memory_from(
                stream,
                count,
                &sections[1 + 2 * i],
                &sections[2 + 2 * i],
            )?);
        }
        let storage = match variant {
            Variant::Light => Storage::Light {
                memory: memories.pop().ok_or_else(|| invalid("no light array"))?,
            },
            Variant::Regular => {
                let mut first_block = 0;
                let super_blocks: Vec<SuperBlock> = memories
                    .into_iter()
                    .map(|memory| {
                        let block = SuperBlock {
                            first_block,
                            memory,
                        };
                        first_block += block.memory.blocks;
                        block
                    })
                    .collect();
                let table = upload_table(stream, &super_blocks)?;
                Storage::Regular {
                    super_blocks,
                    table,
                }
            }
        };
        stream.synchronize()?;
        Ok(Self {
            variant,
            storage,
            launches: Default::default(),
        })
    }
}

/// The variant and the memory blocks of each memory a header names, checked against the
/// limits of the address space.
fn read_header(header: &[u32]) -> Result<(Variant, Vec<u32>)> {
    let [variant, count, blocks @ ..] = header else {
        return Err(invalid("a header of fewer than two words"));
    };
    if blocks.len() != *count as usize || blocks.contains(&0) {
        return Err(invalid("the header's block counts disagree"));
    }
    let variant = match (*variant, blocks.len()) {
        (LIGHT, 1) if blocks[0] <= GH_MAX_LIGHT_BLOCKS => Variant::Light,
        (REGULAR, 1..) if blocks.len() <= GH_MAX_SUPER_BLOCKS as usize => Variant::Regular,
        _ => return Err(invalid("an unknown variant or too many memories")),
    };
    if variant == Variant::Regular && blocks.iter().any(|&b| b > GH_MAX_BLOCKS_PER_SUPER_BLOCK) {
        return Err(invalid(
            "a super block larger than the address space allows",
        ));
    }
    Ok((variant, blocks.to_vec()))
}

/// One memory of `blocks` memory blocks, its bitmaps and slabs copied from the sections.
fn memory_from(stream: &Stream, blocks: u32, bitmaps: &[u8], slabs: &[u8]) -> Result<BlockMemory> {
    let bitmap_words = u64::from(blocks) * u64::from(GH_BITMAP_WORDS);
    let slab_words = u64::from(blocks) * u64::from(GH_SLABS_PER_BLOCK * GH_SLAB_WORDS);
    if bitmaps.len() as u64 != bitmap_words * 4 || slabs.len() as u64 != slab_words * 4 {
        return Err(invalid("a memory's sections disagree with its block count"));
    }
    Ok(BlockMemory {
        bitmaps: DeviceBuffer::from_host(stream, &words_of(bitmaps)?)?,
        slabs: DeviceBuffer::from_host(stream, &words_of(slabs)?)?,
        blocks,
    })
}

fn bytes_of(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Little-endian u32 words of a section.
fn words_of(bytes: &[u8]) -> Result<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(invalid("a section that is not whole words"));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

fn invalid(what: &str) -> crate::SlabAllocError {
    gpuhash_core::Error::InvalidInput(format!("slab allocator sections: {what}")).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked_against_the_address_space() {
        assert_eq!(
            read_header(&[LIGHT, 1, 4]).unwrap(),
            (Variant::Light, vec![4])
        );
        assert_eq!(
            read_header(&[REGULAR, 2, 4, 4]).unwrap(),
            (Variant::Regular, vec![4, 4])
        );
        for bad in [
            &[][..],
            &[LIGHT, 2, 4, 4],
            &[REGULAR, 2, 4],
            &[REGULAR, 1, 0],
            &[REGULAR, 1, GH_MAX_BLOCKS_PER_SUPER_BLOCK + 1],
            &[7, 1, 4],
        ] {
            assert!(read_header(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn words_round_trip_and_ragged_sections_are_refused() {
        let words = [1u32, u32::MAX, 0x1234_5678];
        assert_eq!(words_of(&bytes_of(&words)).unwrap(), words);
        assert!(words_of(&[1, 2, 3]).is_err());
    }
}
