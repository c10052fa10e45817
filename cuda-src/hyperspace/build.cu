// Bulk build (the GHSH paper, section 4.2.1): tuples sorted by bucket with a counting sort
// (histogram, prefix sum, scatter; the tuples moved as rows), then whole super nodes of 31
// tuples, lane l of node k taking the bucket's tuple 31 k + l. The paper gives each bucket one warp; here a
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

// A thread a row: a row's words lie together, so a tuple moved whole costs one or two
// sectors read, where its columns apart cost one each.
extern "C" __global__ void gh_hs_permute(GhHsPermuteParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint32_t *from = p.source + (uint64_t)p.order[i] * p.width;
        uint32_t *to = p.values + i * p.width;
        for (uint32_t c = 0; c < p.width; ++c) {
            to[c] = from[c];
        }
    }
}

// The batch's columns turned into rows once, which every space's sort then moves whole.
extern "C" __global__ void gh_hs_tuple_rows(GhHsTupleRowsParams p) {
    const uint32_t width = p.attribute_count + 2u;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.tuples.count; i += stride) {
        uint32_t *row = p.rows + i * width;
        for (uint32_t c = 0; c + 1u < width; ++c) {
            row[c] = field_of(p.tuples, i, c);
        }
        row[width - 1u] = p.tuples.values[i];
    }
}

// The super nodes each bucket takes, laid out by a device scan: the build's plan needs no
// round trip of the histogram through the host, only the two totals. Each thread sums its
// buckets, then a warp's sums meet in one atomic a total.
extern "C" __global__ void gh_hs_node_counts(GhHsNodeCountsParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long all = 0;
    unsigned long long past_heads = 0;
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < p.bucket_count; b += stride) {
        const unsigned long long nodes = (p.histogram[b] + GH_SLAB_DATA_LANES - 1) / GH_SLAB_DATA_LANES;
        p.nodes[b] = nodes;
        all += nodes;
        past_heads += nodes > 0 ? nodes - 1 : 0;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        all += __shfl_down_sync(kFullWarp, all, offset);
        past_heads += __shfl_down_sync(kFullWarp, past_heads, offset);
    }
    if (lane_id() == 0) {
        atomicAdd(p.totals, all);
        atomicAdd(p.totals + 1, past_heads);
    }
}

__device__ __forceinline__ bool is_reserved_key(uint32_t key) {
    return key == GH_SLAB_EMPTY_WORD || key == GH_SLAB_REMOVED_WORD || key == GH_HS_BUSY_KEY;
}

// The check that a batch's keys are unique and not reserved, on the device: a batch of
// millions of keys took a host map longer than its whole build. It only says whether a
// fault exists; the host then names the first one in batch order. A key repeated many
// times finds its own mark in its first probe, so repeats cost no longer probe runs.
extern "C" __global__ void gh_hs_key_faults(GhHsKeyFaultsParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint32_t key = p.keys[i];
        if (is_reserved_key(key)) {
            atomicOr(p.fault, 1u);
            continue;
        }
        // Reserved keys are the top words, so key + 1 never wraps to the empty 0.
        const uint32_t mark = key + 1u;
        for (uint32_t slot = gh_fmix32(key ^ p.seed) & p.mask;; slot = (slot + 1u) & p.mask) {
            const uint32_t held = atomicCAS(p.table + slot, 0u, mark);
            if (held == 0u) {
                break;
            }
            if (held == mark) {
                atomicOr(p.fault, 1u);
                break;
            }
        }
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
                word = p.rows[i * chains + c];
            } else if (!is_data_lane() && next != GH_INVALID_SLAB) {
                word = next + c;  // node c of a super node lies c slabs after its key node
            }
            node(key_node, c)[lane_id()] = word;
        }
    });
}
