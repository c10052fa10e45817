// Compact answers: the hits of a lookup batch (query index and value) laid end to end, or
// only their count, so that a join ships back what matched and nothing else.
#include <stdint.h>

#include "gpuhash/core_layouts.h"
#include "gpuhash/warp.cuh"

// One atomic a warp: the warp's hits take consecutive places from the running total.
extern "C" __global__ void gh_hits(GhHitsParams p) {
    const uint32_t lane = threadIdx.x & 31u;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    // Warp-uniform bounds, so every lane reaches the ballot.
    for (uint64_t warp_base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; warp_base < p.count;
         warp_base += stride) {
        const uint64_t i = warp_base + lane;
        const bool hit = i < p.count && p.found[i] != 0;
        const uint32_t hits = __ballot_sync(gh::kFullWarp, hit);
        if (hits == 0) {
            continue;
        }
        const uint64_t at = gh::group_reserve(p.hits, hits);
        if (!hit || p.hit_index == nullptr) {
            continue;
        }
        if (at >= p.capacity) {
            continue;  // the host sized the outputs for every query: never taken
        }
        p.hit_index[at] = (uint32_t)(p.base + i);
        for (uint32_t w = 0; w < p.value_words; ++w) {
            p.hit_values[at * p.value_words + w] = p.values[i * p.value_words + w];
        }
    }
}
