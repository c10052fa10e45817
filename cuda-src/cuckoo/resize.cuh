// Resizing one DyHash subtable: a tile rebuilds one new bucket from two old ones
// (downsizing) or two from one (upsizing), keeping keys in their home halves;
// what finds no room goes to a residual list for the host to insert again.
// Packed words move whole: a pair's key and value are rehashed as one word.
#pragma once

#include "cuckoo/probe.cuh"

namespace gh_cuckoo {

// Moves one pair of old bucket `old_bucket` (its slot word `word`) to slot
// `slot` of new bucket `new_bucket`, or to the residual list when `slot` is
// kSlots (no room). A packed word moves whole, its value with it.
template <typename L>
__device__ __forceinline__ void move_pair(const GhCuckooResizeParams &p, uint64_t old_bucket, uint32_t old_slot,
                                          typename L::Word word, uint64_t new_bucket, uint32_t slot) {
    using K = typename L::Key;
    const uint32_t words = p.value_words;
    if (slot < L::kSlots) {
        *slot_word<L>(p.to, new_bucket, slot) = word;
        if constexpr (!L::kPacked) {
            copy_value(p.to.values + slot_index<L>(new_bucket, slot) * words,
                       p.from.values + slot_index<L>(old_bucket, old_slot) * words, words, 0, 1);
        }
    } else {
        const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.residual_count), 1ull);
        static_cast<K *>(p.residual_keys)[at] = L::key_of(word);
        copy_slot_value<L>(p.residual_values + at * words, p.from, old_bucket, old_slot, word, words, 0, 1);
    }
}

// A tile builds one new bucket (downsizing: from two old ones) or two (upsizing:
// from one) in two rounds over the old keys, so that keys rest in their home
// half wherever inserts would have put them there: first each key goes to its
// home half while that has room, then the keys that found it full go to the
// other half, and what finds no room there either is a residual. Halves are
// numbered target * 2 + half, target 1 being loc + from.buckets when upsizing.
template <typename L>
__device__ void resize(const GhCuckooResizeParams &p) {
    using K = typename L::Key;
    const Tile t = Tile::mine();
    constexpr uint32_t P = L::kPerLane;
    constexpr uint32_t HS = L::kHalfSlots;
    static_assert(2 * P <= 32, "a lane's overflow bits of two old buckets fit one word");
    const bool up = p.to.buckets > p.from.buckets;
    const uint32_t sources = up ? 1 : 2;
    const uint64_t units = up ? p.from.buckets : p.to.buckets;
    for (uint64_t u = tile_index(); u < units; u += tile_count()) {
        uint32_t used[4] = {0, 0, 0, 0};  // pairs a half was given, room or not
        uint32_t overflow = 0;            // bit src * P + j: the lane's key j went to the other half
        bool passed = false;              // an old bucket keys may have gone past: full or dirty
        for (uint32_t round = 0; round < 2; ++round) {
            if (round == 1) {
                // Most buckets have no key whose home half was full.
                if (t.ballot(overflow != 0) == 0) break;
                // The second round fills what the first left of each half.
#pragma unroll
                for (uint32_t h = 0; h < 4; ++h) used[h] = min(used[h], HS);
            }
            for (uint32_t src = 0; src < sources; ++src) {
                const uint64_t old_bucket = up ? u : u + src * p.to.buckets;
                typename L::Word slice[P];
                load_slice<L>(p.from, old_bucket, t.rank, false, slice);
                if (round == 0) {
                    const bool full = t.ballot(empty_bits<L>(slice) != 0) == 0;
                    passed = passed || full || is_dirty(p.from, old_bucket, false);
                }
#pragma unroll
                for (uint32_t j = 0; j < P; ++j) {
                    const K key = L::key_of(slice[j]);
                    const uint32_t bit = 1u << (src * P + j);
                    const bool mine = key != Keys<K>::kEmpty && (round == 0 || (overflow & bit) != 0);
                    uint32_t half = 0;
                    uint64_t new_bucket = u;
                    if (mine) {
                        if (up) new_bucket = bucket_of(p.to, key);
                        half = (new_bucket != u ? 2 : 0) + ((home_slot<L>(key, p.seed) / HS) ^ round);
                    }
                    uint32_t place = 0;
#pragma unroll
                    for (uint32_t h = 0; h < 4; ++h) {
                        const uint32_t lanes = t.ballot(mine && half == h);
                        if (mine && half == h) place = used[h] + __popc(lanes & t.lanes_below());
                        used[h] += __popc(lanes);
                    }
                    if (!mine) continue;
                    if (place < HS) {
                        move_pair<L>(p, old_bucket, t.rank * P + j, slice[j], new_bucket, (half % 2) * HS + place);
                    } else if (round == 0) {
                        overflow |= bit;
                    } else {
                        move_pair<L>(p, old_bucket, t.rank * P + j, slice[j], new_bucket, L::kSlots);
                    }
                }
            }
        }
        if (passed && t.rank == 0) {
            for (uint32_t target = 0; target < (up ? 2u : 1u); ++target) {
                if (used[2 * target] < HS || used[2 * target + 1] < HS) mark_dirty(p.to, u + target * p.from.buckets);
            }
        }
    }
}

}  // namespace gh_cuckoo
