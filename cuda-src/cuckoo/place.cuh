// The lock-free first pass of a DyHash insert batch: every lane puts its own
// pair into an empty slot of one of its buckets with a CAS, or leaves it
// pending for the evicting pass (evict.cuh) when all its buckets are full.
#pragma once

#include "cuckoo/probe.cuh"

namespace gh_cuckoo {

constexpr uint32_t kPlacePerThread = GH_CUCKOO_PLACE_PER_THREAD;

// The rest of a split pair whose key slot was just claimed: `head` (its first
// word, read before the claim so that the store need not wait for it), then the
// other words. (A packed pair's CAS wrote its value with the key.)
template <typename L>
__device__ __forceinline__ void store_value(const GhCuckooSubtable &sub, uint64_t bucket, uint32_t slot,
                                            uint32_t head, const uint32_t *value, uint32_t words) {
    uint32_t *dst = sub.values + slot_index<L>(bucket, slot) * words;
    dst[0] = head;
    copy_value(dst, value, words, 1, 1);
}

// A lane places its own pair: an empty slot of the first of its d buckets, in
// probe order, that has one (GH_CUCKOO_DONE), unless an equal key is there
// already or takes the slot first (GH_CUCKOO_DUPLICATE); GH_CUCKOO_PENDING when
// all are full. Slots are tried in the key's order (first_in_order), so two
// equal keys aim at the same slot and the second sees the first or loses the
// CAS to it. The first bucket is read by halves, home half first (at low loads
// it takes the pair), or, with `quarter_first`, by its home quarter before that
// (one sector); later buckets come at high loads, where the whole line is
// usually needed. Copies of a key may read different parts (a batch's first
// pairs read quarters first, its later ones not), but the key's slot order puts
// the home quarter, then the home half, ahead of the rest (first_in_order), and
// slots only fill during this pass, so whichever parts a copy read, it aims at
// the slot a copy that read more would aim at.
// Losing the CAS to another key means the bucket gained a pair: read again. The
// CAS claims the slot word: the key (split), or key and value at once (packed),
// expecting the empty word. `placed` names the subtable that took the pair.
template <typename L>
__device__ uint8_t place_pair(const GhCuckooSubtable *subs, uint32_t d, uint32_t first, uint32_t start,
                              typename L::Key key, const uint32_t *value, uint32_t words, bool quarter_first,
                              uint32_t &placed) {
    using W = typename L::Word;
    const uint32_t head = __ldg(value);
    const W claim = L::word_of(key, head);
    for (uint32_t j = 0; j < d; ++j) {
        const uint32_t s = probe_subtable(first, j, d);
        const GhCuckooSubtable &sub = subs[s];
        const uint64_t bucket = bucket_of(sub, key);
        Part part = j > 0 ? Part::kLine : quarter_first ? Part::kHomeQuarter : Part::kHomeHalf;
        while (true) {
            const auto seen = look_alone<L>(sub, bucket, start, part, true, key);
            if (seen.key != 0) return GH_CUCKOO_DUPLICATE;
            if (seen.empty == 0) {
                if (part == Part::kHomeQuarter) {
                    part = Part::kHomeHalf;
                } else if (part == Part::kHomeHalf) {
                    part = Part::kOtherHalf;
                } else {
                    break;
                }
                continue;
            }
            const uint32_t slot = first_in_order<L>(seen.empty, start);
            const W held = Words<W>::cas(slot_word<L>(sub, bucket, slot), L::kEmptyWord, claim);
            if (held == L::kEmptyWord) {
                if constexpr (!L::kPacked) store_value<L>(sub, bucket, slot, head, value, words);
                placed = s;
                return GH_CUCKOO_DONE;
            }
            if (L::key_of(held) == key) return GH_CUCKOO_DUPLICATE;
        }
    }
    return GH_CUCKOO_PENDING;
}

// What became of one pair of the place pass.
struct Placed {
    uint8_t status;
    uint32_t subtable;  // the one that took it, or kMaxSub
};

// One pair of the place pass: status[i] says what became of it.
template <typename L>
__device__ __forceinline__ Placed place_one(const GhCuckooPlaceParams &p, const GhCuckooSubtable *subs, uint64_t i) {
    Placed out{GH_CUCKOO_DONE, kMaxSub};
    if (p.skip == nullptr || p.skip[i] == 0) {
        using K = typename L::Key;
        const K key = static_cast<const K *>(p.keys)[i];
        const uint32_t words = p.table.value_words, d = p.table.subtables;
        // The reserved key goes to the side slot, which the insert kernel writes.
        out.status = GH_CUCKOO_PENDING;
        if (key != Keys<K>::kEmpty) {
            out.status = place_pair<L>(subs, d, start_of(p.home, d, key).first, home_slot<L>(key, p.home.seed), key,
                                       p.values + i * words, words, i < p.quarter_until, out.subtable);
        }
    }
    p.status[i] = out.status;
    return out;
}

// Pair i joins the pending list for the evicting pass. Every lane of the warp
// calls it, so that the list's counter takes one atomic a warp: at high loads
// many pairs are left, and one atomic each on one word queued behind each other.
template <typename L>
__device__ __forceinline__ void keep_pending(const GhCuckooPlaceParams &p, uint64_t i, bool pending) {
    const uint64_t at = warp_reserve(p.pending, pending);
    if (!pending) return;
    using K = typename L::Key;
    const uint32_t words = p.table.value_words;
    static_cast<K *>(p.pending_keys)[at] = static_cast<const K *>(p.keys)[i];
    for (uint32_t w = 0; w < words; ++w) p.pending_values[at * words + w] = p.values[i * words + w];
}

// Blocks take chunks of the batch in order from a shared cursor, so the pairs in
// flight at any time are one stretch of the batch: sorted by partition, that is a
// few partitions, whose lines stay in L2 while their pairs go in.
template <typename L>
__device__ void place(const GhCuckooPlaceParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ BlockCounts counts;
    __shared__ unsigned long long chunk;
    counts.init();
    stage_subtables(p.table, subs);
    uint64_t duplicates = 0;
    const uint64_t chunk_pairs = (uint64_t)blockDim.x * kPlacePerThread;
    while (true) {
        if (threadIdx.x == 0) chunk = atomicAdd(reinterpret_cast<unsigned long long *>(p.cursor), chunk_pairs);
        __syncthreads();
        const uint64_t first = chunk;
        __syncthreads();
        if (first >= p.count) break;
#pragma unroll 1
        for (uint32_t j = 0; j < kPlacePerThread; ++j) {
            const uint64_t i = first + (uint64_t)j * blockDim.x + threadIdx.x;
            Placed placed{GH_CUCKOO_DONE, kMaxSub};
            if (i < p.count) placed = place_one<L>(p, subs, i);
            duplicates += placed.status == GH_CUCKOO_DUPLICATE ? 1 : 0;
            counts.add_warp(placed.subtable, 1);
            keep_pending<L>(p, i, i < p.count && placed.status == GH_CUCKOO_PENDING);
        }
    }
    warp_add(p.duplicates, duplicates);
    counts.flush(p.table.counts, p.table.subtables);
}

}  // namespace gh_cuckoo
