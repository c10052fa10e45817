// Removing DyHash keys: every copy, the first, or all but the first (the
// duplicates an insert batch left), each emptied with a CAS; a bucket that
// lost a key turns dirty.
#pragma once

#include "cuckoo/probe.cuh"

namespace gh_cuckoo {

// Empties the copies of `key` that `copies` names (GH_CUCKOO_REMOVE_*). Returns
// slots emptied (on rank 0).
// Empties a slot holding `key` (its word was `seen`) with a CAS of the whole
// word, so that a copy of the key racing here empties it once; true when this
// call emptied it. A packed pair's value may have changed since it was read:
// then the CAS retries with the word it found while that still holds the key.
template <typename L>
__device__ __forceinline__ bool clear_slot(typename L::Word *slot, typename L::Key key, typename L::Word seen) {
    while (true) {
        const typename L::Word held = Words<typename L::Word>::cas(slot, seen, L::kEmptyWord);
        if (held == seen) return true;
        if (L::key_of(held) != key) return false;
        seen = held;
    }
}

template <typename L>
__device__ uint32_t remove_copies(const Tile &t, const GhCuckooSubtable *subs, uint32_t d, typename L::Key key,
                                  uint32_t copies, BlockCounts &counts) {
    bool seen = false;
    uint32_t removed = 0;
    for (uint32_t s = 0; s < d; ++s) {
        const uint64_t bucket = bucket_of(subs[s], key);
        typename L::Word slice[L::kPerLane];
        load_slice<L>(subs[s], bucket, t.rank, true, slice);
        const uint32_t slot = first_slot<L>(t, match_bits<L>(slice, key));
        if (slot == L::kSlots) continue;
        const typename L::Word word = tile_word(t, slice, 0, slot);
        const bool keep = copies == GH_CUCKOO_REMOVE_DUPLICATES && !seen;
        if (!keep && t.rank == 0) {
            if (clear_slot<L>(slot_word<L>(subs[s], bucket, slot), key, word)) {
                // Keys may have gone past this bucket while it was full.
                mark_dirty(subs[s], bucket);
                counts.add(s, -1);
                ++removed;
            }
        }
        seen = true;
        if (copies == GH_CUCKOO_REMOVE_FIRST) break;
    }
    return removed;
}

// The last block of the launch to finish writes the table's counts and the side
// slot's flag into `report` (GH_CUCKOO_REPORT_*): every block's count changes are in
// by then, so the host reads a batch's counters and the table's counts in one copy
// after its last launch instead of three.
__device__ __forceinline__ void report_when_done(const GhCuckooTable &table, uint64_t *report) {
    __shared__ bool last;
    // This block's count changes (flushed just before) come ahead of its done mark.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        auto *done = reinterpret_cast<unsigned long long *>(report + GH_CUCKOO_REPORT_DONE);
        last = atomicAdd(done, 1ull) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const auto *counts = reinterpret_cast<const unsigned long long *>(table.counts);
    if (threadIdx.x < table.subtables) report[threadIdx.x] = __ldcg(counts + threadIdx.x);
    if (threadIdx.x == 0) {
        report[GH_CUCKOO_REPORT_SIDE] = __ldcg(table.side + GH_CUCKOO_SIDE_PRESENT) != 0 ? 1 : 0;
        report[GH_CUCKOO_REPORT_DONE] = 0;
    }
}

template <typename L>
__device__ void remove(const GhCuckooRemoveParams &p) {
    using K = typename L::Key;
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ BlockCounts counts;
    counts.init();
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t count = p.count_at != nullptr ? min(*p.count_at, p.count) : p.count;
    for (uint64_t i = tile_index(); i < count; i += tile_count()) {
        uint32_t removed = 0;  // on rank 0
        const K key = keys[i];
        if (p.skip != nullptr && p.skip[i] != 0) {
            // Not this launch's to remove.
        } else if (key == Keys<K>::kEmpty) {
            // The side slot holds one copy at most.
            if (p.copies != GH_CUCKOO_REMOVE_DUPLICATES && t.rank == 0 &&
                atomicExch(p.table.side + GH_CUCKOO_SIDE_PRESENT, 0u) != 0) {
                removed = 1;
            }
        } else {
            removed = remove_copies<L>(t, subs, p.table.subtables, key, p.copies, counts);
        }
        if (p.removed_out != nullptr && t.rank == 0) p.removed_out[i] = removed != 0 ? 1 : 0;
    }
    counts.flush(p.table.counts, p.table.subtables);
    if (p.report != nullptr) report_when_done(p.table, p.report);
}

}  // namespace gh_cuckoo
