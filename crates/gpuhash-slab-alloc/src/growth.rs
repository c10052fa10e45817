//! How SlabAlloc grows: pure functions, tested on the CPU.
//!
//! The allocator starts with what the caller asks for, not with most of the GPU (the flaw
//! the DyHash paper finds in the original SlabHash), and each growth doubles the slabs reserved:
//! regular allocators add a super block as large as all earlier ones together (capped at
//! 2^14 memory blocks, 2 GiB), light allocators move to an array twice as large. Doubling
//! keeps the number of growths logarithmic and the unused reserve below half.

use crate::layouts::{
    GH_MAX_BLOCKS_PER_SUPER_BLOCK, GH_MAX_LIGHT_BLOCKS, GH_MAX_SUPER_BLOCKS, GH_SLABS_PER_BLOCK,
};

/// Memory blocks (of 1024 slabs) needed to hold `slabs` slabs: at least one.
pub fn blocks_for(slabs: u64) -> u64 {
    slabs.div_ceil(u64::from(GH_SLABS_PER_BLOCK)).max(1)
}

/// Sizes of the first super blocks of a regular allocator asked to start with `blocks`
/// memory blocks: as many full super blocks as needed, the last holding the rest. None if
/// that passes the address space.
pub fn initial_super_blocks(blocks: u64) -> Option<Vec<u32>> {
    let full = u64::from(GH_MAX_BLOCKS_PER_SUPER_BLOCK);
    let count = blocks.div_ceil(full);
    if count > u64::from(GH_MAX_SUPER_BLOCKS) {
        return None;
    }
    Some(
        (0..count)
            .map(|i| (blocks - i * full).min(full) as u32)
            .collect(),
    )
}

/// Memory blocks of the super block a regular allocator adds when it holds `super_blocks`
/// super blocks of `total_blocks` memory blocks in all; None when no super block is left.
pub fn next_super_block(super_blocks: usize, total_blocks: u64) -> Option<u32> {
    if super_blocks >= GH_MAX_SUPER_BLOCKS as usize {
        return None;
    }
    Some(total_blocks.clamp(1, u64::from(GH_MAX_BLOCKS_PER_SUPER_BLOCK)) as u32)
}

/// Memory blocks of the array a light allocator of `blocks` blocks moves to; None at the
/// limit of the light address space.
pub fn next_light_blocks(blocks: u64) -> Option<u32> {
    (blocks < u64::from(GH_MAX_LIGHT_BLOCKS))
        .then(|| (blocks * 2).clamp(1, u64::from(GH_MAX_LIGHT_BLOCKS)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_up_and_never_vanish() {
        assert_eq!(blocks_for(0), 1);
        assert_eq!(blocks_for(1), 1);
        assert_eq!(blocks_for(1024), 1);
        assert_eq!(blocks_for(1025), 2);
    }

    #[test]
    fn large_starts_split_into_full_super_blocks() {
        assert_eq!(initial_super_blocks(10), Some(vec![10]));
        assert_eq!(
            initial_super_blocks(16384 * 2 + 5),
            Some(vec![16384, 16384, 5])
        );
        assert_eq!(initial_super_blocks(16384 * 255), Some(vec![16384; 255]));
        assert_eq!(initial_super_blocks(16384 * 255 + 1), None);
    }

    #[test]
    fn regular_growth_doubles_until_the_cap_then_stops_at_255() {
        assert_eq!(next_super_block(1, 4), Some(4));
        assert_eq!(next_super_block(2, 8), Some(8));
        assert_eq!(next_super_block(20, 1 << 20), Some(16384));
        assert_eq!(next_super_block(255, 1 << 20), None);
    }

    #[test]
    fn light_growth_doubles_up_to_the_address_space() {
        assert_eq!(next_light_blocks(1), Some(2));
        assert_eq!(next_light_blocks(3_000_000), Some(GH_MAX_LIGHT_BLOCKS));
        assert_eq!(next_light_blocks(u64::from(GH_MAX_LIGHT_BLOCKS)), None);
    }

    #[test]
    fn light_addresses_never_reach_the_invalid_word() {
        let last_slab = u64::from(GH_MAX_LIGHT_BLOCKS) * u64::from(GH_SLABS_PER_BLOCK) - 1;
        assert!(last_slab < u64::from(crate::INVALID_SLAB));
    }
}
