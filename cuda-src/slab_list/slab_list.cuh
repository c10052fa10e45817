// Slab lists (the SlabHash paper, section IV): chains of 128-byte slabs that one warp reads together,
// one 4-byte word a lane, with the next slab's address in lane 31 and new slabs from
// SlabAlloc. These are the building blocks every chain of slabs shares: the slab hash
// builds its buckets on them, and cuda-src/slab_list/slab_list.cu serves plain lists of
// 32-bit words with them.
//
// Every function here is called by all 32 lanes of a warp together (they shuffle and
// ballot over the full warp), unless its comment says otherwise.
#pragma once

#include "gpuhash/slab_list_layouts.h"
#include "slab_alloc/slab_alloc.cuh"

namespace gh {

// Head slab of list `list` of heads stored one after another. Any thread may call it.
__device__ __forceinline__ uint32_t *list_head(uint32_t *heads, uint32_t list) {
    return heads + (uint64_t)list * GH_SLAB_WORDS;
}

// Reads one slab, one word a lane. From L2: slabs change under atomics of other warps,
// and a retry after a failed compare-and-swap must see the new words.
__device__ __forceinline__ uint32_t read_slab(const uint32_t *slab) { return __ldcg(slab + lane_id()); }

// The address in lane 31 of a slab the warp read: the next slab, or GH_INVALID_SLAB.
__device__ __forceinline__ uint32_t next_address(uint32_t word) {
    return __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
}

// The slab after the one the warp read, or null at the tail.
__device__ __forceinline__ uint32_t *follow(const GhSlabAllocContext &alloc, uint32_t word) {
    uint32_t next = next_address(word);
    return next == GH_INVALID_SLAB ? nullptr : slab_pointer(alloc, next);
}

// Walks the list from `head` to its tail: visit(slab, word) with each slab and this
// lane's word of it, read once.
template <typename Visit>
__device__ __forceinline__ void traverse(const GhSlabAllocContext &alloc, uint32_t *head, Visit visit) {
    for (uint32_t *slab = head; slab != nullptr;) {
        uint32_t word = read_slab(slab);
        visit(slab, word);
        slab = follow(alloc, word);
    }
}

// The lowest lane where `holds` is true, or 32 where it is nowhere.
__device__ __forceinline__ uint32_t find_first(bool holds) {
    uint32_t lanes = __ballot_sync(kFullWarp, holds);
    return lanes == 0 ? 32u : __ffs(lanes) - 1;
}

// Each lane's word joined with the next lane's: at a lane holding a 64-bit key or value,
// the whole of it.
template <uint32_t kWords>
__device__ __forceinline__ uint64_t join_words(uint32_t word) {
    if constexpr (kWords == 1) {
        return word;
    } else {
        return ((uint64_t)__shfl_down_sync(kFullWarp, word, 1) << 32) | word;
    }
}

// `value` of lane `src` in every lane, moving only the words the width has.
template <uint32_t kWords>
__device__ __forceinline__ uint64_t broadcast(uint64_t value, uint32_t src) {
    if constexpr (kWords == 1) {
        return __shfl_sync(kFullWarp, (uint32_t)value, src);
    } else {
        return __shfl_sync(kFullWarp, (unsigned long long)value, src);
    }
}

// Appends a fresh slab, all GH_SLAB_EMPTY_WORD, after `slab` unless another warp did
// first: the compare-and-swap on the tail's next address decides, and the loser returns
// its slab. Returns false when the allocator had no slab (nothing changed).
__device__ __forceinline__ bool extend_list(WarpAllocator &allocator, const GhSlabAllocContext &alloc,
                                            uint32_t *slab) {
    uint32_t address = allocator.allocate();
    if (address == GH_INVALID_SLAB) {
        return false;
    }
    uint32_t *fresh = slab_pointer(alloc, address);
    fresh[lane_id()] = GH_SLAB_EMPTY_WORD;
    // The empty words must be visible before the slab is reachable from the list.
    __threadfence();
    if (lane_id() == GH_SLAB_NEXT_LANE) {
        bool linked = atomicCAS(slab + GH_SLAB_NEXT_LANE, GH_INVALID_SLAB, address) == GH_INVALID_SLAB;
        if (!linked) {
            deallocate(alloc, address);
        }
    }
    __syncwarp();
    return true;
}

// Cuts the list after `slab` and returns every slab that followed to the allocator. No
// other warp may use the list meanwhile.
__device__ __forceinline__ void release_after(const GhSlabAllocContext &alloc, uint32_t *slab) {
    uint32_t tail = __ldcg(slab + GH_SLAB_NEXT_LANE);
    __syncwarp();
    if (lane_id() == GH_SLAB_NEXT_LANE) {
        slab[GH_SLAB_NEXT_LANE] = GH_INVALID_SLAB;
    }
    while (tail != GH_INVALID_SLAB) {
        uint32_t after = __ldcg(slab_pointer(alloc, tail) + GH_SLAB_NEXT_LANE);
        if (lane_id() == 0) {
            deallocate(alloc, tail);
        }
        tail = after;
    }
}

// Frees the list from `head`: the slabs after it go back to the allocator and the head
// becomes a fresh slab. No other warp may use the list meanwhile.
__device__ __forceinline__ void free_chain(const GhSlabAllocContext &alloc, uint32_t *head) {
    release_after(alloc, head);
    if (lane_id() != GH_SLAB_NEXT_LANE) {
        head[lane_id()] = GH_SLAB_EMPTY_WORD;
    }
    __syncwarp();
}

}  // namespace gh
