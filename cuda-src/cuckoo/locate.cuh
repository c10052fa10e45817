// Finding DyHash keys: a tile's search of every subtable (for writers), and the
// batch lookup, where a lane first reads its key's home half alone and the tile
// together searches the rest for the keys not found there. With packed buckets
// the home half holds the value too, so most hits read one half line.
#pragma once

#include "cuckoo/probe.cuh"

namespace gh_cuckoo {

// Where `key` sits: subtable in *sub_out, bucket in *bucket_out, slot in
// *slot_out; false if absent.
template <typename L>
__device__ bool locate(const Tile &t, const GhCuckooSubtable *subs, uint32_t d, typename L::Key key, bool coherent,
                       uint32_t *sub_out, uint64_t *bucket_out, uint32_t *slot_out) {
    for (uint32_t s = 0; s < d; ++s) {
        const uint64_t bucket = bucket_of(subs[s], key);
        typename L::Word slice[L::kPerLane];
        load_slice<L>(subs[s], bucket, t.rank, coherent, slice);
        const uint32_t slot = first_slot<L>(t, match_bits<L>(slice, key));
        if (slot < L::kSlots) {
            *sub_out = s;
            *bucket_out = bucket;
            *slot_out = slot;
            return true;
        }
    }
    return false;
}

// The tile's search for a key that the home half of its first bucket (`bucket`
// in subtable `first`, home slot `start`) does not hold: first the other half of
// that bucket together with the whole second bucket (at the loads where a key is
// not in its home half, a miss mostly needs both, so one round trip serves
// them), then the other buckets in probe order, up to a clean bucket with an
// empty slot when the key is settled. Copies the value to `out` (when not null)
// if found.
template <typename L>
__device__ bool find_rest(const Tile &t, const GhCuckooSubtable *subs, uint32_t d, uint32_t first, uint64_t bucket,
                          uint32_t start, bool settled, typename L::Key key, uint32_t *out, uint32_t words) {
    using W = typename L::Word;
    constexpr uint32_t HS = L::kHalfSlots;
    constexpr uint32_t PH = L::kPerLaneInHalf;
    constexpr uint32_t P = L::kPerLane;
    const uint32_t other = 1 - start / HS;
    const GhCuckooSubtable *where = &subs[first];
    W half[PH];
    W line[P];
    load_half<L>(*where, bucket, other, t.rank, false, half);
    const GhCuckooSubtable &second = subs[probe_subtable(first, 1, d)];  // d is at least 2
    const uint64_t second_bucket = bucket_of(second, key);
    load_slice<L>(second, second_bucket, t.rank, false, line);
    uint32_t bits = bucket_bits(t, match_bits<L>(half, key), PH, other * HS);
    uint32_t empty = bucket_bits(t, empty_bits<L>(half), PH, other * HS);
    // A packed hit's value is in the word the tile read: which piece holds it.
    bool in_half = true;
    for (uint32_t j = 1; j < d; ++j) {
        // The dirty bit is read only when needed: reading it along with the keys made
        // misses at loads 0.8 to 0.95 4 to 5% faster on an H100 but hits 2% slower.
        if (bits != 0 || (settled && empty != 0 && !is_dirty(*where, bucket, false))) break;
        where = &subs[probe_subtable(first, j, d)];
        bucket = j == 1 ? second_bucket : bucket_of(*where, key);
        if (j > 1) load_slice<L>(*where, bucket, t.rank, false, line);
        bits = bucket_bits(t, match_bits<L>(line, key), P, 0);
        empty = bucket_bits(t, empty_bits<L>(line), P, 0);
        in_half = false;
    }
    if (bits != 0 && out != nullptr) {
        const uint32_t slot = __ffs(bits) - 1;
        W hit = L::kEmptyWord;
        if constexpr (L::kPacked) hit = in_half ? tile_word(t, half, other * HS, slot) : tile_word(t, line, 0, slot);
        copy_slot_value<L>(out, *where, bucket, slot, hit, words, t.rank, kTile);
    }
    return bits != 0;
}

// Where a batch lookup looks each key up: OneTable, the table of a find (its
// subtables staged in shared memory), or Routed, the table each key names.
struct OneTable {
    static constexpr bool kRouted = false;
    const GhCuckooFindParams &p;
    const GhCuckooSubtable *staged;
    __device__ __forceinline__ bool route(uint64_t, uint32_t *r) const {
        *r = 0;
        return true;
    }
    __device__ __forceinline__ const GhCuckooTable &table(uint32_t) const { return p.table; }
    __device__ __forceinline__ const GhCuckooHome &home(uint32_t) const { return p.home; }
    __device__ __forceinline__ const GhCuckooSubtable *subs(uint32_t) const { return staged; }
};

// The routes' views are read from global memory, through L1: a key's table is known only
// once its route is read, and a batch spreads over every route.
struct Routed {
    static constexpr bool kRouted = true;
    const GhCuckooFindRoutedParams &p;
    __device__ __forceinline__ bool route(uint64_t i, uint32_t *r) const {
        *r = p.route_of[i];
        return *r < p.route_count;
    }
    __device__ __forceinline__ const GhCuckooTable &table(uint32_t r) const { return p.routes[r].table; }
    __device__ __forceinline__ const GhCuckooHome &home(uint32_t r) const { return p.routes[r].home; }
    __device__ __forceinline__ const GhCuckooSubtable *subs(uint32_t r) const { return p.routes[r].table.sub; }
};

// The answers a batch lookup writes: found flags (may be null), values where found (may be
// null), and a count of hits (may be null).
struct FindOut {
    uint32_t *values;
    uint8_t *found;
    uint64_t *hits;
    uint32_t words;
};

// Tiles first_tile, first_tile + tiles, ... of the launch look up keys[0..count) where
// `where` says (a launch that serves several tables gives each table its own tiles:
// find_many). A key with no route is not looked up, and its answer not written.
template <typename L, typename Where>
__device__ void find_keys(const Where &where, const typename L::Key *keys, uint64_t count, const FindOut &out,
                          uint64_t first_tile, uint64_t tiles) {
    const Tile t = Tile::mine();
    using K = typename L::Key;
    uint64_t hits = 0;
    const uint64_t chunks = (count + kTile - 1) / kTile;
    for (uint64_t c = first_tile; c < chunks; c += tiles) {
        // Each lane first looks for its own key alone in the home half of the bucket
        // in the subtable the key would start in now, where most pairs rest. (L2
        // prefetches cost finds on an H100: of that bucket up front, 3 to 5%, as lines
        // fetched early are evicted before their turn comes; of what the tile reads
        // next, once the lane missed, a quarter of the misses' speed.)
        const uint64_t mine = c * kTile + t.rank;
        const K my_key = mine < count ? keys[mine] : Keys<K>::kEmpty;
        uint32_t my_route = 0;
        const bool routed = mine < count && where.route(mine, &my_route);
        uint32_t my_found = 0;
        bool tile_next = false;
        Start from = {0, false};
        uint32_t start = 0;
        uint64_t bucket = 0;
        if (routed && my_key != Keys<K>::kEmpty) {
            const GhCuckooHome &home = where.home(my_route);
            from = start_of(home, where.table(my_route).subtables, my_key);
            const GhCuckooSubtable &sub = where.subs(my_route)[from.first];
            bucket = bucket_of(sub, my_key);
            start = home_slot<L>(my_key, home.seed);
            const auto seen = look_alone<L>(sub, bucket, start, Part::kHomeHalf, false, my_key);
            if (seen.key != 0) {
                my_found = 1;
                if (out.values != nullptr) {
                    copy_slot_value<L>(out.values + mine * out.words, sub, bucket, __ffs(seen.key) - 1, seen.hit,
                                       out.words, 0, 1);
                }
            } else {
                // An empty slot in a clean home half: the key never went past it.
                tile_next = !(from.settled && seen.empty != 0 && !is_dirty(sub, bucket, false));
            }
        } else {
            tile_next = routed;
        }
        // The rest, the tile together: the other buckets, or the side slot.
        uint32_t turns = t.ballot(tile_next);
        while (turns != 0) {
            const uint32_t q = __ffs(turns) - 1;
            turns &= turns - 1;
            const uint64_t i = c * kTile + q;
            const K key = t.shfl(my_key, q);
            uint32_t r = 0;
            if constexpr (Where::kRouted) r = t.shfl(my_route, q);
            const GhCuckooTable &table = where.table(r);
            uint32_t *value_out = out.values == nullptr ? nullptr : out.values + i * out.words;
            bool found = false;
            if (key == Keys<K>::kEmpty) {
                found = __ldcg(table.side + GH_CUCKOO_SIDE_PRESENT) != 0;
                if (found && value_out != nullptr) {
                    copy_value(value_out, table.side + GH_CUCKOO_SIDE_VALUE, out.words, t.rank, kTile);
                }
            } else {
                found = find_rest<L>(t, where.subs(r), table.subtables, t.shfl(from.first, q), t.shfl(bucket, q),
                                     t.shfl(start, q), t.shfl((uint32_t)from.settled, q) != 0, key, value_out,
                                     out.words);
            }
            if (t.rank == q) my_found = found ? 1 : 0;
        }
        if (routed) {
            if (out.found != nullptr) out.found[mine] = (uint8_t)my_found;
            hits += my_found;
        }
    }
    if (out.hits != nullptr) warp_add(out.hits, hits);
}

// The lookup of one table, by tiles first_tile, first_tile + tiles, ... of the launch.
template <typename L>
__device__ void find(const GhCuckooFindParams &p, uint64_t first_tile = tile_index(), uint64_t tiles = tile_count()) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    const FindOut out = {p.values_out, p.found_out, p.hits, p.table.value_words};
    find_keys<L>(OneTable{p, subs}, static_cast<const typename L::Key *>(p.keys), p.count, out, first_tile, tiles);
}

// A lookup whose keys each name their table (GhCuckooFindRoutedParams).
template <typename L>
__device__ void find_routed(const GhCuckooFindRoutedParams &p) {
    const FindOut out = {p.values_out, p.found_out, nullptr, p.value_words};
    find_keys<L>(Routed{p}, static_cast<const typename L::Key *>(p.keys), p.count, out, tile_index(), tile_count());
}

// The lookups of several tables of one layout in one launch, blocks_per_part blocks a
// table: each block stages its table's parameters in shared memory, so a batch spread over
// many small tables pays one launch, not one a table. The launch may hold fewer blocks
// than parts * blocks_per_part (it is cut to the blocks the device keeps resident): each
// block then serves several in turn.
template <typename L>
__device__ void find_many(const GhCuckooFindManyParams &m) {
    __shared__ GhCuckooFindParams part;
    const uint64_t tiles_a_block = blockDim.x / kTile;
    const uint64_t all = (uint64_t)m.parts * m.blocks_per_part;
    for (uint64_t v = blockIdx.x; v < all; v += gridDim.x) {
        // The block's last part (and its staged subtables) is read no more.
        __syncthreads();
        if (threadIdx.x == 0) part = m.list[v / m.blocks_per_part];
        __syncthreads();
        const uint64_t block = v % m.blocks_per_part;
        find<L>(part, (block * blockDim.x + threadIdx.x) / kTile, m.blocks_per_part * tiles_a_block);
    }
}

}  // namespace gh_cuckoo
