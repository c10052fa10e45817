// The miss filters of the children on the host: building one from a child's keys, and
// checking a partitioned batch against them before anything crosses the bus.
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

extern "C" __global__ void gh_swap_filter_check(GhSwapFilterCheckParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t key = gh_swap_key(p.keys, i, p.key_words);
        const uint32_t child = gh_swap_child(key, p.children, GH_SWAP_SEED);
        const uint32_t* filter = (const uint32_t*)p.filters[child];
        if (filter == nullptr) continue;
        if (!gh_swap_filter_may_hold(filter, key, p.blocks)) continue;
        const uint64_t at = p.starts[child] + atomicAdd(&p.survivors[child], 1u);
        for (uint32_t w = 0; w < p.key_words; ++w) {
            p.out_keys[at * p.key_words + w] = p.keys[i * p.key_words + w];
        }
        p.out_places[at] = (uint32_t)i;
    }
}
