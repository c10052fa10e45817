// A hyperspace index's space on the device (the GHSH paper, section 3): where a tuple's
// coordinates and bucket come from, and where the nodes of a super node lie. The host
// mirror of the coordinate hash is gpuhash_hyperspace::shape::coordinate; the GPU tests
// hold the two against each other.
#pragma once

#include "gpuhash/hyperspace_layouts.h"
#include "slab_list/slab_list.cuh"

namespace gh::hs {

// Coordinate of `value` on a dimension of `bits` bits: the top bits of a 32-bit mix of
// the value and the dimension's seed. The top bits, because fmix32 mixes them best.
__device__ __forceinline__ uint32_t coordinate(uint32_t value, uint32_t seed, uint32_t bits) {
    return bits == 0 ? 0u : gh_fmix32(value ^ seed) >> (32u - bits);
}

// Chains of a super node: key, p attributes, value.
__device__ __forceinline__ uint32_t chain_count(const GhHsSpace &space) { return space.attribute_count + 2u; }

__device__ __forceinline__ uint32_t value_chain(const GhHsSpace &space) { return space.attribute_count + 1u; }

// Field f of tuple i: 0 the key, 1 + a attribute a.
__device__ __forceinline__ uint32_t field_of(const GhHsTuples &tuples, uint64_t i, uint32_t field) {
    return field == GH_HS_KEY_FIELD ? tuples.keys[i] : tuples.attributes[(uint64_t)(field - 1u) * tuples.count + i];
}

// The bucket whose dimensions take the coordinates field_value(f) gives: coordinates
// concatenated in dimension order, the first the highest bits.
template <typename FieldValue>
__device__ __forceinline__ uint32_t bucket_of(const GhHsSpace &space, FieldValue field_value) {
    uint32_t bucket = 0;
    for (uint32_t d = 0; d < space.dimension_count; ++d) {
        const uint32_t bits = space.dimension_bits[d];
        const uint32_t c = coordinate(field_value(space.dimension_field[d]), space.dimension_seed[d], bits);
        bucket = bits == 0 ? bucket : (bucket << bits) | c;
    }
    return bucket;
}

__device__ __forceinline__ uint32_t tuple_bucket(const GhHsSpace &space, const GhHsTuples &tuples, uint64_t i) {
    return bucket_of(space, [&](uint32_t field) { return field_of(tuples, i, field); });
}

// The key node of bucket b's head super node.
__device__ __forceinline__ uint32_t *head_super_node(const GhHsSpace &space, uint32_t bucket) {
    return space.heads + (uint64_t)bucket * chain_count(space) * GH_SLAB_WORDS;
}

// Node `chain` of the super node whose key node is `key_node`.
__device__ __forceinline__ uint32_t *node(uint32_t *key_node, uint32_t chain) {
    return key_node + (uint64_t)chain * GH_SLAB_WORDS;
}

__device__ __forceinline__ bool is_data_lane() { return gh::lane_id() < GH_SLAB_DATA_LANES; }

// Whether a key word holds a published tuple.
__device__ __forceinline__ bool is_live_key(uint32_t word) {
    return word != GH_SLAB_EMPTY_WORD && word != GH_SLAB_REMOVED_WORD && word != GH_HS_BUSY_KEY;
}

// Grid-stride over items with warp-uniform bounds, so that all 32 lanes take part in
// every walk: serve(i, in_range) with this lane's item i.
template <typename Serve>
__device__ __forceinline__ void for_each_item(uint64_t count, Serve serve) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < count; base += stride) {
        const uint64_t i = base + gh::lane_id();
        serve(i, i < count);
    }
}

// One warp per index below count (a bucket, a group of subtasks), grid-stride.
template <typename Visit>
__device__ __forceinline__ void for_each_warp_item(uint64_t count, Visit visit) {
    const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32u;
    for (uint64_t w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32u; w < count; w += warps) {
        visit(w);
    }
}

}  // namespace gh::hs
