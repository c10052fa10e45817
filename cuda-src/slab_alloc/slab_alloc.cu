// Bulk allocation, deallocation and accounting kernels of SlabAlloc, and the device-malloc
// baseline its benchmark compares against.
#include "slab_alloc/slab_alloc.cuh"

// One slab for each element that asks for one. Lanes that ask form the warp's queue; the
// warp serves one request per allocate() call, as slab-list inserts do, or, with
// p.claim_runs, as many as one bitmap word can give per call. Loop bounds are warp-uniform
// so that all 32 lanes always reach the allocator together.
extern "C" __global__ void gh_slab_allocate(GhAllocateParams p) {
    gh::WarpAllocator allocator(p.alloc);
    bool exhausted = false;
    uint32_t lanes_below = (1u << gh::lane_id()) - 1u;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < p.count; base += stride) {
        uint64_t i = base + gh::lane_id();
        bool waiting = i < p.count && (p.overwrite || p.addresses[i] == GH_INVALID_SLAB);
        while (!exhausted) {
            uint32_t queue = __ballot_sync(gh::kFullWarp, waiting);
            if (queue == 0) {
                break;
            }
            gh::SlabRun run =
                p.claim_runs ? allocator.allocate_run<true>(__popc(queue)) : allocator.allocate_run<false>(1);
            exhausted = run.slabs == 0;
            uint32_t rank = __popc(queue & lanes_below);
            if (waiting && rank < (uint32_t)__popc(run.slabs)) {
                uint32_t address = run.first + gh::nth_set_bit(run.slabs, rank);
                p.addresses[i] = address;
                if (p.pointers != nullptr) {
                    p.pointers[i] = (uint64_t)gh::slab_pointer(p.alloc, address);
                }
                waiting = false;
            }
        }
        // Once this warp found the allocator full, what it has not served stays invalid.
        if (waiting) {
            p.addresses[i] = GH_INVALID_SLAB;
        }
    }
}

extern "C" __global__ void gh_slab_deallocate(GhDeallocateParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        uint32_t address = p.addresses[i];
        if (address == GH_INVALID_SLAB) {
            continue;
        }
        if (!gh::address_in_range(p.alloc, address) || !gh::deallocate(p.alloc, address)) {
            atomicAdd(p.rejected, 1ull);
        }
    }
}

extern "C" __global__ void gh_popcount_words(GhPopcountParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long bits = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        bits += __popc(p.words[i]);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        bits += __shfl_down_sync(gh::kFullWarp, bits, offset);
    }
    if (gh::lane_id() == 0 && bits != 0) {
        atomicAdd(p.total, bits);
    }
}

extern "C" __global__ void gh_device_malloc(GhDeviceMallocParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.pointers[i] = (uint64_t)malloc(GH_SLAB_BYTES);
    }
}

extern "C" __global__ void gh_device_free(GhDeviceMallocParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        free((void *)p.pointers[i]);
    }
}
