// Updating DyHash keys in place: new values for keys the table holds (the
// insert path's first step for keys a lookup found), under the bucket lock.
#pragma once

#include "cuckoo/locate.cuh"

namespace gh_cuckoo {

template <typename L>
__device__ void update(const GhCuckooUpdateParams &p) {
    using K = typename L::Key;
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const uint32_t words = p.table.value_words;
    const K *keys = static_cast<const K *>(p.keys);
    for (uint64_t i = tile_index(); i < p.count; i += tile_count()) {
        if (p.found[i] != p.select) continue;
        const K key = keys[i];
        const uint32_t *value = p.values + i * words;
        uint32_t *old = p.old_values == nullptr ? nullptr : p.old_values + i * words;
        if (key == Keys<K>::kEmpty) {
            if (t.rank == 0) {
                uint32_t v[kMaxWords];
#pragma unroll
                for (uint32_t w = 0; w < kMaxWords; ++w) v[w] = w < words ? value[w] : 0u;
                side_write(p.table.side, v, words, old);
            }
            continue;
        }
        uint32_t s, slot;
        uint64_t bucket;
        if (!locate<L>(t, subs, p.table.subtables, key, false, &s, &bucket, &slot)) continue;
        // Keys do not move in this kernel, so a bucket's lock is held by a copy of one
        // of its keys, and the lock word names the slot (+ 1) that copy writes. The lock
        // makes one whole value win; any copy's may, so a copy that finds its own slot
        // being written leaves it to that copy. Copies of a hot key would otherwise
        // queue for the lock one at a time, each turn slowed by all the others' atomics.
        uint32_t *lock = subs[s].locks + bucket;
        uint32_t holder = 0;
        do {
            if (t.rank == 0) holder = lock_as(lock, slot + 1);
            holder = t.shfl(holder, 0);
        } while (holder != 0 && holder != slot + 1);
        if (holder != 0) continue;
        if constexpr (L::kPacked) {
            // The whole pair in one store: lookups of the batch's other keys may read
            // the bucket meanwhile, and must see the old pair or the new, never half.
            if (t.rank == 0) {
                typename L::Word *word = slot_word<L>(subs[s], bucket, slot);
                if (old != nullptr) old[0] = L::value_of(__ldcg(word));
                *word = L::word_of(key, value[0]);
            }
        } else {
            uint32_t *dst = subs[s].values + slot_index<L>(bucket, slot) * words;
            for (uint32_t w = t.rank; w < words; w += kTile) {
                if (old != nullptr) old[w] = __ldcg(dst + w);
                dst[w] = value[w];
            }
        }
        // Every lane's writes reach the device before the lock opens.
        __threadfence();
        __syncwarp(t.mask);
        if (t.rank == 0) unlock(lock);
    }
}

}  // namespace gh_cuckoo
