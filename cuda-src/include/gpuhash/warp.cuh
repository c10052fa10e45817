// Warp-wide building blocks that every crate's kernels share.
#pragma once

#include <stdint.h>

namespace gh {

constexpr uint32_t kFullWarp = 0xffffffffu;

__device__ __forceinline__ uint32_t lane_id() { return threadIdx.x & 31u; }

// Consecutive places in a list whose length is *counter, for the lanes of `group`
// (not empty), taken with one atomic by the group's lowest lane: each lane of the
// group gets the place of its rank in the group, in lane order. Every lane of the warp
// calls it, each with its own group and counter (a ballot's mask, the same in every
// lane, or the peers of a match); a lane outside its group gets a value to ignore.
template <typename T>
__device__ __forceinline__ T group_reserve(T *counter, uint32_t group) {
    const uint32_t lane = lane_id(), leader = __ffs(group) - 1u;
    T base = 0;
    if (lane == leader) base = atomicAdd(counter, (T)__popc(group));
    base = __shfl_sync(kFullWarp, base, (int)leader);
    return base + (T)__popc(group & ((1u << lane) - 1u));
}

}  // namespace gh
