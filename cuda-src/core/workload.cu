// The standard workload of DESIGN.md, generated on the device so that a
// benchmark of 2^26 pairs spends no time on host-to-device copies.
#include "gpuhash/hash.cuh"

namespace {

constexpr uint32_t kPerThread = 4;

__device__ __forceinline__ void write_scalar(const GhWorkloadParams &p, uint64_t i) {
    uint32_t index = p.first_index + (uint32_t)i;
    p.keys[i] = gh_fmix32(index + p.index_offset);
    if (p.values != nullptr) {
        p.values[i] = index + 1;
    }
}

}  // namespace

// Each thread writes four consecutive pairs with 16-byte stores: the kernel is
// bound by write bandwidth, and wide stores halve the store instructions.
// Buffers come from whole device allocations, so they are 256-byte aligned.
extern "C" __global__ void gh_generate_workload(GhWorkloadParams p) {
    uint64_t groups = p.count / kPerThread;
    uint64_t thread = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t g = thread; g < groups; g += stride) {
        uint32_t index = p.first_index + (uint32_t)(g * kPerThread);
        uint4 keys;
        keys.x = gh_fmix32(index + p.index_offset);
        keys.y = gh_fmix32(index + 1 + p.index_offset);
        keys.z = gh_fmix32(index + 2 + p.index_offset);
        keys.w = gh_fmix32(index + 3 + p.index_offset);
        reinterpret_cast<uint4 *>(p.keys)[g] = keys;
        if (p.values != nullptr) {
            reinterpret_cast<uint4 *>(p.values)[g] = make_uint4(index + 1, index + 2, index + 3, index + 4);
        }
    }
    // The last count % 4 pairs, one a thread, by the first threads of the grid.
    uint64_t tail = groups * kPerThread + thread;
    if (tail < p.count) {
        write_scalar(p, tail);
    }
}
