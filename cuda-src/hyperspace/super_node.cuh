// Super nodes (the GHSH paper, section 3.1): p + 2 nodes of 128 bytes, slot s of each
// holding one field of the same tuple. A super node past a bucket's head is one run of
// p + 2 consecutive slabs of SlabAlloc, claimed with one atomicOr on a bitmap word, so
// that node c lies c slabs after the key node and one address names the whole super node.
//
// Every function here is called by all 32 lanes of a warp together.
#pragma once

#include "hyperspace/space.cuh"

namespace gh::hs {

// A warp's allocator of super nodes: SlabAlloc's resident-block scheme, claiming aligned
// runs of `width` slabs (bits k * width .. k * width + width - 1 of one bitmap word, so a
// run never crosses a word, hence never a memory block). The space's allocator serves
// super nodes only, so every set bit belongs to a whole run.
class SuperNodeAllocator {
  public:
    __device__ SuperNodeAllocator(const GhSlabAllocContext &alloc, uint32_t width)
        : alloc_(alloc),
          width_(width),
          run_mask_((1u << width) - 1u),
          warp_((blockIdx.x * blockDim.x + threadIdx.x) / 32u) {}

    // The address of a fresh run's first slab (its other slabs follow it), the same in
    // every lane; GH_INVALID_SLAB, with the exhausted flag raised, after
    // GH_MAX_RESIDENT_MOVES full blocks in a row.
    __device__ uint32_t allocate() {
        if (words_ == nullptr) {
            move_resident();
        }
        uint32_t full_blocks = 0;
        while (true) {
            const uint32_t run = free_run(bitmap_);
            const uint32_t lanes_with_room = __ballot_sync(kFullWarp, run < 32u);
            if (lanes_with_room == 0) {
                if (++full_blocks > GH_MAX_RESIDENT_MOVES) {
                    if (lane_id() == 0) {
                        atomicExch(alloc_.exhausted, 1u);
                    }
                    return GH_INVALID_SLAB;
                }
                move_resident();
                continue;
            }
            const uint32_t start = warp_ % 32u;
            const uint32_t rotated = __funnelshift_r(lanes_with_room, lanes_with_room, start);
            const uint32_t owner = (__ffs(rotated) - 1 + start) % 32u;
            uint32_t address = GH_INVALID_SLAB;
            if (lane_id() == owner) {
                const uint32_t claim = run_mask_ << run;
                const uint32_t before = atomicOr(words_ + owner, claim);
                if ((before & claim) == 0) {
                    address = base_ + owner * 32u + run;
                    bitmap_ = before | claim;
                } else {
                    // Another warp took part of the run: give back the bits this claim
                    // set (they were clear before it, so they are this warp's alone).
                    const uint32_t mine = claim & ~before;
                    bitmap_ = atomicAnd(words_ + owner, ~mine) & ~mine;
                }
            }
            address = __shfl_sync(kFullWarp, address, owner);
            if (address != GH_INVALID_SLAB) {
                return address;
            }
        }
    }

  private:
    // The first bit of a free aligned run in `bitmap`, or 32 when none.
    __device__ uint32_t free_run(uint32_t bitmap) const {
        for (uint32_t bit = 0; bit + width_ <= 32u; bit += width_) {
            if (((bitmap >> bit) & run_mask_) == 0) {
                return bit;
            }
        }
        return 32u;
    }

    __device__ void move_resident() {
        ++moves_;
        const uint32_t block =
            gh_fmix32(warp_ * 0x9e3779b9u ^ gh_fmix32(moves_ + alloc_.seed)) % alloc_.total_blocks;
        if (alloc_.variant == GH_SLAB_ALLOC_LIGHT) {
            words_ = alloc_.light_bitmaps + (uint64_t)block * GH_BITMAP_WORDS;
            base_ = block * GH_SLABS_PER_BLOCK;
        } else {
            uint32_t s = 0;
            while (block >= alloc_.super_blocks[s].first_block + alloc_.super_blocks[s].memory_blocks) {
                ++s;
            }
            const uint32_t local = block - alloc_.super_blocks[s].first_block;
            words_ = alloc_.super_blocks[s].bitmaps + (uint64_t)local * GH_BITMAP_WORDS;
            base_ = (s << GH_SLAB_SUPER_BLOCK_SHIFT) | (local * GH_SLABS_PER_BLOCK);
        }
        bitmap_ = __ldcg(words_ + lane_id());
    }

    const GhSlabAllocContext &alloc_;
    uint32_t width_;
    uint32_t run_mask_;
    uint32_t warp_;
    uint32_t moves_ = 0;
    uint32_t *words_ = nullptr;
    uint32_t base_ = 0;
    uint32_t bitmap_ = 0xffffffffu;
};

// Returns the run of `width` slabs at `address` to the allocator. Any thread may call it
// alone.
__device__ __forceinline__ void free_super_node(const GhSlabAllocContext &alloc, uint32_t address, uint32_t width) {
    const uint32_t run = ((1u << width) - 1u) << (address % 32u);
    atomicAnd(gh::bitmap_word(alloc, address), ~run);
}

// Lane c < chains writes `word` into node c of the super node at key_node, lane 31 of it:
// the other chains' links, once the key chain's is published.
__device__ __forceinline__ void link_other_chains(const GhHsSpace &space, uint32_t *key_node, uint32_t next) {
    const uint32_t c = lane_id();
    if (c > 0 && c < chain_count(space)) {
        node(key_node, c)[GH_SLAB_NEXT_LANE] = next + c;
    }
}

// Appends a fresh super node (every word empty) after the tail super node `tail`, unless
// another warp did first: the compare-and-swap on the key node's link decides, the loser
// gives its run back, and the winner then links the other chains. Returns false when the
// allocator had no run (nothing changed).
__device__ __forceinline__ bool extend_bucket(SuperNodeAllocator &allocator, const GhHsSpace &space, uint32_t *tail) {
    const uint32_t address = allocator.allocate();
    if (address == GH_INVALID_SLAB) {
        return false;
    }
    const uint32_t chains = chain_count(space);
    uint32_t *fresh = gh::slab_pointer(space.alloc, address);
    for (uint32_t c = 0; c < chains; ++c) {
        node(fresh, c)[lane_id()] = GH_SLAB_EMPTY_WORD;
    }
    // The empty words must be visible before the super node is reachable.
    __threadfence();
    bool linked = false;
    if (lane_id() == 0) {
        linked = atomicCAS(tail + GH_SLAB_NEXT_LANE, GH_INVALID_SLAB, address) == GH_INVALID_SLAB;
        if (!linked) {
            free_super_node(space.alloc, address, chains);
        }
    }
    if (__shfl_sync(kFullWarp, linked, 0)) {
        link_other_chains(space, tail, address);
    }
    __syncwarp();
    return true;
}

}  // namespace gh::hs
