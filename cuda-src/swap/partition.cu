// The partition of a batch by child table: count (with the keys the filters pass), (host
// scan), scatter, and the gather that puts the children's answers back in input order.
#include <stdint.h>

#include "gpuhash/hash.cuh"
#include "gpuhash/swap_layouts.h"
#include "swap/child.cuh"
#include "swap/filter.cuh"

// Per-child counts and cursors live in shared memory while a block works (for up to this
// many children; with more, every key adds to global memory): 16 children and a batch
// of millions made every key's global atomic wait on a few contended words.
constexpr uint32_t kSharedChildren = 1024;
// Keys a thread ranks in one tile of the scatter: a tile's global atomics (one a child
// it holds) are spread over this many keys a thread.
constexpr uint32_t kScatterPerThread = 8;

extern "C" __global__ void gh_swap_count(GhSwapCountParams p) {
    __shared__ uint32_t block_counts[kSharedChildren];
    __shared__ uint32_t block_passed[kSharedChildren];
    __shared__ uint32_t block_ruled_out[kSharedChildren];
    const bool in_block = p.children <= kSharedChildren;
    if (in_block) {
        for (uint32_t c = threadIdx.x; c < p.children; c += blockDim.x) {
            block_counts[c] = 0;
            block_passed[c] = 0;
            block_ruled_out[c] = 0;
        }
    }
    __syncthreads();
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t key = gh_swap_key(p.keys, i, p.key_words);
        const uint32_t child = gh_swap_child(key, p.children, p.seed);
        if (p.in_pass != nullptr && p.in_pass[child] == 0) {
            if (p.child_of != nullptr) p.child_of[i] = GH_SWAP_NO_CHILD;
            continue;
        }
        const uint32_t* filter = p.filters == nullptr ? nullptr : (const uint32_t*)p.filters[child];
        const bool passed = filter != nullptr && gh_swap_filter_may_hold(filter, key, p.blocks);
        // A key its filter rules out is a miss already: the segment need not move it,
        // which leaves room for a longer segment.
        if (filter != nullptr && !passed) {
            if (p.child_of != nullptr) p.child_of[i] = GH_SWAP_NO_CHILD;
            if (p.ruled_out != nullptr) atomicAdd(in_block ? &block_ruled_out[child] : &p.ruled_out[child], 1u);
            continue;
        }
        if (p.child_of != nullptr) p.child_of[i] = child;
        atomicAdd(in_block ? &block_counts[child] : &p.counts[child], 1u);
        if (passed) atomicAdd(in_block ? &block_passed[child] : &p.passed[child], 1u);
    }
    if (!in_block) return;
    __syncthreads();
    for (uint32_t c = threadIdx.x; c < p.children; c += blockDim.x) {
        if (block_counts[c] != 0) atomicAdd(&p.counts[c], block_counts[c]);
        if (block_passed[c] != 0) atomicAdd(&p.passed[c], block_passed[c]);
        if (block_ruled_out[c] != 0 && p.ruled_out != nullptr) atomicAdd(&p.ruled_out[c], block_ruled_out[c]);
    }
}

namespace {

__device__ __forceinline__ void scatter_one(const GhSwapScatterParams& p, uint64_t i, uint32_t at) {
    for (uint32_t w = 0; w < p.key_words; ++w) {
        p.out_keys[(uint64_t)at * p.key_words + w] = p.keys[i * p.key_words + w];
    }
    if (p.values != nullptr) {
        for (uint32_t b = 0; b < p.value_bytes; ++b) {
            p.out_values[(uint64_t)at * p.value_bytes + b] = p.values[i * p.value_bytes + b];
        }
    }
    p.out_index[at] = (uint32_t)i;
}

}  // namespace

// A block ranks a tile of keys by child in shared memory, then takes each child's places
// for the whole tile with one global atomic.
extern "C" __global__ void gh_swap_scatter(GhSwapScatterParams p) {
    if (p.children > kSharedChildren) {
        const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
            const uint32_t child = p.child_of[i];
            if (child != GH_SWAP_NO_CHILD) scatter_one(p, i, atomicAdd(&p.cursors[child], 1u));
        }
        return;
    }
    __shared__ uint32_t tile_counts[kSharedChildren];
    __shared__ uint32_t tile_base[kSharedChildren];
    for (uint32_t c = threadIdx.x; c < p.children; c += blockDim.x) tile_counts[c] = 0;
    __syncthreads();
    const uint64_t tile = (uint64_t)blockDim.x * kScatterPerThread;
    for (uint64_t first = blockIdx.x * tile; first < p.count; first += gridDim.x * tile) {
        uint32_t child[kScatterPerThread];
        uint32_t rank[kScatterPerThread];
#pragma unroll
        for (uint32_t j = 0; j < kScatterPerThread; ++j) {
            const uint64_t i = first + (uint64_t)j * blockDim.x + threadIdx.x;
            child[j] = i < p.count ? p.child_of[i] : GH_SWAP_NO_CHILD;
            if (child[j] != GH_SWAP_NO_CHILD) rank[j] = atomicAdd(&tile_counts[child[j]], 1u);
        }
        __syncthreads();
        for (uint32_t c = threadIdx.x; c < p.children; c += blockDim.x) {
            const uint32_t n = tile_counts[c];
            tile_base[c] = n == 0 ? 0u : atomicAdd(&p.cursors[c], n);
            tile_counts[c] = 0;
        }
        __syncthreads();
#pragma unroll
        for (uint32_t j = 0; j < kScatterPerThread; ++j) {
            const uint64_t i = first + (uint64_t)j * blockDim.x + threadIdx.x;
            if (child[j] != GH_SWAP_NO_CHILD) scatter_one(p, i, tile_base[child[j]] + rank[j]);
        }
        // tile_base is rewritten by the next tile.
        __syncthreads();
    }
}

extern "C" __global__ void gh_swap_gather(GhSwapGatherParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        if (p.found != nullptr && p.found[i] == 0) {
            continue;
        }
        const uint64_t to = (uint64_t)p.index[i] * p.element_bytes;
        for (uint32_t b = 0; b < p.element_bytes; ++b) {
            p.target[to + b] = p.source[i * p.element_bytes + b];
        }
    }
}

extern "C" __global__ void gh_swap_places(GhSwapPlacesParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        // 32-bit places: a batch of more elements than a u32 counts is never partitioned.
        const uint64_t picked = p.picked == nullptr ? i : p.picked[i];
        p.target[i] = (uint32_t)(p.offset + (p.index == nullptr ? picked : p.index[picked]));
    }
}
