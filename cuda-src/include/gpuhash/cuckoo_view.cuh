// DyHash probed from code outside gpuhash: a fused kernel of the caller's,
// compiled at run time with NVRTC (gpuhash_cuckoo::view ships this header and
// those it includes) or in the caller's own nvcc build (-I cuda-src/include
// -I cuda-src). It reads a GhCuckooView, which gpuhash_cuckoo::DeviceView hands
// out, and finds keys one thread each: no tile, no warp-wide calls, so any
// thread may call it at any point of its own code, in divergent branches too.
//
//     extern "C" __global__ void probe(GhCuckooView view, const uint32_t *keys,
//                                      unsigned long long n, unsigned long long *hits) {
//         __shared__ GhCuckooView table;
//         gh_cuckoo_share_view(view, &table);
//         for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
//              i += gridDim.x * blockDim.x) {
//             uint32_t value;
//             if (gh_cuckoo_find_u32(&table, keys[i], &value)) atomicAdd(hits, 1ull);
//         }
//     }
//
// A find reads the table only, with the same probe order and early exits as the
// table's own lookups (cuckoo/locate.cuh), so it answers what `get` answers for
// as long as the view is valid: while the DeviceView that gave it lives, and for
// kernels queued on its stream (the table takes no writing batch meanwhile).
#pragma once

#include "cuckoo/probe.cuh"

// Copies the view into the block's shared memory (every thread of the block must
// call it): a find indexes the subtables by a number known at run time, which
// would copy a view living in kernel parameters into each thread's local memory.
__device__ __forceinline__ void gh_cuckoo_share_view(const GhCuckooView &view, GhCuckooView *shared) {
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) *shared = view;
    __syncthreads();
}

namespace gh_cuckoo {

// Whether a lookup of a key that is not in what it just read of `bucket` may
// stop there: the key is settled and the bucket clean with an empty slot read.
__device__ __forceinline__ bool stops_at(const Start &from, uint32_t empty, const GhCuckooSubtable &sub,
                                         uint64_t bucket) {
    return from.settled && empty != 0 && !is_dirty(sub, bucket, false);
}

// One thread's lookup of `key` in a table of bucket layout L, in the order of the
// table's own find: the home half of its first bucket, the other half, then the
// later buckets whole, up to a clean bucket with an empty slot when the key is
// settled; the reserved key in the side slot. Copies value_words words to
// `value_out` (when not null) if found.
template <typename L>
__device__ bool find_alone(const GhCuckooView &view, typename L::Key key, uint32_t *value_out) {
    using K = typename L::Key;
    const GhCuckooTable &table = view.table;
    const uint32_t words = table.value_words;
    if (key == Keys<K>::kEmpty) {
        const bool present = __ldcg(table.side + GH_CUCKOO_SIDE_PRESENT) != 0;
        if (present && value_out != nullptr) copy_value(value_out, table.side + GH_CUCKOO_SIDE_VALUE, words, 0, 1);
        return present;
    }
    const uint32_t d = table.subtables;
    const Start from = start_of(view.home, d, key);
    const uint32_t start = home_slot<L>(key, view.home.seed);
    for (uint32_t j = 0; j < d; ++j) {
        const GhCuckooSubtable &sub = table.sub[probe_subtable(from.first, j, d)];
        const uint64_t bucket = bucket_of(sub, key);
        auto seen = look_alone<L>(sub, bucket, start, j == 0 ? Part::kHomeHalf : Part::kLine, false, key);
        if (j == 0 && seen.key == 0 && !stops_at(from, seen.empty, sub, bucket)) {
            const auto other = look_alone<L>(sub, bucket, start, Part::kOtherHalf, false, key);
            seen = {other.key, seen.empty | other.empty, other.hit};
        }
        if (seen.key != 0) {
            if (value_out != nullptr) {
                copy_slot_value<L>(value_out, sub, bucket, __ffs(seen.key) - 1, seen.hit, words, 0, 1);
            }
            return true;
        }
        if (stops_at(from, seen.empty, sub, bucket)) return false;
    }
    return false;
}

}  // namespace gh_cuckoo

// Finds `key` in a table of uint32_t keys: true with its value (value_words
// words, `view->table.value_words`) in value_out when present (value_out may be
// null), false when absent or when the view is of a table of other keys. Reads
// either bucket layout (`view->table.layout`).
__device__ __forceinline__ bool gh_cuckoo_find_u32(const GhCuckooView *view, uint32_t key, uint32_t *value_out) {
    if (view->key_words != 1) return false;
    return view->table.layout == GH_CUCKOO_LAYOUT_PACKED
               ? gh_cuckoo::find_alone<gh_cuckoo::Packed32>(*view, key, value_out)
               : gh_cuckoo::find_alone<gh_cuckoo::Split<uint32_t>>(*view, key, value_out);
}

// As gh_cuckoo_find_u32, for a table of uint64_t keys (always split buckets).
__device__ __forceinline__ bool gh_cuckoo_find_u64(const GhCuckooView *view, uint64_t key, uint32_t *value_out) {
    return view->key_words == 2 && gh_cuckoo::find_alone<gh_cuckoo::Split<uint64_t>>(*view, key, value_out);
}
