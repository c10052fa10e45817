// The miss filters of the children on the host: building one from a child's keys (the
// partition's count kernel checks batches against them, partition.cu).
#include <stdint.h>

#include "gpuhash/swap_layouts.h"
#include "swap/child.cuh"
#include "swap/filter.cuh"

extern "C" __global__ void gh_swap_filter_add(GhSwapFilterAddParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const FilterSpot spot = gh_swap_filter_spot(gh_swap_key(p.keys, i, p.key_words), p.blocks);
        uint32_t* block = p.filter + spot.block * GH_SWAP_FILTER_BLOCK_WORDS;
        for (uint32_t w = 0; w < GH_SWAP_FILTER_BLOCK_WORDS; ++w) {
            const uint32_t bit = gh_swap_filter_bit(spot.hash, w);
            // Most bits are set already once a filter fills: read before the atomic.
            if ((block[w] & bit) == 0) atomicOr(block + w, bit);
        }
    }
}

