// Where a DyHash key goes and the order it probes: its bucket in a subtable,
// its first subtable (set by the home policy, GhCuckooHome), the subtables after
// it, and within every bucket its home slot, home half first. Inserts,
// evictions, lookups and resizes all follow it.
#pragma once

#include "cuckoo/state.cuh"

namespace gh_cuckoo {

// H mod buckets for 32-bit H, exact for buckets < 2^32 (Lemire, Kaser, Kurz).
__device__ __forceinline__ uint64_t fastmod(uint32_t h, uint64_t magic, uint64_t buckets) {
    return __umul64hi(magic * (uint64_t)h, buckets);
}

template <typename K>
__device__ __forceinline__ uint64_t bucket_of(const GhCuckooSubtable &s, K key) {
    return fastmod(Keys<K>::hash(key, s.hash_a, s.hash_b), s.fastmod, s.buckets);
}

// The slot a key tries first in every bucket of it: fixed for the key, so that
// two equal keys aim at the same slot whatever else they saw, while different
// keys spread over the bucket instead of racing for its first empty slot.
template <typename L>
__device__ __forceinline__ uint32_t home_slot(typename L::Key key, uint32_t seed) {
    return Keys<typename L::Key>::choice(key, ~seed) % L::kSlots;
}

// The first slot with a bit in `all` (bit i for slot i) in the order a key
// tries a bucket's slots: its home quarter (the 32 bytes holding home_slot)
// going round from the home slot, the other quarter of its home half, then the
// other half's quarters, each from the same offset. Keys placed in this order
// are mostly found by reading the home half alone. The order puts every part a
// place pass may read first (the home quarter, the home half) ahead of the rest,
// so a lane that read only such a part picks the slot that a lane that read
// more would pick: two copies of a key agree on their slot whatever parts they
// read (place.cuh).
template <typename L>
__device__ __forceinline__ uint32_t first_in_order(uint32_t all, uint32_t start) {
    constexpr uint32_t HS = L::kHalfSlots, QS = HS / 2;
    constexpr uint32_t mask = (1u << QS) - 1u;
    const uint32_t home_half = start / HS, home_quarter = (start % HS) / QS, offset = start % QS;
#pragma unroll
    for (uint32_t k = 0; k < 2 * kHalves; ++k) {
        const uint32_t base = ((home_half + k / 2) % kHalves) * HS + ((home_quarter + k % 2) % 2) * QS;
        const uint32_t bits = (all >> base) & mask;
        if (bits != 0) {
            const uint32_t rotated = ((bits >> offset) | (bits << (QS - offset))) & mask;
            return base + (offset + __ffs(rotated) - 1) % QS;
        }
    }
    return L::kSlots;
}

// Where a key starts, and whether a lookup of it may stop at a clean bucket with
// an empty slot (its choice is settled: GhCuckooHome).
struct Start {
    uint32_t first;
    bool settled;
};

template <typename K>
__device__ __forceinline__ Start start_of(const GhCuckooHome &home, uint32_t d, K key) {
    const uint32_t r = Keys<K>::choice(key, home.seed);
    uint32_t s = 0;
    while (s + 1 < d && r >= home.thresholds[s]) ++s;
    return {s, r >= home.settled_lo[s] && r <= home.settled_hi[s]};
}

// The j-th subtable of the probe order of a key that starts in `first`: from
// there round by index, so that an evicted pair moves on to the next subtable
// whatever its start (one direction for all; with the start's position kept but
// the others by index, a 2^26-pair build of u64 keys at load 0.95 ran out of
// evictions on an H100). Inserts, evictions and lookups all follow this order.
__device__ __forceinline__ uint32_t probe_subtable(uint32_t first, uint32_t j, uint32_t d) {
    return first + j < d ? first + j : first + j - d;
}

// Where subtable s comes in that order.
__device__ __forceinline__ uint32_t probe_position(uint32_t first, uint32_t s, uint32_t d) {
    return s >= first ? s - first : s + d - first;
}

// `pos`, or the position after it when that is the excluded subtable: the key
// passes its bucket there, full or not, so that bucket turns dirty.
template <typename K>
__device__ __forceinline__ uint32_t skip_excluded(const GhCuckooSubtable *subs, uint32_t d, uint32_t exclude,
                                                  uint32_t first, uint32_t pos, K key) {
    const uint32_t s = probe_subtable(first, pos, d);
    if (s != exclude) return pos;
    mark_dirty(subs[s], bucket_of(subs[s], key));
    return pos + 1 == d ? 0 : pos + 1;
}

}  // namespace gh_cuckoo
