// The miss filters of the children on the host: building one from a child's keys, and
// checking a partitioned batch against them before anything crosses the bus.
#include <stdint.h>

#include "gpuhash/hash.cuh"
#include "gpuhash/swap_layouts.h"
#include "swap/child.cuh"

// The seed of the filters' hash, apart from the child choice's (GH_SWAP_SEED).
constexpr uint64_t kFilterSeed = 0x9e3779b97f4a7c15ull;

// The multipliers that pick a key's bit in each word of its block (odd constants, as in
// the split block Bloom filters of Parquet).
__constant__ uint32_t kSalts[GH_SWAP_FILTER_BLOCK_WORDS] = {0x47b6137bu, 0x44974d91u, 0x8824ad5bu, 0xa2b7289du,
                                                            0x705495c7u, 0x2df1424bu, 0x9efc4947u, 0x5c6bfb31u};

struct FilterSpot {
    uint64_t block;
    uint32_t hash;
};

// The block of a key (a multiply-shift of the high half of its mix) and the 32 bits that
// pick its bits (the low half).
__device__ __forceinline__ FilterSpot gh_swap_filter_spot(uint64_t key, uint32_t blocks) {
    const uint64_t h = gh_fmix64(key ^ kFilterSeed);
    return {((h >> 32) * blocks) >> 32, (uint32_t)h};
}

__device__ __forceinline__ uint32_t gh_swap_filter_bit(uint32_t hash, uint32_t word) {
    return 1u << ((hash * kSalts[word]) >> 27);
}

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
        const uint32_t child = gh_swap_child(key, p.children);
        const uint32_t* filter = (const uint32_t*)p.filters[child];
        if (filter == nullptr) continue;
        const FilterSpot spot = gh_swap_filter_spot(key, p.blocks);
        const uint4* block = (const uint4*)(filter + spot.block * GH_SWAP_FILTER_BLOCK_WORDS);
        const uint4 lo = block[0], hi = block[1];
        const uint32_t words[GH_SWAP_FILTER_BLOCK_WORDS] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        bool maybe = true;
#pragma unroll
        for (uint32_t w = 0; w < GH_SWAP_FILTER_BLOCK_WORDS; ++w) {
            const uint32_t bit = gh_swap_filter_bit(spot.hash, w);
            maybe = maybe && (words[w] & bit) != 0;
        }
        if (!maybe) continue;
        const uint64_t at = p.starts[child] + atomicAdd(&p.survivors[child], 1u);
        for (uint32_t w = 0; w < p.key_words; ++w) {
            p.out_keys[at * p.key_words + w] = p.keys[i * p.key_words + w];
        }
        p.out_places[at] = (uint32_t)i;
    }
}
