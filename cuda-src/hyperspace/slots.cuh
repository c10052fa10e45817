// Slots of a super node: claiming a key slot, writing a tuple into a claimed slot and
// publishing it, and reading a tuple back. The key slot decides whether a tuple is there:
// an insert claims it as busy (compare-and-swap from empty), writes the other fields,
// fences, then publishes the key; a delete overwrites the key with the removed word.
// A key slot goes empty -> busy -> key -> removed, and a reclaim (gh_hs_reclaim, after a
// grace period no search spans) turns removed back into empty; every other field of a
// slot is written before its key is published, and only while the key slot is busy.
//
// Every function here is called by all 32 lanes of a warp together.
#pragma once

#include "hyperspace/super_node.cuh"

namespace gh::hs {

// Field `chain` of tuple i for lane-parallel writes: the key, an attribute or the value.
__device__ __forceinline__ uint32_t chain_word(const GhHsSpace &space, const GhHsTuples &tuples, uint64_t i,
                                               uint32_t chain) {
    return chain == value_chain(space) ? tuples.values[i] : field_of(tuples, i, chain);
}

// Tries to claim key slot `spot` of the key node this warp read; true in every lane when
// it did.
__device__ __forceinline__ bool claim_slot(uint32_t *key_node, uint32_t spot) {
    bool claimed = false;
    if (lane_id() == spot) {
        claimed = atomicCAS(key_node + spot, GH_SLAB_EMPTY_WORD, GH_HS_BUSY_KEY) == GH_SLAB_EMPTY_WORD;
    }
    return __shfl_sync(kFullWarp, claimed, spot);
}

// Writes tuple i into slot `spot` of the super node at key_node, which this warp claimed,
// and publishes its key: lane c writes chain c, then all fence, then the key goes in.
__device__ __forceinline__ void publish_tuple(const GhHsSpace &space, const GhHsTuples &tuples, uint64_t i,
                                              uint32_t *key_node, uint32_t spot) {
    const uint32_t c = lane_id();
    if (c > 0 && c < chain_count(space)) {
        node(key_node, c)[spot] = chain_word(space, tuples, i, c);
    }
    // Every field must be visible before the key that makes the tuple live.
    __threadfence();
    __syncwarp();
    if (c == 0) {
        atomicExch(key_node + spot, tuples.keys[i]);
    }
    __syncwarp();
}

// Reads the tuple in slot `spot` of the super node at key_node into slot `at` of out:
// lane c reads chain c. The caller has seen the key live and fenced since.
__device__ __forceinline__ void copy_tuple_out(const GhHsSpace &space, uint32_t *key_node, uint32_t spot,
                                               const GhHsTuplesOut &out, uint64_t at) {
    const uint32_t c = lane_id();
    if (c < chain_count(space)) {
        const uint32_t word = __ldcg(node(key_node, c) + spot);
        if (c == 0) {
            out.keys[at] = word;
        } else if (c == value_chain(space)) {
            out.values[at] = word;
        } else {
            out.attributes[(uint64_t)(c - 1u) * out.capacity + at] = word;
        }
    }
    __syncwarp();
}

// A super node as a walk meets it: its key node, and its slab address (GH_INVALID_SLAB
// for a bucket's head, which lies in the heads array).
struct SuperNode {
    uint32_t *key_node;
    uint32_t address;
};

__device__ __forceinline__ SuperNode head_of(const GhHsSpace &space, uint32_t bucket) {
    return SuperNode{head_super_node(space, bucket), GH_INVALID_SLAB};
}

// The super node after the one whose key node this lane's word came from (the key node's
// link is the one an extension publishes); a null key node at the tail.
__device__ __forceinline__ SuperNode next_of(const GhHsSpace &space, uint32_t key_word) {
    const uint32_t next = gh::next_address(key_word);
    return SuperNode{next == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(space.alloc, next), next};
}

// A key slot's identity that outlives growth of the allocator (see GH_HS_HEAD_SLOT).
__device__ __forceinline__ uint64_t slot_id(const GhHsSpace &space, SuperNode super_node, uint32_t spot) {
    if (super_node.address == GH_INVALID_SLAB) {
        return GH_HS_HEAD_SLOT | (uint64_t)(super_node.key_node - space.heads + spot);
    }
    return GH_HS_SLAB_SLOT | ((uint64_t)super_node.address << 5) | spot;
}

// The key slot a slot_id (not 0) names, in the space as it is now.
__device__ __forceinline__ uint32_t *slot_pointer(const GhHsSpace &space, uint64_t id) {
    if (id & GH_HS_HEAD_SLOT) {
        return space.heads + (id & ~GH_HS_HEAD_SLOT);
    }
    return gh::slab_pointer(space.alloc, (uint32_t)((id & ~GH_HS_SLAB_SLOT) >> 5)) + (id & 31u);
}

// Walks a bucket's super nodes from its head: visit(super_node, key_word) with this
// lane's word of each key node, until visit returns false or the chain ends.
template <typename Visit>
__device__ __forceinline__ void walk_bucket(const GhHsSpace &space, uint32_t bucket, Visit visit) {
    for (SuperNode at = head_of(space, bucket); at.key_node != nullptr;) {
        const uint32_t word = gh::read_slab(at.key_node);
        if (!visit(at, word)) {
            return;
        }
        at = next_of(space, word);
    }
}

// Serves the items of this warp's lanes that are in range one at a time, the whole warp on
// each: serve(src, key, item, bucket) with the key, the item index and the bucket of lane
// src's tuple, broadcast to every lane.
template <typename Serve>
__device__ __forceinline__ void for_each_lane_item(const GhHsSpace &space, const GhHsTuples &tuples, uint64_t i,
                                                   bool in_range, Serve serve) {
    const uint32_t key = in_range ? tuples.keys[i] : 0;
    const uint32_t bucket = in_range ? tuple_bucket(space, tuples, i) : 0;
    for (uint32_t queue = __ballot_sync(kFullWarp, in_range); queue != 0; queue &= queue - 1) {
        const uint32_t src = __ffs(queue) - 1;
        const uint64_t item = __shfl_sync(kFullWarp, (unsigned long long)i, src);
        serve(src, __shfl_sync(kFullWarp, key, src), item, __shfl_sync(kFullWarp, bucket, src));
    }
}

}  // namespace gh::hs
