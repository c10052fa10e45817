// The partition of a batch by child table: count (with the keys the filters pass), (host
// scan), scatter, and the gather that puts the children's answers back in input order.
#include <stdint.h>

#include "gpuhash/hash.cuh"
#include "gpuhash/swap_layouts.h"
#include "swap/child.cuh"
#include "swap/filter.cuh"

extern "C" __global__ void gh_swap_count(GhSwapCountParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t key = gh_swap_key(p.keys, i, p.key_words);
        const uint32_t child = gh_swap_child(key, p.children);
        p.child_of[i] = child;
        atomicAdd(&p.counts[child], 1u);
        if (p.filters == nullptr) continue;
        const uint32_t* filter = (const uint32_t*)p.filters[child];
        if (filter != nullptr && gh_swap_filter_may_hold(filter, key, p.blocks)) {
            atomicAdd(&p.passed[child], 1u);
        }
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
