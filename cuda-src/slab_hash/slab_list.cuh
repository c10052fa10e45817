// Slab lists with warp-cooperative work sharing (seed 002, section IV).
//
// Each thread owns one operation. The warp ballots for lanes with work, takes the lowest,
// broadcasts its key, and walks that key's slab list with all 32 lanes: each lane reads
// its 4 bytes of the slab, ballots find the key or a free spot, lane 31 gives the next
// slab. When the operation ends its lane drops out of the queue and the next one starts.
#pragma once

#include "gpuhash/slab_hash_layouts.h"
#include "slab_alloc/slab_alloc.cuh"

namespace gh {

// Where a key lives: its bucket and the word stored in the slab. The reserved key words
// go to the two extra buckets as the stored key 0, so every key value is usable.
struct Placement {
    uint32_t bucket;
    uint32_t stored;
};

__device__ __forceinline__ Placement place(const GhSlabTable &table, uint32_t key) {
    if (key == GH_EMPTY_KEY) {
        return Placement{table.bucket_count, 0};
    }
    if (key == GH_TOMBSTONE_KEY) {
        return Placement{table.bucket_count + 1, 0};
    }
    return Placement{gh_universal32(key, table.hash), key};
}

// The user's key of a stored word found in `bucket`.
__device__ __forceinline__ uint32_t user_key(const GhSlabTable &table, uint32_t bucket, uint32_t stored) {
    if (bucket == table.bucket_count) {
        return GH_EMPTY_KEY;
    }
    return bucket == table.bucket_count + 1 ? GH_TOMBSTONE_KEY : stored;
}

__device__ __forceinline__ uint32_t *head_slab(const GhSlabTable &table, uint32_t bucket) {
    return table.buckets + (uint64_t)bucket * GH_SLAB_WORDS;
}

// Lanes that hold keys: the even lanes below 30 for pairs, all lanes below 30 for sets.
template <uint32_t kKind>
__device__ __forceinline__ bool is_key_lane(uint32_t lane) {
    return kKind == GH_TABLE_SET ? lane < GH_SLAB_KEYS : lane < 2 * GH_SLAB_PAIRS && lane % 2 == 0;
}

// Reads one slab, one word a lane. From L2: slabs change under atomics of other warps,
// and a retry after a failed compare-and-swap must see the new words.
__device__ __forceinline__ uint32_t read_slab(const uint32_t *slab) { return __ldcg(slab + lane_id()); }

// Stores a key (and value) in an empty spot with one compare-and-swap: 64 bits for a
// pair, so a reader never sees a key without its value.
template <uint32_t kKind>
__device__ __forceinline__ bool claim_spot(uint32_t *slab, uint32_t lane, uint32_t stored, uint32_t value) {
    if (kKind == GH_TABLE_SET) {
        return atomicCAS(slab + lane, GH_EMPTY_KEY, stored) == GH_EMPTY_KEY;
    }
    const unsigned long long empty = ((unsigned long long)GH_EMPTY_KEY << 32) | GH_EMPTY_KEY;
    unsigned long long pair = ((unsigned long long)value << 32) | stored;
    return atomicCAS(reinterpret_cast<unsigned long long *>(slab + lane), empty, pair) == empty;
}

// Appends a fresh slab after `slab` unless another warp did first. All 32 lanes call it.
// Returns false when the allocator had no slab (nothing changed).
__device__ __forceinline__ bool extend_list(WarpAllocator &allocator, const GhSlabAllocContext &alloc,
                                            uint32_t *slab) {
    uint32_t address = allocator.allocate();
    if (address == GH_INVALID_SLAB) {
        return false;
    }
    uint32_t *fresh = slab_pointer(alloc, address);
    fresh[lane_id()] = GH_EMPTY_KEY;
    // The empty words must be visible before the slab is reachable from the list.
    __threadfence();
    uint32_t linked = 0;
    if (lane_id() == GH_SLAB_NEXT_LANE) {
        linked = atomicCAS(slab + GH_SLAB_NEXT_LANE, GH_INVALID_SLAB, address) == GH_INVALID_SLAB;
        if (!linked) {
            deallocate(alloc, address);
        }
    }
    __syncwarp();
    return true;
}

// The outcome of one step of an operation on one slab.
struct Step {
    bool finished;
    uint32_t status;
    uint32_t result;
};

// Serves the operations of the lanes of a warp, one at a time, all 32 lanes reading each
// slab. `op`, `key` and `value` are this lane's operation; `active` says whether it has
// one. Writes this lane's status and result when it is served.
template <uint32_t kKind>
__device__ void serve_warp(const GhSlabTable &table, WarpAllocator &allocator, bool active, uint32_t op,
                           uint32_t key, uint32_t value, uint32_t &status, uint32_t &result) {
    const uint32_t lane = lane_id();
    const bool key_lane = is_key_lane<kKind>(lane);
    const Placement mine = place(table, key);
    uint32_t served = 32;  // the lane whose operation the warp works on
    uint32_t *slab = nullptr;
    uint32_t tally = 0;  // counts and removals of the served lane so far (uniform)
    // The warp serves its lanes one at a time, each a dependent read of a head slab: have
    // all 32 head slabs on their way to L2 before the first is needed.
    if (active) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(head_slab(table, mine.bucket)));
    }
    while (true) {
        uint32_t queue = __ballot_sync(kFullWarp, active);
        if (queue == 0) {
            return;
        }
        uint32_t src = __ffs(queue) - 1;
        uint32_t src_op = __shfl_sync(kFullWarp, op, src);
        uint32_t src_stored = __shfl_sync(kFullWarp, mine.stored, src);
        uint32_t src_value = __shfl_sync(kFullWarp, value, src);
        if (src != served) {
            served = src;
            slab = head_slab(table, __shfl_sync(kFullWarp, mine.bucket, src));
            tally = 0;
        }
        uint32_t word = read_slab(slab);
        uint32_t next = __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
        uint32_t matches = __ballot_sync(kFullWarp, key_lane && word == src_stored);
        bool at_tail = next == GH_INVALID_SLAB;
        Step step{false, GH_STATUS_PENDING, 0};

        if (src_op == GH_OP_GET) {
            if (matches != 0) {
                uint32_t found = __ffs(matches) - 1;
                uint32_t found_value = __shfl_sync(kFullWarp, word, kKind == GH_TABLE_SET ? found : found + 1);
                step = Step{true, GH_STATUS_DONE, found_value};
            } else if (at_tail) {
                step = Step{true, GH_STATUS_ABSENT, 0};
            }
        } else if (src_op == GH_OP_COUNT) {
            tally += __popc(matches);
            if (at_tail) {
                step = Step{true, GH_STATUS_DONE, tally};
            }
        } else if (src_op == GH_OP_REMOVE && kKind == GH_TABLE_MULTIMAP) {
            bool removed = ((matches >> lane) & 1) && atomicCAS(slab + lane, src_stored, GH_TOMBSTONE_KEY) == src_stored;
            tally += __popc(__ballot_sync(kFullWarp, removed));
            if (at_tail) {
                step = Step{true, tally > 0 ? GH_STATUS_DONE : GH_STATUS_ABSENT, tally};
            }
        } else if (src_op == GH_OP_REMOVE) {
            if (matches != 0) {
                uint32_t found = __ffs(matches) - 1;
                bool removed = lane == found && atomicCAS(slab + lane, src_stored, GH_TOMBSTONE_KEY) == src_stored;
                if (__ballot_sync(kFullWarp, removed) != 0) {
                    step = Step{true, GH_STATUS_DONE, 1};
                } else {
                    continue;  // another warp changed the spot: read the slab again
                }
            } else if (at_tail) {
                step = Step{true, GH_STATUS_ABSENT, 0};
            }
        } else {  // GH_OP_INSERT
            if (matches != 0 && kKind != GH_TABLE_MULTIMAP) {
                // Unique keys: a map replaces the value, a set has nothing to do.
                uint32_t found = __ffs(matches) - 1;
                if (kKind == GH_TABLE_MAP && lane == found + 1) {
                    atomicExch(slab + lane, src_value);
                }
                step = Step{true, kKind == GH_TABLE_SET ? GH_STATUS_ABSENT : GH_STATUS_DONE, 0};
            } else {
                // Pairs are only ever added at the first empty spot of the list, so a key
                // not met before that spot is in the list nowhere.
                uint32_t empties = __ballot_sync(kFullWarp, key_lane && word == GH_EMPTY_KEY);
                if (empties != 0) {
                    uint32_t spot = __ffs(empties) - 1;
                    bool stored = lane == spot && claim_spot<kKind>(slab, lane, src_stored, src_value);
                    if (__ballot_sync(kFullWarp, stored) == 0) {
                        continue;  // another warp took the spot: read the slab again
                    }
                    step = Step{true, GH_STATUS_DONE, 0};
                } else if (at_tail) {
                    if (!extend_list(allocator, table.alloc, slab)) {
                        step = Step{true, GH_STATUS_NO_SLAB, 0};
                    } else {
                        continue;  // read the slab again to follow the new link
                    }
                }
            }
        }

        if (step.finished) {
            if (lane == src) {
                status = step.status;
                result = step.result;
                active = false;
            }
        } else {
            slab = slab_pointer(table.alloc, next);
        }
    }
}

}  // namespace gh
