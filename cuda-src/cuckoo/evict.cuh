// The evicting pass of a DyHash insert: tiles place pairs under bucket locks,
// with voter coordination (one lane's pair at a time, lanes whose lock failed
// sitting out), swapping with a resident of a full bucket (one whose next
// bucket has room, where the tile sees one), which moves on in its probe
// order; pairs homeless after the eviction bound go back to the host.
#pragma once

#include "cuckoo/probe.cuh"

namespace gh_cuckoo {

// Writes a pair into slot `slot` of a bucket the caller holds the lock of: the
// value words, then the key word (split), or the whole pair in one 64-bit store
// (packed), so that no reader of the slot sees a key with half a value.
template <typename L, uint32_t MaxW>
__device__ __forceinline__ void write_pair(const GhCuckooSubtable &st, uint64_t bucket, uint32_t slot,
                                           typename L::Key key, const uint32_t (&value)[MaxW], uint32_t words,
                                           bool with_key) {
    typename L::Word *kslot = slot_word<L>(st, bucket, slot);
    if constexpr (L::kPacked) {
        *kslot = L::word_of(key, value[0]);
    } else {
        uint32_t *vslot = st.values + slot_index<L>(bucket, slot) * words;
#pragma unroll
        for (uint32_t w = 0; w < MaxW; ++w) {
            if (w < words) vslot[w] = value[w];
        }
        if (with_key) *kslot = key;
    }
}

// Takes out the value of the pair in a slot (its word `resident`) into `value`.
template <typename L, uint32_t MaxW>
__device__ __forceinline__ void take_value(const GhCuckooSubtable &st, uint64_t bucket, uint32_t slot,
                                           typename L::Word resident, uint32_t (&value)[MaxW], uint32_t words) {
    if constexpr (L::kPacked) {
        value[0] = L::value_of(resident);
    } else {
        const uint32_t *vslot = st.values + slot_index<L>(bucket, slot) * words;
#pragma unroll
        for (uint32_t w = 0; w < MaxW; ++w) {
            if (w < words) value[w] = __ldcg(vslot + w);
        }
    }
}

// The slot of a full bucket (in subtable `sub`, read by the tile as `slice`)
// whose resident the carried pair swaps out; the resident then moves on in its
// probe order. Each lane offers one resident of its slice, picked by `r`, and
// reads the bucket that resident would move to: the first offer whose bucket
// has an empty slot is taken, so the chain of swaps mostly ends with it; when
// none has, a random offer is (a random walk). A blind choice made a quarter more
// swaps at load 0.8 (2^22 pairs) and two thirds more at 0.95.
template <typename L>
__device__ __forceinline__ uint32_t victim_slot(const Tile &t, const GhCuckooSubtable *subs, uint32_t d,
                                                uint32_t exclude, const GhCuckooHome &home,
                                                const typename L::Word (&slice)[L::kPerLane], uint32_t sub,
                                                uint32_t r) {
    constexpr uint32_t P = L::kPerLane;
    const uint32_t j = (r + t.rank * 7u) % P;
    const typename L::Key resident = L::key_of(pick(slice, j));
    const uint32_t first = start_of(home, d, resident).first;
    uint32_t next = probe_position(first, sub, d) + 1;
    if (next == d) next = 0;
    if (probe_subtable(first, next, d) == exclude) next = next + 1 == d ? 0 : next + 1;
    const GhCuckooSubtable &to = subs[probe_subtable(first, next, d)];
    const bool room = look_alone<L>(to, bucket_of(to, resident), 0, Part::kLine, true, resident).empty != 0;
    const uint32_t offers = t.ballot(room);
    const uint32_t lane = offers != 0 ? __ffs(offers) - 1 : (r >> 16) % kTile;
    return lane * P + t.shfl(j, lane);
}

// Tiles a pair of the evicting pass takes when the launch has `ratio` tiles a
// pair: a power of two, at most a warp's tiles.
__device__ __forceinline__ uint64_t spread_of(uint64_t ratio) {
    const uint64_t most = min(ratio, (uint64_t)(32 / kTile));
    return most <= 1 ? 1 : 1ull << (63 - __clzll(most));
}

// MaxW: most value words a lane carries; 1 for the common 4-byte values, which
// saves registers and raises occupancy (and the only width packed buckets hold).
template <typename L, uint32_t MaxW>
__device__ void insert(const GhCuckooInsertParams &p) {
    using K = typename L::Key;
    using W = typename L::Word;
    static_assert(!L::kPacked || MaxW == 1, "a packed pair holds one value word");
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ BlockCounts counts;
    counts.init();
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const uint32_t words = p.table.value_words;
    const uint32_t d = p.table.subtables;
    constexpr uint32_t S = L::kSlots;
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t count = p.count_at != nullptr ? min(*p.count_at, p.count) : p.count;
    // Each lane of a tile owns one pair of its chunk. Few pairs (the place pass
    // leaves a few thousand at load 0.8, 2^22 pairs) go one a tile, and spread
    // to one tile a warp where the launch has the tiles: packed into the first
    // warps, their locked steps would run in turn, as a warp's diverging tiles
    // do, and the longest warp sets the pass's time.
    const uint64_t tiles = tile_count();
    const uint32_t per_chunk = count <= tiles ? 1 : kTile;
    const uint64_t spread = per_chunk == 1 ? spread_of(tiles / (count > 0 ? count : 1)) : 1;
    const uint64_t chunks = (count + per_chunk - 1) / per_chunk;

    for (uint64_t c = tile_index(); c < chunks * spread; c += tiles) {
        if (c % spread != 0) continue;
        const uint64_t i = c / spread * per_chunk + t.rank;
        bool active = t.rank < per_chunk && i < count && (p.skip == nullptr || p.skip[i] == 0);
        K key = Keys<K>::kEmpty;
        uint32_t value[MaxW];
        // The carried key's first subtable, and where in its probe order it is.
        uint32_t first = 0, pos = 0;
        uint32_t evictions = 0;
#pragma unroll
        for (uint32_t w = 0; w < MaxW; ++w) value[w] = (active && w < words) ? p.values[i * words + w] : 0u;
        if (active) {
            key = keys[i];
            if (key == Keys<K>::kEmpty) {
                side_write(p.table.side, value, words, nullptr);
                active = false;
            } else {
                first = start_of(p.home, d, key).first;
                pos = skip_excluded(subs, d, p.exclude, first, 0, key);
            }
        }

        // Voter coordination: lanes whose lock failed sit out the next votes
        // until every pending lane has failed once.
        uint32_t failed = 0;
        while (true) {
            const uint32_t pending = t.ballot(active);
            if (pending == 0) break;
            uint32_t voters = pending & ~failed;
            if (voters == 0) {
                failed = 0;
                voters = pending;
            }
            const uint32_t leader = __ffs(voters) - 1;
            const bool lead = t.rank == leader;
            const K lkey = t.shfl(key, leader);
            const uint32_t lsub = t.shfl(probe_subtable(first, pos, d), leader);
            const GhCuckooSubtable &st = subs[lsub];
            const uint64_t bucket = bucket_of(st, lkey);
            uint32_t *lock = st.locks + bucket;
            bool locked = false;
            if (lead) locked = try_lock(lock);
            locked = t.shfl(locked, leader);
            if (!locked) {
                failed |= 1u << leader;
                continue;
            }
            W slice[L::kPerLane];
            load_slice<L>(st, bucket, t.rank, true, slice);
            uint32_t slot = first_slot<L>(t, match_bits<L>(slice, lkey));
            const bool replace = slot < S;
            bool place = false;
            if (!replace) {
                const uint32_t empty = bucket_bits(t, empty_bits<L>(slice), L::kPerLane, 0);
                slot = first_in_order<L>(empty, home_slot<L>(lkey, p.home.seed));
                place = slot < S;
            }
            if (!replace && !place) {
                const uint32_t lev = t.shfl(evictions, leader);
                const uint32_t r = gh_fmix32((uint32_t)lkey ^ (uint32_t)(lkey >> 16) ^ (lev * 0x9e3779b9u) ^ p.salt);
                slot = victim_slot<L>(t, subs, d, p.exclude, p.home, slice, lsub, r);
            }
            const W resident = tile_word(t, slice, 0, slot);
            if (lead) {
                if (replace || place) {
                    write_pair<L>(st, bucket, slot, key, value, words, place);
                    if (place) counts.add(lsub, 1);
                    active = false;
                } else {
                    // The swap: the resident's whole pair out, the carried pair in.
                    uint32_t out[MaxW];
                    take_value<L>(st, bucket, slot, resident, out, words);
                    write_pair<L>(st, bucket, slot, key, value, words, true);
#pragma unroll
                    for (uint32_t w = 0; w < MaxW; ++w) {
                        if (w < words) value[w] = out[w];
                    }
                    key = L::key_of(resident);
                    first = start_of(p.home, d, key).first;
                    const uint32_t next = probe_position(first, lsub, d) + 1;
                    pos = skip_excluded(subs, d, p.exclude, first, next == d ? 0 : next, key);
                    ++evictions;
                    const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.log_count), 1ull);
                    if (at < p.log_capacity) static_cast<K *>(p.log_keys)[at] = key;
                }
                // The release store orders the leader's writes before the lock opens.
                unlock(lock);
                if (active && evictions > p.max_evictions) {
                    // Homeless after the eviction bound: keep the pair for the host.
                    const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.failed_count), 1ull);
                    static_cast<K *>(p.failed_keys)[at] = key;
#pragma unroll
                    for (uint32_t w = 0; w < MaxW; ++w) {
                        if (w < words) p.failed_values[at * words + w] = value[w];
                    }
                    active = false;
                }
            }
            failed = 0;
        }
    }
    counts.flush(p.table.counts, d);
}

}  // namespace gh_cuckoo
