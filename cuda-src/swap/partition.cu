// The partition of a batch by child table: count, (host scan), scatter, and the gather
// that puts the children's answers back in input order.
#include <stdint.h>

#include "gpuhash/hash.cuh"
#include "gpuhash/swap_layouts.h"

__device__ __forceinline__ uint64_t gh_swap_key(const uint32_t* keys, uint64_t i, uint32_t key_words) {
    if (key_words == 1) {
        return keys[i];
    }
    return (uint64_t)keys[2 * i] | ((uint64_t)keys[2 * i + 1] << 32);
}

// The high 32 bits of the seeded mix, scaled to [0, children) by a multiply-shift.
__device__ __forceinline__ uint32_t gh_swap_child(uint64_t key, uint32_t children) {
    const uint64_t high = gh_fmix64(key ^ GH_SWAP_SEED) >> 32;
    return (uint32_t)((high * children) >> 32);
}

extern "C" __global__ void gh_swap_count(GhSwapCountParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint32_t child = gh_swap_child(gh_swap_key(p.keys, i, p.key_words), p.children);
        p.child_of[i] = child;
        atomicAdd(&p.counts[child], 1u);
    }
}

extern "C" __global__ void gh_swap_scatter(GhSwapScatterParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint32_t at = atomicAdd(&p.cursors[p.child_of[i]], 1u);
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

extern "C" __global__ void gh_swap_copy(GhSwapCopyParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.bytes; i += stride) {
        p.target[i] = p.source[i];
    }
}
