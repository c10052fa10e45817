// The slab hash map probed from code outside gpuhash: a fused kernel of the caller's,
// compiled at run time with NVRTC (gpuhash_slab_hash::view ships this header and those it
// includes) or in the caller's own nvcc build (-I cuda-src/include -I cuda-src). It reads
// a GhSlabView, which gpuhash_slab_hash::DeviceView hands out, and finds keys one thread
// each: no warp-wide calls, so any thread may call it at any point of its own code.
//
//     extern "C" __global__ void probe(GhSlabView view, const uint32_t *keys,
//                                      unsigned long long n, unsigned long long *hits) {
//         for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
//              i += gridDim.x * blockDim.x) {
//             uint32_t value;
//             if (gh_slab_find_u32(&view, keys[i], &value)) atomicAdd(hits, 1ull);
//         }
//     }
//
// A find walks the key's bucket as the table's own lookups do (cuda-src/slab_hash/
// slab_warp.cuh), one thread reading each slab's key words, so it answers what `get`
// answers: beside concurrent batches of other threads as a `get` beside them does, and
// exactly while none runs. The view is valid while the DeviceView that gave it lives, for
// kernels queued on its stream (the table neither grows nor compacts meanwhile).
#pragma once

#include "gpuhash/slab_hash_layouts.h"
#include "slab_alloc/slab_alloc.cuh"

namespace gh {

// One thread's lookup of `key` in a map of KeyWords-word keys and ValueWords-word values:
// the entry layout, reserved keys and bucket of SlabShape and place(), walked slab by
// slab to the tail. Copies the value's words to `value_out` (when not null) if found.
template <uint32_t KeyWords, uint32_t ValueWords>
__device__ bool slab_find_alone(const GhSlabTable &table, uint64_t key, uint32_t *value_out) {
    constexpr uint32_t kEntryWords = KeyWords + ValueWords == 3 ? 4 : KeyWords + ValueWords;
    constexpr uint32_t kEntries = GH_SLAB_KEYS / kEntryWords;
    constexpr uint32_t kValueLane = KeyWords + ValueWords == 3 ? 2 : KeyWords;
    constexpr uint64_t kEmpty = KeyWords == 1 ? GH_EMPTY_KEY : ~0ull;
    // A reserved key lives in an extra bucket as the stored key 0.
    uint32_t bucket;
    uint64_t stored = 0;
    if (key == kEmpty) {
        bucket = table.bucket_count;
    } else if (key == kEmpty - 1) {
        bucket = table.bucket_count + 1;
    } else if (key == kEmpty - 2) {
        bucket = table.bucket_count + 2;
    } else {
        bucket = gh_universal32(KeyWords == 1 ? (uint32_t)key : (uint32_t)gh_fmix64(key), table.hash);
        stored = key;
    }
    const uint32_t *slab = table.buckets + (uint64_t)bucket * GH_SLAB_WORDS;
    while (true) {
        for (uint32_t entry = 0; entry < kEntries; ++entry) {
            const uint32_t lane = entry * kEntryWords;
            const uint64_t here = KeyWords == 1
                                      ? (uint64_t)__ldcg(slab + lane)
                                      : (uint64_t)__ldcg(reinterpret_cast<const unsigned long long *>(slab + lane));
            if (here == stored) {
                if (value_out != nullptr) {
                    // A wide entry publishes its key after its value: read the value after.
                    if (KeyWords + ValueWords > 2) __threadfence();
                    for (uint32_t w = 0; w < ValueWords; ++w) value_out[w] = __ldcg(slab + lane + kValueLane + w);
                }
                return true;
            }
        }
        const uint32_t next = __ldcg(slab + GH_SLAB_NEXT_LANE);
        if (next == GH_INVALID_SLAB) return false;
        slab = slab_pointer(table.alloc, next);
    }
}

}  // namespace gh

// Finds `key` in a slab hash map of uint32_t keys: true with its value (value_words words,
// `view->value_words`) in value_out when present (value_out may be null), false when
// absent or when the view is of a map of other keys.
__device__ __forceinline__ bool gh_slab_find_u32(const GhSlabView *view, uint32_t key, uint32_t *value_out) {
    if (view->key_words != 1) return false;
    return view->value_words == 1 ? gh::slab_find_alone<1, 1>(view->table, key, value_out)
                                  : gh::slab_find_alone<1, 2>(view->table, key, value_out);
}

// As gh_slab_find_u32, for a map of uint64_t keys.
__device__ __forceinline__ bool gh_slab_find_u64(const GhSlabView *view, uint64_t key, uint32_t *value_out) {
    if (view->key_words != 2) return false;
    return view->value_words == 1 ? gh::slab_find_alone<2, 1>(view->table, key, value_out)
                                  : gh::slab_find_alone<2, 2>(view->table, key, value_out);
}
