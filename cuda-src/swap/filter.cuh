// The test of a key against a child's miss filter (a split block Bloom filter): shared by
// the filters' kernels and the partition's count, which must agree on every key.
#pragma once

#include <stdint.h>

#include "gpuhash/hash.cuh"
#include "gpuhash/swap_layouts.h"

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

// Whether the filter of `blocks` blocks may hold `key` (every bit of its block set).
__device__ __forceinline__ bool gh_swap_filter_may_hold(const uint32_t* filter, uint64_t key, uint32_t blocks) {
    const FilterSpot spot = gh_swap_filter_spot(key, blocks);
    const uint4* block = (const uint4*)(filter + spot.block * GH_SWAP_FILTER_BLOCK_WORDS);
    const uint4 lo = block[0], hi = block[1];
    const uint32_t words[GH_SWAP_FILTER_BLOCK_WORDS] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    bool maybe = true;
#pragma unroll
    for (uint32_t w = 0; w < GH_SWAP_FILTER_BLOCK_WORDS; ++w) {
        maybe = maybe && (words[w] & gh_swap_filter_bit(spot.hash, w)) != 0;
    }
    return maybe;
}
