// Bulk build (the GHSH paper, section 4.2.1): tuples sorted by bucket with a counting sort
// (histogram, prefix sum, scatter), then whole super nodes of 31 tuples, lane l of node k
// taking the bucket's tuple 31 k + l. The paper gives each bucket one warp; here a
// bucket's super nodes are numbered from the prefix sums, so that any warp allocates or
// writes any of them: an attribute of 100 values (100 buckets of 5000 nodes at 2^24
// tuples) keeps the whole GPU busy, not 100 warps. The same counting sort orders a search
// batch's subtasks by bucket.
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

// The bucket whose super nodes hold node t: the last bucket starting at or before t
// (an empty bucket starts where the next one does, so it is never the last). Every lane
// takes the same steps.
__device__ __forceinline__ uint32_t bucket_of_node(const GhHsBuildParams &p, uint64_t t) {
    uint32_t low = 0;
    uint32_t high = p.space.bucket_count - 1u;
    while (low < high) {
        const uint32_t middle = low + (high - low + 1u) / 2u;
        if (p.node_starts[middle] <= t) {
            low = middle;
        } else {
            high = middle - 1u;
        }
    }
    return low;
}

// One warp per super node of the build past its bucket's head: a run of slabs for it into
// links[t]. Every warp allocates for any bucket, so a bucket of many nodes takes no longer
// than many buckets of one. A warp that finds no run raises the allocator's flag: the host
// frees every run, grows the allocator and runs this again before anything is written.
extern "C" __global__ void gh_hs_build_links(GhHsBuildParams p) {
    SuperNodeAllocator allocator(p.space.alloc, chain_count(p.space));
    for_each_warp_item(p.node_count, [&](uint64_t t) {
        const uint32_t bucket = bucket_of_node(p, t);
        if (t == p.node_starts[bucket]) {
            return;  // the head lies in the space's array of heads
        }
        const uint32_t address = allocator.allocate();
        if (lane_id() == 0) {
            p.links[t] = address;
        }
    });
}

// One warp per super node of an empty space whose runs gh_hs_build_links took: node j of
// bucket b holds the bucket's tuples 31 j .. 31 j + 30, lane l of every node tuple 31 j + l
// (empty words past the last tuple), and lane 31 of node c the link to node c of the
// bucket's next super node, or none. Nothing reads the space during the build (the host
// holds it for writing), so the nodes are written in any order with no fence: the kernel's
// end publishes them.
extern "C" __global__ void gh_hs_build(GhHsBuildParams p) {
    const uint32_t chains = chain_count(p.space);
    for_each_warp_item(p.node_count, [&](uint64_t t) {
        const uint32_t bucket = bucket_of_node(p, t);
        const uint64_t j = t - p.node_starts[bucket];
        uint32_t *key_node = j == 0 ? head_super_node(p.space, bucket) : gh::slab_pointer(p.space.alloc, p.links[t]);
        const uint32_t next = t + 1 < p.node_starts[bucket + 1] ? p.links[t + 1] : GH_INVALID_SLAB;
        const uint64_t i = p.offsets[bucket] + j * GH_SLAB_DATA_LANES + lane_id();
        const bool holds = is_data_lane() && i < p.offsets[bucket + 1];
        for (uint32_t c = 0; c < chains; ++c) {
            uint32_t word = GH_SLAB_EMPTY_WORD;
            if (holds) {
                word = chain_word(p.space, p.tuples, i, c);
            } else if (!is_data_lane() && next != GH_INVALID_SLAB) {
                word = next + c;  // node c of a super node lies c slabs after its key node
            }
            node(key_node, c)[lane_id()] = word;
        }
    });
}
