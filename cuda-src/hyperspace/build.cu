// Bulk build (the GHSH paper, section 4.2.1): tuples sorted by bucket with a counting sort
// (histogram, prefix sum, scatter), then one warp per bucket writes whole super nodes of
// 31 tuples, lane l of every node taking the bucket's tuple 31 k + l. The same counting
// sort orders a search batch's subtasks by bucket.
#include "hyperspace/slots.cuh"

using gh::kFullWarp;
using gh::lane_id;
using namespace gh::hs;

// histogram[keys[i] & mask] += 1; or, with order set, order[cursors[keys[i] & mask]++] = i.
extern "C" __global__ void gh_hs_partition(GhHsPartitionParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint32_t part = p.keys[i] & p.mask;
        if (p.order == nullptr) {
            atomicAdd(p.histogram + part, 1ull);
        } else {
            p.order[atomicAdd(p.cursors + part, 1ull)] = (uint32_t)i;
        }
    }
}

extern "C" __global__ void gh_hs_permute(GhHsPermuteParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.values[i] = p.source[p.order[i]];
    }
}

// One warp per bucket of an empty space: the head super node takes the bucket's first 31
// tuples, each further run of 31 a fresh super node, written whole (empty words in the
// lanes past the last tuple) before the previous one links it. A warp that finds no
// super node raises the allocator's flag and leaves its bucket short: the host clears
// the space, grows the allocator and builds again.
extern "C" __global__ void gh_hs_build(GhHsBuildParams p) {
    SuperNodeAllocator allocator(p.space.alloc, chain_count(p.space));
    const uint32_t chains = chain_count(p.space);
    for_each_warp_item(p.space.bucket_count, [&](uint64_t bucket) {
        const uint64_t begin = p.offsets[bucket];
        const uint64_t end = p.offsets[bucket + 1];
        uint32_t *previous = nullptr;
        for (uint64_t first = begin; first < end || first == begin; first += GH_SLAB_DATA_LANES) {
            uint32_t *key_node = head_super_node(p.space, (uint32_t)bucket);
            uint32_t address = GH_INVALID_SLAB;
            if (previous != nullptr) {
                address = allocator.allocate();
                if (address == GH_INVALID_SLAB) {
                    return;
                }
                key_node = gh::slab_pointer(p.space.alloc, address);
            }
            const uint64_t i = first + lane_id();
            const bool holds = is_data_lane() && i < end;
            for (uint32_t c = 0; c < chains; ++c) {
                uint32_t word = GH_SLAB_EMPTY_WORD;  // also GH_INVALID_SLAB in lane 31
                if (holds) {
                    word = chain_word(p.space, p.tuples, i, c);
                }
                node(key_node, c)[lane_id()] = word;
            }
            if (previous != nullptr) {
                __threadfence();
                __syncwarp();
                link_other_chains(p.space, previous, address);
                if (lane_id() == 0) {
                    previous[GH_SLAB_NEXT_LANE] = address;
                }
            }
            __syncwarp();
            previous = key_node;
            if (end <= begin) {
                break;
            }
        }
    });
}
