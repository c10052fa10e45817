// Slab hash buckets with warp-cooperative work sharing (the SlabHash paper, section IV), built on the
// slab lists of cuda-src/slab_list/slab_list.cuh.
//
// Each thread owns one operation. The warp ballots for lanes with work, takes the lowest,
// broadcasts its key, and walks that key's slab list with all 32 lanes: each lane reads
// its 4 bytes of the slab, ballots find the key or a free spot, lane 31 gives the next
// slab. When the operation ends its lane drops out of the queue and the next one starts.
#pragma once

#include "gpuhash/slab_hash_layouts.h"
#include "slab_list/slab_list.cuh"

namespace gh {

// A fresh slab of the list layer is a slab of empty spots.
static_assert(GH_EMPTY_KEY == GH_SLAB_EMPTY_WORD, "extend_list fills new slabs with empty keys");

// One kind of slab: the table kind and the widths, in 32-bit words, of keys and values.
// An entry takes 1, 2 or 4 lanes (a 3-word entry is padded to 4), so that every 64-bit
// key or value starts at an even lane, 8-byte aligned, where 64-bit atomics reach it.
template <uint32_t kKindArg, uint32_t kKeyWordsArg, uint32_t kValueWordsArg>
struct SlabShape {
    static constexpr uint32_t kKind = kKindArg;
    static constexpr uint32_t kKeyWords = kKeyWordsArg;
    static constexpr uint32_t kValueWords = kKind == GH_TABLE_SET ? 0 : kValueWordsArg;
    static constexpr uint32_t kEntryWords = kKeyWords + kValueWords == 3 ? 4 : kKeyWords + kValueWords;
    static constexpr uint32_t kEntries = GH_SLAB_KEYS / kEntryWords;
    // Lanes from an entry's key to its value.
    static constexpr uint32_t kValueLane = kKeyWords + kValueWords == 3 ? 2 : kKeyWords;
    // Words of a value in the batch buffers (a set's absent values count as one).
    static constexpr uint32_t kValueBufferWords = kValueWords == 2 ? 2 : 1;
    // Words of one result of a batch: a value, or a multimap's 32-bit count.
    static constexpr uint32_t kResultWords = kKind == GH_TABLE_MULTIMAP ? 1 : kValueBufferWords;
    // The reserved key words at this width: a never-used spot, a removed entry, a spot
    // whose value is being written.
    static constexpr uint64_t kEmpty = kKeyWords == 1 ? GH_EMPTY_KEY : ~0ull;
    static constexpr uint64_t kTombstone = kEmpty - 1;
    static constexpr uint64_t kBusy = kEmpty - 2;
    // Whether an entry is too wide for one 64-bit compare-and-swap: such an insert claims
    // its spot as busy, writes the value, and only then the key.
    static constexpr bool kClaimsInTwoSteps = kValueWords != 0 && kKeyWords + kValueWords > 2;
    // Whether an insert must wait for busy spots: one may hold its own key, and unique keys
    // must not be stored twice. Multimaps keep duplicates and need not wait.
    static constexpr bool kWaitsForBusy = kClaimsInTwoSteps && kKind != GH_TABLE_MULTIMAP;
    // Whether a key is stored in its home quarter of its head slab while that quarter has
    // room (see home_quarter): maps and sets. A multimap's copies of a key fill its list
    // from the first spot on.
    static constexpr bool kHomed = kKind != GH_TABLE_MULTIMAP;

    __device__ static bool is_key_lane(uint32_t lane) {
        return lane < kEntries * kEntryWords && lane % kEntryWords == 0;
    }
};

// Where a key lives: its bucket and the key stored in the slab. The reserved keys go to
// the extra buckets as the stored key 0, so every key value is usable.
struct Placement {
    uint32_t bucket;
    uint64_t stored;
};

template <typename Shape>
__device__ __forceinline__ Placement place(const GhSlabTable &table, uint64_t key) {
    if (key == Shape::kEmpty) {
        return Placement{table.bucket_count, 0};
    }
    if (key == Shape::kTombstone) {
        return Placement{table.bucket_count + 1, 0};
    }
    if (key == Shape::kBusy) {
        return Placement{table.bucket_count + 2, 0};
    }
    uint32_t folded = Shape::kKeyWords == 1 ? (uint32_t)key : (uint32_t)gh_fmix64(key);
    return Placement{gh_universal32(folded, table.hash), key};
}

// The user's key of a stored key found in `bucket`.
template <typename Shape>
__device__ __forceinline__ uint64_t user_key(const GhSlabTable &table, uint32_t bucket, uint64_t stored) {
    if (bucket < table.bucket_count) {
        return stored;
    }
    return bucket == table.bucket_count ? Shape::kEmpty
                                        : (bucket == table.bucket_count + 1 ? Shape::kTombstone : Shape::kBusy);
}

// Words of a quarter slab: 32 bytes, one sector, what one random read of a lookup costs.
constexpr uint32_t kQuarterWords = GH_SLAB_WORDS / 4;

// The quarter of its head slab where a map's or set's key goes first, from bits of the key
// that its bucket does not depend on. An insert claims the first empty spot of that
// quarter, and only when the quarter holds none, the first empty spot of the list; spots
// never become empty again (removes leave tombstones; a flush, which compacts lists,
// homes the keys of a list that fits its head slab again). So a key sits in its home
// quarter, or every spot of its list before it was taken when it came: a lookup that
// reads its home quarter and finds an empty spot there but not the key is done, one
// sector read, and at memory utilization 0.5 (two keys a quarter on average) nearly every
// hit is in that sector too.
template <typename Shape>
__device__ __forceinline__ uint32_t home_quarter(uint64_t stored) {
    const uint32_t folded = (uint32_t)stored ^ (uint32_t)(stored >> 32);
    return gh_fmix32(folded ^ 0x5bd1e995u) >> 30;
}

// The lanes (slab words) of quarter q.
__device__ __forceinline__ uint32_t quarter_lanes(uint32_t q) { return 0xFFu << (kQuarterWords * q); }

__device__ __forceinline__ uint32_t *head_slab(const GhSlabTable &table, uint32_t bucket) {
    return list_head(table.buckets, bucket);
}

// A 64-bit value stored from `lane` (words lane and lane + 1), or a 32-bit one.
template <uint32_t kWords>
__device__ __forceinline__ void store_value(uint32_t *slab, uint32_t lane, uint64_t value) {
    if (kWords == 1) {
        atomicExch(slab + lane, (uint32_t)value);
    } else {
        atomicExch(reinterpret_cast<unsigned long long *>(slab + lane), (unsigned long long)value);
    }
}

// Compare-and-swap of the key at `lane`, 32 or 64 bits.
template <uint32_t kWords>
__device__ __forceinline__ bool swap_key(uint32_t *slab, uint32_t lane, uint64_t expected, uint64_t desired) {
    if (kWords == 1) {
        return atomicCAS(slab + lane, (uint32_t)expected, (uint32_t)desired) == (uint32_t)expected;
    }
    auto *word = reinterpret_cast<unsigned long long *>(slab + lane);
    return atomicCAS(word, expected, desired) == expected;
}

// Combines `value` into the word at `word` with one atomic: unsigned add, min or max.
template <typename T>
__device__ __forceinline__ void combine_atomic(T *word, uint32_t op, T value) {
    if (op == GH_OP_UPSERT_ADD) {
        atomicAdd(word, value);
    } else if (op == GH_OP_UPSERT_MIN) {
        atomicMin(word, value);
    } else {
        atomicMax(word, value);
    }
}

// Combines `value` into the 32- or 64-bit value stored from `lane`.
template <uint32_t kWords>
__device__ __forceinline__ void combine_value(uint32_t *slab, uint32_t lane, uint32_t op, uint64_t value) {
    if constexpr (kWords == 1) {
        combine_atomic(slab + lane, op, (uint32_t)value);
    } else {
        combine_atomic(reinterpret_cast<unsigned long long *>(slab + lane), op, (unsigned long long)value);
    }
}

// The 32- or 64-bit value stored from `lane` of an entry whose key this thread has read:
// the fence orders the read after the key's, so a value published before its key is seen.
template <uint32_t kWords>
__device__ __forceinline__ uint64_t read_published_value(const uint32_t *slab, uint32_t lane) {
    __threadfence();
    if constexpr (kWords == 1) {
        return __ldcg(slab + lane);
    } else {
        return __ldcg(reinterpret_cast<const unsigned long long *>(slab + lane));
    }
}

// What a map operation that found its key (published: the warp read it) at `lane` does to
// the key's value: an insert replaces it, an upsert combines into it, an insert_or_find
// reads it. Returns the value an insert_or_find read, else 0.
template <typename Shape>
__device__ __forceinline__ uint64_t meet_found_value(uint32_t *slab, uint32_t lane, uint32_t op, uint64_t value) {
    const uint32_t at = lane + Shape::kValueLane;
    if (op == GH_OP_INSERT) {
        store_value<Shape::kValueWords>(slab, at, value);
    } else if (op == GH_OP_INSERT_OR_FIND) {
        return read_published_value<Shape::kValueWords>(slab, at);
    } else {
        combine_value<Shape::kValueWords>(slab, at, op, value);
    }
    return 0;
}

// Stores an entry in the empty spot at `lane`, so that no reader, in this launch or a
// concurrent one on another stream, ever sees the key without its value. A key alone, or
// a 32-bit key with a 32-bit value, goes in with one compare-and-swap. A wider entry
// claims the spot as busy, writes its value, and publishes the key after a fence: readers
// take a busy spot for one that holds no key, and inserts of unique keys wait for it to
// resolve (see must_wait).
template <typename Shape>
__device__ __forceinline__ bool claim_spot(uint32_t *slab, uint32_t lane, uint64_t stored, uint64_t value) {
    if (Shape::kKeyWords == 1 && Shape::kValueWords == 1) {
        const unsigned long long empty = ((unsigned long long)GH_EMPTY_KEY << 32) | GH_EMPTY_KEY;
        unsigned long long pair = (value << 32) | stored;
        return atomicCAS(reinterpret_cast<unsigned long long *>(slab + lane), empty, pair) == empty;
    }
    if (!Shape::kClaimsInTwoSteps) {
        return swap_key<Shape::kKeyWords>(slab, lane, Shape::kEmpty, stored);
    }
    if (!swap_key<Shape::kKeyWords>(slab, lane, Shape::kEmpty, Shape::kBusy)) {
        return false;
    }
    store_value<Shape::kValueWords>(slab, lane + Shape::kValueLane, value);
    __threadfence();
    store_value<Shape::kKeyWords>(slab, lane, stored);
    return true;
}

// Whether an insert of a unique key that did not find it in a slab must read the slab
// again: a busy spot there may be its own key, not yet published. The insert that claimed
// it publishes with no wait in between, so the wait is short.
template <typename Shape>
__device__ __forceinline__ bool must_wait(bool busy_spot_seen) {
    return Shape::kWaitsForBusy && busy_spot_seen;
}

// The outcome of one step of an operation on one slab.
struct Step {
    bool finished;
    uint32_t status;
    uint64_t result;
};

// Serves the operations of the lanes of a warp, one at a time, all 32 lanes reading each
// slab: the SlabHash paper's warp-cooperative work sharing, for batches that mix operations (and
// removals and counts). `op`, `key` and `value` are this lane's operation; `active` says
// whether it has one. Writes this lane's status and result when it
// is served.
template <typename Shape>
__device__ void serve_warp(const GhSlabTable &table, WarpAllocator &allocator, bool active, uint32_t op,
                           uint64_t key, uint64_t value, uint32_t &status, uint64_t &result) {
    constexpr uint32_t kKind = Shape::kKind;
    const uint32_t lane = lane_id();
    const bool key_lane = Shape::is_key_lane(lane);
    const Placement mine = place<Shape>(table, key);
    uint32_t served = 32;  // the lane whose operation the warp works on
    uint32_t *slab = nullptr;
    bool at_head = false;  // slab is the served lane's head slab
    uint64_t tally = 0;  // counts and removals of the served lane so far (uniform)
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
        uint64_t src_stored = broadcast<Shape::kKeyWords>(mine.stored, src);
        uint64_t src_value = broadcast<Shape::kValueBufferWords>(value, src);
        if (src != served) {
            served = src;
            slab = head_slab(table, __shfl_sync(kFullWarp, mine.bucket, src));
            at_head = true;
            tally = 0;
        }
        uint32_t word = read_slab(slab);
        uint64_t here = join_words<Shape::kKeyWords>(word);
        uint64_t value_here = join_words<Shape::kValueBufferWords>(word);
        uint32_t next = __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
        uint32_t matches = __ballot_sync(kFullWarp, key_lane && here == src_stored);
        bool at_tail = next == GH_INVALID_SLAB;
        Step step{false, GH_STATUS_PENDING, 0};

        if (src_op == GH_OP_GET) {
            if (matches != 0) {
                uint32_t found = __ffs(matches) - 1;
                uint64_t found_value =
                    broadcast<Shape::kValueBufferWords>(value_here, found + Shape::kValueLane);
                step = Step{true, GH_STATUS_DONE, kKind == GH_TABLE_SET ? 0 : found_value};
            } else if (at_tail) {
                step = Step{true, GH_STATUS_ABSENT, 0};
            }
        } else if (src_op == GH_OP_COUNT) {
            tally += __popc(matches);
            if (at_tail) {
                step = Step{true, GH_STATUS_DONE, tally};
            }
        } else if (src_op == GH_OP_REMOVE && kKind == GH_TABLE_MULTIMAP) {
            bool removed = ((matches >> lane) & 1) &&
                           swap_key<Shape::kKeyWords>(slab, lane, src_stored, Shape::kTombstone);
            tally += __popc(__ballot_sync(kFullWarp, removed));
            if (at_tail) {
                step = Step{true, tally > 0 ? GH_STATUS_DONE : GH_STATUS_ABSENT, tally};
            }
        } else if (src_op == GH_OP_REMOVE) {
            if (matches != 0) {
                uint32_t found = __ffs(matches) - 1;
                bool removed =
                    lane == found && swap_key<Shape::kKeyWords>(slab, lane, src_stored, Shape::kTombstone);
                if (__ballot_sync(kFullWarp, removed) != 0) {
                    step = Step{true, GH_STATUS_DONE, 1};
                } else {
                    continue;  // another warp changed the spot: read the slab again
                }
            } else if (at_tail) {
                step = Step{true, GH_STATUS_ABSENT, 0};
            }
        } else {  // GH_OP_INSERT, and a map's upserts and insert_or_find
            if (matches != 0 && kKind != GH_TABLE_MULTIMAP) {
                // Unique keys: a map replaces, combines or reads the value (a lost claim
                // below comes back here, so equal keys combine into one entry); a set has
                // nothing to do.
                uint32_t found = __ffs(matches) - 1;
                uint64_t held = 0;
                if (kKind == GH_TABLE_MAP && lane == found) {
                    held = meet_found_value<Shape>(slab, lane, src_op, src_value);
                }
                held = broadcast<Shape::kValueBufferWords>(held, found);
                step = Step{true, kKind == GH_TABLE_SET ? GH_STATUS_ABSENT : GH_STATUS_DONE, held};
            } else {
                // Entries are only ever added at the first empty spot of the list, or of
                // their home quarter, so a key met neither in the slab that holds the
                // list's first empty spot nor before it is in the list nowhere.
                uint32_t empties = __ballot_sync(kFullWarp, key_lane && here == Shape::kEmpty);
                if (must_wait<Shape>(__any_sync(kFullWarp, key_lane && here == Shape::kBusy))) {
                    continue;
                }
                const uint32_t home_empties = empties & quarter_lanes(home_quarter<Shape>(src_stored));
                if (Shape::kHomed && at_head && home_empties != 0) {
                    empties = home_empties;
                }
                if (empties != 0) {
                    uint32_t spot = __ffs(empties) - 1;
                    bool stored = lane == spot && claim_spot<Shape>(slab, lane, src_stored, src_value);
                    if (__ballot_sync(kFullWarp, stored) == 0) {
                        continue;  // another warp took the spot: read the slab again
                    }
                    // An insert_or_find answers the candidate it stored.
                    step = Step{true, GH_STATUS_DONE, src_op == GH_OP_INSERT_OR_FIND ? src_value : 0};
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
            at_head = false;
        }
    }
}

}  // namespace gh
