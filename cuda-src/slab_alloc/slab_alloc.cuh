// SlabAlloc on the device (the SlabHash paper, section V): the warp-synchronous allocator of
// 128-byte slabs that slab lists and the hyperspace index include.
//
// A warp keeps one resident memory block of 1024 slabs, its 32-word bitmap spread one word
// a lane in registers. To allocate, the warp ballots for a lane whose word has a clear bit;
// that lane sets the bit with one atomicOr and the warp shares the address by shuffle.
// atomicOr rather than the paper's atomicCAS: another warp taking a different slab of the
// same word no longer makes this one retry, and the returned word refreshes the registers.
#pragma once

#include "gpuhash/hash.cuh"
#include "gpuhash/slab_alloc_layouts.h"
#include "gpuhash/warp.cuh"

namespace gh {

// Position of the n-th (from 0) set bit of mask, which must have more than n set bits.
// Five popcount steps: PTX's fns is emulated on sm_90 by a loop over the bits, which
// doubled the cost of an allocation when it sat on this path.
__device__ __forceinline__ uint32_t nth_set_bit(uint32_t mask, uint32_t n) {
    uint32_t position = 0;
#pragma unroll
    for (uint32_t width = 16; width > 0; width /= 2) {
        uint32_t below = __popc(mask & ((1u << width) - 1u));
        if (n >= below) {
            n -= below;
            mask >>= width;
            position += width;
        }
    }
    return position;
}

__device__ __forceinline__ const GhSuperBlock &super_block_of(const GhSlabAllocContext &alloc, uint32_t address) {
    return alloc.super_blocks[address >> GH_SLAB_SUPER_BLOCK_SHIFT];
}

// Index of the slab inside its super block (regular) or the whole array (light).
__device__ __forceinline__ uint32_t slab_index(const GhSlabAllocContext &alloc, uint32_t address) {
    return alloc.variant == GH_SLAB_ALLOC_LIGHT ? address : address & ((1u << GH_SLAB_SUPER_BLOCK_SHIFT) - 1u);
}

// The slab's 32 words. Light: one multiply-add from a base the kernel holds in registers.
// Regular: one extra read of the super block's base, which stays in L1.
__device__ __forceinline__ uint32_t *slab_pointer(const GhSlabAllocContext &alloc, uint32_t address) {
    uint32_t *base = alloc.variant == GH_SLAB_ALLOC_LIGHT ? alloc.light_slabs : super_block_of(alloc, address).slabs;
    return base + (uint64_t)slab_index(alloc, address) * GH_SLAB_WORDS;
}

// The bitmap word that holds the slab's bit (bit address % 32 of it).
__device__ __forceinline__ uint32_t *bitmap_word(const GhSlabAllocContext &alloc, uint32_t address) {
    uint32_t *bitmaps =
        alloc.variant == GH_SLAB_ALLOC_LIGHT ? alloc.light_bitmaps : super_block_of(alloc, address).bitmaps;
    return bitmaps + slab_index(alloc, address) / 32u;
}

// Whether the address names a slab this allocator reserved (in use or not).
__device__ __forceinline__ bool address_in_range(const GhSlabAllocContext &alloc, uint32_t address) {
    if (address == GH_INVALID_SLAB) {
        return false;
    }
    if (alloc.variant == GH_SLAB_ALLOC_LIGHT) {
        return address / GH_SLABS_PER_BLOCK < alloc.total_blocks;
    }
    uint32_t super_block = address >> GH_SLAB_SUPER_BLOCK_SHIFT;
    return super_block < alloc.super_block_count &&
           slab_index(alloc, address) / GH_SLABS_PER_BLOCK < alloc.super_blocks[super_block].memory_blocks;
}

// Returns the slab to the allocator; false (and no change) if it was not in use. Any
// thread may call it alone.
__device__ __forceinline__ bool deallocate(const GhSlabAllocContext &alloc, uint32_t address) {
    uint32_t mask = 1u << (address % 32u);
    return (atomicAnd(bitmap_word(alloc, address), ~mask) & mask) != 0;
}

// Slabs claimed together: bit b of `slabs` set means slab first + b is now this warp's.
struct SlabRun {
    uint32_t first;
    uint32_t slabs;
};

class WarpAllocator {
  public:
    // Costs nothing until the first allocate(): most warps of a lookup never allocate.
    // Keeps a reference, not a copy, to `alloc`, which must outlive it: the kernel's
    // parameter, read from the constant bank, costs no registers.
    __device__ explicit WarpAllocator(const GhSlabAllocContext &alloc)
        : alloc_(alloc), warp_((blockIdx.x * blockDim.x + threadIdx.x) / 32u) {}

    // Called by all 32 lanes together; every lane gets the same address, or
    // GH_INVALID_SLAB (and the exhausted flag set) when GH_MAX_RESIDENT_MOVES blocks in a
    // row were full.
    __device__ uint32_t allocate() {
        SlabRun run = allocate_run<false>(1);
        return run.slabs == 0 ? GH_INVALID_SLAB : run.first + __ffs(run.slabs) - 1;
    }

    // Like allocate(), but claims up to `wanted` (1 to 32) free slabs of one bitmap word
    // with the same single atomicOr, for a warp that serves several requests at once.
    // Slab k of the run is first + nth_set_bit(slabs, k); an empty run means exhaustion.
    // kRuns false serves one slab (wanted is 1) and keeps the claim to one bit test.
    template <bool kRuns>
    __device__ SlabRun allocate_run(uint32_t wanted) {
        if (words_ == nullptr) {
            move_resident();
        }
        uint32_t full_blocks = 0;
        while (true) {
            uint32_t lanes_with_room = __ballot_sync(kFullWarp, bitmap_ != 0xffffffffu);
            if (lanes_with_room == 0) {
                if (++full_blocks > GH_MAX_RESIDENT_MOVES) {
                    if (lane_id() == 0) {
                        atomicExch(alloc_.exhausted, 1u);
                    }
                    return SlabRun{GH_INVALID_SLAB, 0};
                }
                move_resident();
                continue;
            }
            // Warps sharing a resident block start their search at different lanes, so
            // they claim bits of different words instead of racing for one.
            uint32_t start = warp_ % 32u;
            uint32_t rotated = __funnelshift_r(lanes_with_room, lanes_with_room, start);
            uint32_t owner = (__ffs(rotated) - 1 + start) % 32u;
            SlabRun run{base_ + owner * 32u, 0};
            if (lane_id() == owner) {
                uint32_t free = ~bitmap_;
                uint32_t claim = free & (0u - free);
                if (kRuns && wanted < (uint32_t)__popc(free)) {
                    claim = free & ((2u << nth_set_bit(free, wanted - 1)) - 1u);
                } else if (kRuns) {
                    claim = free;
                }
                uint32_t before = atomicOr(words_ + owner, claim);
                bitmap_ = before | claim;
                run.slabs = claim & ~before;
            }
            run.slabs = __shfl_sync(kFullWarp, run.slabs, owner);
            if (run.slabs != 0) {
                return run;
            }
        }
    }

  private:
    // Picks the next resident block by hashing (warp, moves, seed): warps spread over
    // all blocks, and a warp's successive choices probe different blocks.
    __device__ void move_resident() {
        ++moves_;
        uint32_t block = gh_fmix32(warp_ * 0x9e3779b9u ^ gh_fmix32(moves_ + alloc_.seed)) % alloc_.total_blocks;
        if (alloc_.variant == GH_SLAB_ALLOC_LIGHT) {
            words_ = alloc_.light_bitmaps + (uint64_t)block * GH_BITMAP_WORDS;
            base_ = block * GH_SLABS_PER_BLOCK;
        } else {
            uint32_t s = 0;
            while (block >= alloc_.super_blocks[s].first_block + alloc_.super_blocks[s].memory_blocks) {
                ++s;
            }
            uint32_t local = block - alloc_.super_blocks[s].first_block;
            words_ = alloc_.super_blocks[s].bitmaps + (uint64_t)local * GH_BITMAP_WORDS;
            base_ = (s << GH_SLAB_SUPER_BLOCK_SHIFT) | (local * GH_SLABS_PER_BLOCK);
        }
        // Bypass L1: other warps' atomics change these words in L2.
        bitmap_ = __ldcg(words_ + lane_id());
    }

    const GhSlabAllocContext &alloc_;
    uint32_t warp_;
    uint32_t moves_ = 0;
    uint32_t *words_ = nullptr;
    uint32_t base_ = 0;
    uint32_t bitmap_ = 0xffffffffu;
};

}  // namespace gh
