// A batch key as the swap kernels read it, and the child it lives in: shared by the
// partition of a batch and the miss filters, which must agree on the child.
#pragma once

#include <stdint.h>

#include "gpuhash/hash.cuh"
#include "gpuhash/swap_layouts.h"

// The child the partition's count gives a key whose child a pass leaves out.
#define GH_SWAP_NO_CHILD 0xffffffffu

__device__ __forceinline__ uint64_t gh_swap_key(const uint32_t* keys, uint64_t i, uint32_t key_words) {
    if (key_words == 1) {
        return keys[i];
    }
    return (uint64_t)keys[2 * i] | ((uint64_t)keys[2 * i + 1] << 32);
}

// The high 32 bits of the seeded mix, scaled to [0, children) by a multiply-shift. The
// swap table's children take GH_SWAP_SEED; a layer above that splits batches among tables
// (which may be swap tables) takes a seed of its own, or each of its parts would reach
// only its own share of its children.
__device__ __forceinline__ uint32_t gh_swap_child(uint64_t key, uint32_t children, uint64_t seed) {
    const uint64_t high = gh_fmix64(key ^ seed) >> 32;
    return (uint32_t)((high * children) >> 32);
}
