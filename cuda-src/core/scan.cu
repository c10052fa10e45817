// Exclusive scan (prefix sum) of counts on the device, for any number of them: tiles of
// GH_SCAN_TILE counts, one block at a time each. The host scans the tiles' sums the same
// way (recursively, until one tile holds them all) and the tiles kernel then adds each
// tile's offset, so only the total ever needs to reach the host.
//
// Each block loops over the tiles, a grid's stride apart: the launch cuts every grid to the
// blocks the device keeps resident (gpuhash_core::launch), so a block a tile with no loop
// would leave the tiles past the resident blocks unwritten.
#include <stdint.h>

#include "gpuhash/core_layouts.h"

namespace {

constexpr uint32_t kWarps = GH_SCAN_THREADS / 32u;
constexpr uint32_t kRounds = GH_SCAN_TILE / GH_SCAN_THREADS;
static_assert(GH_SCAN_TILE % GH_SCAN_THREADS == 0, "a tile is whole rounds of the block");
static_assert(kWarps <= 32, "one warp scans the warps' sums");

template <typename Count>
__device__ __forceinline__ unsigned long long count_at(const GhScanParams &p, uint64_t i) {
    return i < p.count ? (unsigned long long)static_cast<const Count *>(p.counts)[i] : 0ull;
}

// Inclusive scan across a warp's lanes.
__device__ __forceinline__ unsigned long long warp_inclusive(unsigned long long value, uint32_t lane) {
#pragma unroll
    for (uint32_t d = 1; d < 32; d <<= 1) {
        unsigned long long below = __shfl_up_sync(0xffffffffu, value, d);
        if (lane >= d) {
            value += below;
        }
    }
    return value;
}

// Exclusive scan of one value a thread, in thread order, across the block; `total` gets
// the block's sum. Every thread of the block must call it.
__device__ unsigned long long block_exclusive(unsigned long long value, unsigned long long &total) {
    __shared__ unsigned long long warp_sums[kWarps];
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned long long inclusive = warp_inclusive(value, lane);
    __syncthreads();  // the previous call's readers are done with warp_sums
    if (lane == 31u) {
        warp_sums[warp] = inclusive;
    }
    __syncthreads();
    if (warp == 0) {
        unsigned long long sum = warp_inclusive(lane < kWarps ? warp_sums[lane] : 0ull, lane);
        if (lane < kWarps) {
            warp_sums[lane] = sum;
        }
    }
    __syncthreads();
    total = warp_sums[kWarps - 1];
    return (warp == 0 ? 0ull : warp_sums[warp - 1]) + inclusive - value;
}

// Tiles of the scan: one past the last count too, whose thread writes the total.
__device__ __forceinline__ uint64_t tiles_of(const GhScanParams &p) { return p.count / GH_SCAN_TILE + 1; }

// Each tile's counts in rounds of one coalesced count a thread; the running sum carries
// from round to round. The thread at index `count` (in the last tile) writes the total.
template <typename Count>
__device__ void scan_tiles(const GhScanParams &p) {
    const uint64_t tiles = tiles_of(p);
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint64_t first = tile * GH_SCAN_TILE;
        unsigned long long carry = p.tile_offsets != nullptr ? p.tile_offsets[tile] : 0ull;
        for (uint32_t round = 0; round < kRounds; ++round) {
            const uint64_t i = first + (uint64_t)round * GH_SCAN_THREADS + threadIdx.x;
            unsigned long long total = 0;
            const unsigned long long before = block_exclusive(count_at<Count>(p, i), total);
            if (i <= p.count) {
                p.out[i] = carry + before;
            }
            carry += total;
        }
    }
}

template <typename Count>
__device__ void sum_tiles(const GhScanParams &p) {
    const uint64_t tiles = tiles_of(p);
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint64_t first = tile * GH_SCAN_TILE;
        unsigned long long sum = 0;
        for (uint32_t round = 0; round < kRounds; ++round) {
            sum += count_at<Count>(p, first + (uint64_t)round * GH_SCAN_THREADS + threadIdx.x);
        }
        unsigned long long total = 0;
        block_exclusive(sum, total);
        if (threadIdx.x == 0) {
            p.out[tile] = total;
        }
    }
}

}  // namespace

extern "C" __global__ void gh_scan_tiles_u32(GhScanParams p) { scan_tiles<uint32_t>(p); }
extern "C" __global__ void gh_scan_tiles_u64(GhScanParams p) { scan_tiles<uint64_t>(p); }
extern "C" __global__ void gh_scan_tile_sums_u32(GhScanParams p) { sum_tiles<uint32_t>(p); }
extern "C" __global__ void gh_scan_tile_sums_u64(GhScanParams p) { sum_tiles<uint64_t>(p); }
