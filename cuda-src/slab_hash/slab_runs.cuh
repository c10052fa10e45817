// Grouped appends: the second kernel chain of a multimap insert pass. The tiled pass
// (slab_tile.cuh) stores each pair in the first walk_slabs slabs of its list where they
// have room and defers the rest; here the deferred pairs are grouped by bucket and each
// bucket's list is walked once, by one warp, for all of them. Inserting c copies of a key
// then costs one walk of its list and c / 15 slab writes, where an insert a copy walked
// from the head, c^2 / 30 slab reads in all, and thousands of warps raced for the one
// tail slab.
//
// Four kernels, each a grid-wide step (the layout of their scratch is GhSlabRunsParams'):
// - count: each deferred pair claims its bucket's slot in an open-addressing table keyed
//   by bucket and counts itself there (one atomic per group of lanes that share a slot,
//   found with __match_any_sync, so a key with many copies costs one atomic a warp);
// - reserve: each slot gets a range of `grouped`, in no particular order (one atomic a
//   warp on a shared cursor: the ranges need not follow the slots, so no scan);
// - scatter: each deferred pair writes its batch index into its bucket's range;
// - append: one warp a bucket walks the list from its head, fills the empty spots it
//   meets (a claim a lane, the same claim as every insert's), and at the tail links
//   chains of new slabs, up to 32 from one claim of the allocator, filled before the one
//   compare-and-swap that links them, so that no reader sees a key without its value.
//
// The tiled pass counts the pairs it deferred; every step returns at once when there are
// none, so a batch of short lists pays for four near-empty launches and the zeroed slots.
// Slots are sized for twice the buckets that can come (the batch, or every bucket), so
// probing ends; batch indices are 32-bit (the host refuses larger batches).
//
// Lists stay as every other kernel expects them: entries are added at empty spots only,
// never over a tombstone, and a slab is linked only at a tail, so every slab but the last
// is full (a chain's last slab holds the run's remainder). Another batch on another stream
// may extend the same list at the same time: a lost claim is tried again at the next empty
// spot, and a chain whose link lost follows the winner's slabs to the new tail (leaving
// the empty spots of the winner's last slab before it: a multimap finds its keys anywhere
// in a list, and compaction closes such gaps).
#pragma once

#include "slab_hash/slab_tile.cuh"

namespace gh {

// The words of the run table (see GhSlabRunsParams).
struct RunTable {
    uint32_t *deferred;  // pairs deferred by the tiled pass
    uint32_t *handed;    // places of `grouped` handed out
    uint32_t *buckets;   // bucket + 1 a slot, 0 when free
    uint32_t *counts;    // deferred pairs a slot
    uint32_t *cursors;   // where the slot's range of `grouped` starts, then ends

    __device__ explicit RunTable(const GhSlabRunsParams &p) {
        const uint64_t slots = (uint64_t)p.slot_mask + 1;
        deferred = p.runs;
        handed = p.runs + 1;
        buckets = p.runs + GH_SLAB_RUN_COUNTERS;
        counts = buckets + slots;
        cursors = buckets + 2 * slots;
    }
};

// Whether the tiled pass deferred nothing: every step then has nothing to do.
__device__ __forceinline__ bool nothing_deferred(const RunTable &runs) { return __ldcg(runs.deferred) == 0; }

// The slot of `bucket`, claimed if no pair claimed it yet: linear probing from a hash of
// the bucket. A slot's word only goes from 0 to a bucket, once, so a read that sees a
// bucket sees the final one, and one that sees 0 is settled by the compare-and-swap.
__device__ __forceinline__ uint32_t claim_run_slot(const GhSlabRunsParams &p, const RunTable &runs,
                                                   uint32_t bucket) {
    for (uint32_t s = gh_fmix32(bucket) & p.slot_mask;; s = (s + 1) & p.slot_mask) {
        uint32_t seen = runs.buckets[s];
        if (seen == 0) {
            seen = atomicCAS(runs.buckets + s, 0u, bucket + 1);
        }
        if (seen == 0 || seen == bucket + 1) {
            return s;
        }
    }
}

// The slot the count step claimed for `bucket`.
__device__ __forceinline__ uint32_t find_run_slot(const GhSlabRunsParams &p, const RunTable &runs,
                                                  uint32_t bucket) {
    uint32_t s = gh_fmix32(bucket) & p.slot_mask;
    while (runs.buckets[s] != bucket + 1) {
        s = (s + 1) & p.slot_mask;
    }
    return s;
}

// Calls group(i, slot, peers) on every lane whose batch element i the tiled pass deferred,
// `slot` its bucket's (from slot_of) and `peers` the lanes of its warp that share it.
// Grid-stride with warp-uniform bounds, so that every lane reaches the match.
template <typename Shape, typename SlotOf, typename Group>
__device__ void for_each_deferred(const GhSlabRunsParams &p, SlotOf slot_of, Group group) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < p.count;
         base += stride) {
        const uint64_t i = base + lane_id();
        const bool deferred = i < p.count && p.status[i] == GH_STATUS_DEFERRED;
        const uint32_t lanes = __ballot_sync(kFullWarp, deferred);
        if (deferred) {
            const uint32_t bucket = place<Shape>(p.table, load_words<Shape::kKeyWords>(p.keys, i)).bucket;
            const uint32_t slot = slot_of(bucket);
            group(i, slot, __match_any_sync(lanes, slot));
        }
    }
}

template <typename Shape>
__device__ void count_runs(const GhSlabRunsParams &p) {
    const RunTable runs(p);
    if (nothing_deferred(runs)) {
        return;
    }
    for_each_deferred<Shape>(
        p, [&](uint32_t bucket) { return claim_run_slot(p, runs, bucket); },
        [&](uint64_t, uint32_t slot, uint32_t peers) {
            if (lane_id() == __ffs(peers) - 1) {
                atomicAdd(runs.counts + slot, (uint32_t)__popc(peers));
            }
        });
}

// Each slot's cursor becomes the start of a range of `grouped` as long as its count.
__device__ void reserve_runs(const GhSlabRunsParams &p) {
    const RunTable runs(p);
    if (nothing_deferred(runs)) {
        return;
    }
    const uint32_t lane = lane_id();
    const uint64_t slots = (uint64_t)p.slot_mask + 1;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < slots;
         base += stride) {
        const uint64_t s = base + lane;
        const uint32_t count = s < slots ? runs.counts[s] : 0;
        uint32_t inclusive = count;
#pragma unroll
        for (uint32_t d = 1; d < 32; d <<= 1) {
            const uint32_t below = __shfl_up_sync(kFullWarp, inclusive, d);
            if (lane >= d) {
                inclusive += below;
            }
        }
        const uint32_t total = __shfl_sync(kFullWarp, inclusive, 31);
        uint32_t first = 0;
        if (lane == 31 && total != 0) {
            first = atomicAdd(runs.handed, total);
        }
        first = __shfl_sync(kFullWarp, first, 31);
        if (count != 0) {
            runs.cursors[s] = first + inclusive - count;
        }
    }
}

template <typename Shape>
__device__ void scatter_runs(const GhSlabRunsParams &p) {
    const RunTable runs(p);
    if (nothing_deferred(runs)) {
        return;
    }
    const uint32_t lanes_below = (1u << lane_id()) - 1u;
    for_each_deferred<Shape>(
        p, [&](uint32_t bucket) { return find_run_slot(p, runs, bucket); },
        [&](uint64_t i, uint32_t slot, uint32_t peers) {
            const uint32_t leader = __ffs(peers) - 1;
            uint32_t at = 0;
            if (lane_id() == leader) {
                at = atomicAdd(runs.cursors + slot, (uint32_t)__popc(peers));
            }
            at = __shfl_sync(peers, at, leader);
            p.grouped[at + __popc(peers & lanes_below)] = (uint32_t)i;
        });
}

// The final status of batch element i: DONE, or for NO_SLAB what a pass writes for it
// (as `answer` does).
__device__ __forceinline__ void settle_run_element(const GhSlabRunsParams &p, uint32_t i, uint32_t status) {
    if (status == GH_STATUS_NO_SLAB) {
        status = p.answer_all != 0 ? GH_STATUS_ABSENT : GH_STATUS_PENDING;
    }
    p.status[i] = (uint8_t)status;
}

// Writes `status` for the elements grouped[from .. from + n).
__device__ __forceinline__ void settle_run_range(const GhSlabRunsParams &p, uint64_t from, uint32_t n,
                                                 uint32_t status) {
    for (uint32_t e = lane_id(); e < n; e += 32) {
        settle_run_element(p, p.grouped[from + e], status);
    }
}

// One deferred pair, held by a lane while it waits for a spot.
struct RunPair {
    bool held;
    uint32_t index;   // in the batch
    uint64_t stored;  // the key as the slab stores it
    uint64_t value;
};

template <typename Shape>
__device__ __forceinline__ RunPair load_run_pair(const GhSlabRunsParams &p, uint32_t i) {
    const uint64_t key = load_words<Shape::kKeyWords>(p.keys, i);
    return RunPair{true, i, place<Shape>(p.table, key).stored, load_words<Shape::kValueBufferWords>(p.values, i)};
}

// This lane's word of a new slab whose entries are the pairs grouped[from .. from + n)
// (n at most an entry a spot), followed by the slab at `next`: the layout claim_spot
// writes, the spots past n and the padding empty.
template <typename Shape>
__device__ __forceinline__ uint32_t new_slab_word(const GhSlabRunsParams &p, uint64_t from, uint32_t n,
                                                  uint32_t next) {
    const uint32_t lane = lane_id();
    if (lane == GH_SLAB_NEXT_LANE) {
        return next;
    }
    const uint32_t entry = lane / Shape::kEntryWords;
    const uint32_t word = lane % Shape::kEntryWords;
    if (entry >= Shape::kEntries || entry >= n) {
        return GH_EMPTY_KEY;
    }
    const RunPair pair = load_run_pair<Shape>(p, p.grouped[from + entry]);
    if (word < Shape::kKeyWords) {
        return (uint32_t)(pair.stored >> (32 * word));
    }
    if (word >= Shape::kValueLane && word < Shape::kValueLane + Shape::kValueWords) {
        return (uint32_t)(pair.value >> (32 * (word - Shape::kValueLane)));
    }
    return GH_EMPTY_KEY;  // the pad of a 3-word entry
}

// Links the chain from `first` after the list's tail, which `tail` was when read: where
// another warp linked a slab there first, follows it to the new tail and links there.
__device__ __forceinline__ void link_at_tail(const GhSlabAllocContext &alloc, uint32_t *tail, uint32_t first) {
    while (true) {
        uint32_t seen = GH_INVALID_SLAB;
        if (lane_id() == GH_SLAB_NEXT_LANE) {
            seen = atomicCAS(tail + GH_SLAB_NEXT_LANE, GH_INVALID_SLAB, first);
        }
        seen = __shfl_sync(kFullWarp, seen, GH_SLAB_NEXT_LANE);
        if (seen == GH_INVALID_SLAB) {
            return;
        }
        tail = slab_pointer(alloc, seen);
    }
}

// Appends the pairs grouped[from .. from + n) after `tail`, the list's tail when read, in
// chains of new slabs: up to 32 from one claim of the allocator, each filled with its
// pairs and its link to the next before the chain is linked. Pairs the allocator has no
// slab for end NO_SLAB (its exhausted flag is raised).
template <typename Shape>
__device__ void append_chains(const GhSlabRunsParams &p, WarpAllocator &allocator, uint32_t *tail, uint64_t from,
                              uint32_t n) {
    constexpr uint32_t kEntries = Shape::kEntries;
    constexpr uint32_t kInFlight = 8;
    while (n > 0) {
        const uint32_t wanted = min(32u, (n + kEntries - 1) / kEntries);
        const SlabRun run = allocator.allocate_run<true>(wanted);
        const uint32_t slabs = __popc(run.slabs);
        if (slabs == 0) {
            settle_run_range(p, from, n, GH_STATUS_NO_SLAB);
            return;
        }
        // Each slab gets kEntries pairs, the last what is left (every slab gets some:
        // the allocator never gives more than wanted).
        const uint32_t placed = min(n, slabs * kEntries);
        const auto address = [&](uint32_t k) {
            return k < slabs ? run.first + nth_set_bit(run.slabs, k) : GH_INVALID_SLAB;
        };
        // kInFlight slabs at a time: their pairs' loads all go out before the first store,
        // which the compiler may not move loads past.
        for (uint32_t k0 = 0; k0 < slabs; k0 += kInFlight) {
            uint32_t words[kInFlight];
#pragma unroll
            for (uint32_t j = 0; j < kInFlight; ++j) {
                const uint32_t k = k0 + j;
                words[j] = k < slabs ? new_slab_word<Shape>(p, from + (uint64_t)k * kEntries,
                                                            min(kEntries, placed - min(placed, k * kEntries)),
                                                            address(k + 1))
                                     : 0;
            }
#pragma unroll
            for (uint32_t j = 0; j < kInFlight; ++j) {
                if (k0 + j < slabs) {
                    slab_pointer(p.table.alloc, address(k0 + j))[lane_id()] = words[j];
                }
            }
        }
        // The chain's words must be visible before it is reachable from the list.
        __threadfence();
        link_at_tail(p.table.alloc, tail, address(0));
        tail = slab_pointer(p.table.alloc, address(slabs - 1));
        settle_run_range(p, from, placed, GH_STATUS_DONE);
        from += placed;
        n -= placed;
    }
}

// Stores the pairs grouped[start .. start + count), all of `bucket`, walking its list once:
// lanes hold up to 32 pairs at a time, the i-th holder claims the slab's i-th empty spot,
// and the pairs left at the tail go in chains of new slabs. A claim lost to another warp
// keeps its pair, which tries the slab again.
template <typename Shape>
__device__ void append_run(const GhSlabRunsParams &p, WarpAllocator &allocator, uint32_t bucket, uint64_t start,
                           uint32_t count) {
    const uint32_t lane = lane_id();
    const uint32_t lanes_below = (1u << lane) - 1u;
    const bool key_lane = Shape::is_key_lane(lane);
    RunPair mine{false, 0, 0, 0};
    uint32_t loaded = 0;  // pairs of the run handed to lanes so far
    uint32_t *slab = head_slab(p.table, bucket);
    while (true) {
        const uint32_t idle = __ballot_sync(kFullWarp, !mine.held);
        const uint32_t rank_idle = __popc(idle & lanes_below);
        if (!mine.held && loaded + rank_idle < count) {
            mine = load_run_pair<Shape>(p, p.grouped[start + loaded + rank_idle]);
        }
        loaded = min(count, loaded + __popc(idle));
        const uint32_t holders = __ballot_sync(kFullWarp, mine.held);
        if (holders == 0) {
            return;
        }
        const uint32_t word = read_slab(slab);
        const uint64_t here = join_words<Shape::kKeyWords>(word);
        const uint32_t next = next_address(word);
        const uint32_t empties = __ballot_sync(kFullWarp, key_lane && here == Shape::kEmpty);
        const uint32_t rank = __popc(holders & lanes_below);
        const bool tries = mine.held && rank < (uint32_t)__popc(empties);
        const bool stored =
            tries && claim_spot<Shape>(slab, nth_set_bit(empties, rank), mine.stored, mine.value);
        if (stored) {
            settle_run_element(p, mine.index, GH_STATUS_DONE);
            mine.held = false;
        }
        const uint32_t tried = __ballot_sync(kFullWarp, tries);
        const bool lost = __ballot_sync(kFullWarp, tries && !stored) != 0;
        if (lost || (uint32_t)__popc(tried) < (uint32_t)__popc(empties)) {
            continue;  // a spot went to another warp, or room is left for the run's next pairs
        }
        if (next != GH_INVALID_SLAB) {
            slab = slab_pointer(p.table.alloc, next);
            continue;
        }
        // A full tail: the pairs still held go back to the run, just before those not yet
        // loaded (their places are read already), and the rest of the run goes in chains.
        const uint32_t still = __ballot_sync(kFullWarp, mine.held);
        const uint32_t back = loaded - __popc(still);
        if (mine.held) {
            p.grouped[start + back + __popc(still & lanes_below)] = mine.index;
        }
        __syncwarp();
        append_chains<Shape>(p, allocator, slab, start + back, count - back);
        return;
    }
}

// One warp serves the runs of 32 slots at a time, one run after another.
template <typename Shape>
__device__ void append_runs(const GhSlabRunsParams &p) {
    const RunTable runs(p);
    if (nothing_deferred(runs)) {
        return;
    }
    WarpAllocator allocator(p.table.alloc);
    const uint64_t slots = (uint64_t)p.slot_mask + 1;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < slots;
         base += stride) {
        const uint64_t s = base + lane_id();
        const uint32_t count = s < slots ? runs.counts[s] : 0;
        const uint32_t bucket = count != 0 ? runs.buckets[s] - 1 : 0;
        // The scatter step moved each cursor from its range's start to its end.
        const uint32_t start = count != 0 ? runs.cursors[s] - count : 0;
        for (uint32_t pending = __ballot_sync(kFullWarp, count != 0); pending != 0; pending &= pending - 1) {
            const uint32_t src = __ffs(pending) - 1;
            append_run<Shape>(p, allocator, __shfl_sync(kFullWarp, bucket, src), __shfl_sync(kFullWarp, start, src),
                              __shfl_sync(kFullWarp, count, src));
        }
    }
}

}  // namespace gh
