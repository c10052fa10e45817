// Exporting every DyHash pair of the subtables into flat key and value arrays.
#pragma once

#include "cuckoo/bucket.cuh"

namespace gh_cuckoo {

template <typename L>
__device__ void export_pairs(const GhCuckooExportParams &p) {
    using K = typename L::Key;
    const Tile t = Tile::mine();
    constexpr uint32_t P = L::kPerLane;
    const uint32_t words = p.table.value_words;
    for (uint32_t s = 0; s < p.table.subtables; ++s) {
        const GhCuckooSubtable &sub = p.table.sub[s];
        for (uint64_t b = tile_index(); b < sub.buckets; b += tile_count()) {
            typename L::Word slice[P];
            load_slice<L>(sub, b, t.rank, false, slice);
            const uint32_t held = ~empty_bits<L>(slice) & ((1u << P) - 1u);
            const uint32_t mine = __popc(held);
            // Exclusive prefix over the tile's lanes.
            uint32_t prefix = mine;
            for (uint32_t offset = 1; offset < kTile; offset *= 2) {
                const uint32_t up = __shfl_up_sync(t.mask, prefix, offset, kTile);
                if (t.rank >= offset) prefix += up;
            }
            const uint32_t total = t.shfl(prefix, kTile - 1);
            prefix -= mine;
            unsigned long long base = 0;
            if (t.rank == 0 && total != 0) {
                base = atomicAdd(reinterpret_cast<unsigned long long *>(p.written), (unsigned long long)total);
            }
            base = t.shfl(base, 0);
            uint64_t at = base + prefix;
#pragma unroll
            for (uint32_t j = 0; j < P; ++j) {
                if ((held >> j & 1u) == 0) continue;
                if (at < p.capacity) {
                    static_cast<K *>(p.keys_out)[at] = L::key_of(slice[j]);
                    copy_slot_value<L>(p.values_out + at * words, sub, b, t.rank * P + j, slice[j], words, 0, 1);
                }
                ++at;
            }
        }
    }
}

}  // namespace gh_cuckoo
