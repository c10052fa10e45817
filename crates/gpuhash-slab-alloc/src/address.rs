//! The 32-bit slab addresses of the SlabHash paper, decoded on the host exactly as the kernels do.
//!
//! Regular: super block in bits 31..24, memory block in 23..10, slab in 9..0, so 255 super
//! blocks of up to 2^14 memory blocks of 1024 slabs of 128 bytes: up to 510 GiB. Light: the
//! slab's index in one contiguous array. In both, all ones means "no slab".

use crate::layouts::{
    GH_INVALID_SLAB, GH_SLAB_BLOCK_BITS, GH_SLAB_SUPER_BLOCK_SHIFT, GH_SLAB_UNIT_BITS,
    GH_SLABS_PER_BLOCK,
};

/// The address that names no slab: what an allocation that found none returns.
pub const INVALID_SLAB: u32 = GH_INVALID_SLAB;

/// A regular address split into its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabAddress {
    /// Index of the super block.
    pub super_block: u32,
    /// Index of the memory block within its super block.
    pub memory_block: u32,
    /// Index of the slab within its memory block.
    pub slab: u32,
}

impl SlabAddress {
    /// Packs the fields; None if one is out of its range or the result is [`INVALID_SLAB`].
    pub fn encode(self) -> Option<u32> {
        let fits = self.super_block < (1 << (32 - GH_SLAB_SUPER_BLOCK_SHIFT))
            && self.memory_block < (1 << GH_SLAB_BLOCK_BITS)
            && self.slab < GH_SLABS_PER_BLOCK;
        let word = (self.super_block << GH_SLAB_SUPER_BLOCK_SHIFT)
            | (self.memory_block << GH_SLAB_UNIT_BITS)
            | self.slab;
        (fits && word != INVALID_SLAB).then_some(word)
    }

    /// Splits a regular address; None for [`INVALID_SLAB`].
    pub fn decode(word: u32) -> Option<Self> {
        (word != INVALID_SLAB).then_some(Self {
            super_block: word >> GH_SLAB_SUPER_BLOCK_SHIFT,
            memory_block: (word >> GH_SLAB_UNIT_BITS) & ((1 << GH_SLAB_BLOCK_BITS) - 1),
            slab: word & (GH_SLABS_PER_BLOCK - 1),
        })
    }

    /// The slab's index within its super block: its offset there in slabs.
    pub fn index_in_super_block(self) -> u64 {
        u64::from(self.memory_block) * u64::from(GH_SLABS_PER_BLOCK) + u64::from(self.slab)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    #[test]
    fn fields_land_where_the_paper_puts_them() {
        let address = SlabAddress {
            super_block: 3,
            memory_block: 5,
            slab: 7,
        };
        assert_eq!(address.encode(), Some((3 << 24) | (5 << 10) | 7));
        assert_eq!(address.index_in_super_block(), 5 * 1024 + 7);
        assert_eq!(SlabAddress::decode(INVALID_SLAB), None);
        let largest = SlabAddress {
            super_block: 254,
            memory_block: 16383,
            slab: 1023,
        };
        assert_eq!(largest.encode(), Some(0xfeff_ffff));
    }

    #[test]
    fn out_of_range_fields_and_the_invalid_word_do_not_encode() {
        assert_eq!(
            SlabAddress {
                super_block: 256,
                memory_block: 0,
                slab: 0
            }
            .encode(),
            None
        );
        assert_eq!(
            SlabAddress {
                super_block: 0,
                memory_block: 16384,
                slab: 0
            }
            .encode(),
            None
        );
        assert_eq!(
            SlabAddress {
                super_block: 0,
                memory_block: 0,
                slab: 1024
            }
            .encode(),
            None
        );
        assert_eq!(
            SlabAddress {
                super_block: 255,
                memory_block: 16383,
                slab: 1023
            }
            .encode(),
            None
        );
    }

    quickcheck! {
        fn decode_inverts_encode(word: u32) -> bool {
            match SlabAddress::decode(word) {
                Some(address) => address.encode() == Some(word),
                None => word == INVALID_SLAB,
            }
        }
    }
}
