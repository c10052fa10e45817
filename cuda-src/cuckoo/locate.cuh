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

// Tiles first_tile, first_tile + tiles, ... of the launch look up the keys (a launch
// that serves several tables gives each table its own tiles: find_many).
template <typename L>
__device__ void find(const GhCuckooFindParams &p, uint64_t first_tile = tile_index(), uint64_t tiles = tile_count()) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const uint32_t words = p.table.value_words;
    const uint32_t d = p.table.subtables;
    using K = typename L::Key;
    const K *keys = static_cast<const K *>(p.keys);
    uint64_t hits = 0;
    const uint64_t chunks = (p.count + kTile - 1) / kTile;
    for (uint64_t c = first_tile; c < chunks; c += tiles) {
        // Each lane first looks for its own key alone in the home half of the bucket
        // in the subtable the key would start in now, where most pairs rest. (L2
        // prefetches cost finds on an H100: of that bucket up front, 3 to 5%, as lines
        // fetched early are evicted before their turn comes; of what the tile reads
        // next, once the lane missed, a quarter of the misses' speed.)
        const uint64_t mine = c * kTile + t.rank;
        const K my_key = mine < p.count ? keys[mine] : Keys<K>::kEmpty;
        uint32_t my_found = 0;
        bool tile_next = false;
        Start from = {0, false};
        uint32_t start = 0;
        uint64_t bucket = 0;
        if (mine < p.count && my_key != Keys<K>::kEmpty) {
            from = start_of(p.home, d, my_key);
            const GhCuckooSubtable &sub = subs[from.first];
            bucket = bucket_of(sub, my_key);
            start = home_slot<L>(my_key, p.home.seed);
            const auto seen = look_alone<L>(sub, bucket, start, Part::kHomeHalf, false, my_key);
            if (seen.key != 0) {
                my_found = 1;
                if (p.values_out != nullptr) {
                    copy_slot_value<L>(p.values_out + mine * words, sub, bucket, __ffs(seen.key) - 1, seen.hit, words,
                                       0, 1);
                }
            } else {
                // An empty slot in a clean home half: the key never went past it.
                tile_next = !(from.settled && seen.empty != 0 && !is_dirty(sub, bucket, false));
            }
        } else {
            tile_next = mine < p.count;
        }
        // The rest, the tile together: the other buckets, or the side slot.
        uint32_t turns = t.ballot(tile_next);
        while (turns != 0) {
            const uint32_t q = __ffs(turns) - 1;
            turns &= turns - 1;
            const uint64_t i = c * kTile + q;
            const K key = t.shfl(my_key, q);
            uint32_t *out = p.values_out == nullptr ? nullptr : p.values_out + i * words;
            bool found = false;
            if (key == Keys<K>::kEmpty) {
                found = __ldcg(p.table.side + GH_CUCKOO_SIDE_PRESENT) != 0;
                if (found && out != nullptr) copy_value(out, p.table.side + GH_CUCKOO_SIDE_VALUE, words, t.rank, kTile);
            } else {
                found = find_rest<L>(t, subs, d, t.shfl(from.first, q), t.shfl(bucket, q), t.shfl(start, q),
                                  t.shfl((uint32_t)from.settled, q) != 0, key, out, words);
            }
            if (t.rank == q) my_found = found ? 1 : 0;
        }
        if (mine < p.count) {
            if (p.found_out != nullptr) p.found_out[mine] = (uint8_t)my_found;
            hits += my_found;
        }
    }
    if (p.hits != nullptr) warp_add(p.hits, hits);
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
