// What DyHash keeps beside the buckets and the kernels share: dirty bits, bucket
// locks, the reserved key's side slot, subtables staged in shared memory, and
// counts summed a block or a warp before they reach the table.
#pragma once

#include "cuckoo/bucket.cuh"
#include "gpuhash/warp.cuh"

namespace gh_cuckoo {

// Dirty bits (GhCuckooSubtable.dirty): a lookup may stop at a bucket with an
// empty slot only while it is clean. `coherent` as for load_keys.
__device__ __forceinline__ bool is_dirty(const GhCuckooSubtable &s, uint64_t bucket, bool coherent) {
    const uint32_t *word = s.dirty + bucket / 32;
    return ((coherent ? __ldcg(word) : __ldg(word)) >> (bucket % 32)) & 1u;
}

__device__ __forceinline__ void mark_dirty(const GhCuckooSubtable &s, uint64_t bucket) {
    atomicOr(s.dirty + bucket / 32, 1u << (bucket % 32));
}

// Takes the lock for `owner` (not 0) if it is open, so that the lock word says who
// writes under it. Returns the word found there: 0 when this call took the lock.
__device__ __forceinline__ uint32_t lock_as(uint32_t *lock, uint32_t owner) {
    uint32_t old;
    asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old)
                 : "l"(lock), "r"(0u), "r"(owner)
                 : "memory");
    return old;
}

__device__ __forceinline__ bool try_lock(uint32_t *lock) { return lock_as(lock, 1u) == 0; }

__device__ __forceinline__ void unlock(uint32_t *lock) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(lock), "r"(0u) : "memory");
}

// Writes the reserved key's value into the side slot, under the slot's lock;
// saves the value it replaces in `old` (when not null and one was present). Only
// copies of the reserved key in one batch take that lock, and any copy's value may
// win: a copy that finds it taken leaves the slot to the copy writing now, so a batch
// of a million copies costs a million failed atomics, not a million turns in a queue.
template <uint32_t MaxW>
__device__ __forceinline__ void side_write(uint32_t *side, const uint32_t (&value)[MaxW], uint32_t words,
                                           uint32_t *old) {
    if (!try_lock(side + GH_CUCKOO_SIDE_LOCK)) return;
    bool present = __ldcg(side + GH_CUCKOO_SIDE_PRESENT) != 0;
#pragma unroll
    for (uint32_t w = 0; w < MaxW; ++w) {
        if (w < words) {
            if (old != nullptr && present) old[w] = __ldcg(side + GH_CUCKOO_SIDE_VALUE + w);
            side[GH_CUCKOO_SIDE_VALUE + w] = value[w];
        }
    }
    side[GH_CUCKOO_SIDE_PRESENT] = 1u;
    unlock(side + GH_CUCKOO_SIDE_LOCK);
}

// Subtables of a table copied into shared memory, where a lane may index them
// by a run-time subtable number without spilling the parameter struct.
__device__ __forceinline__ void stage_subtables(const GhCuckooTable &table, GhCuckooSubtable *shared) {
    if (threadIdx.x < kMaxSub) shared[threadIdx.x] = table.sub[threadIdx.x];
    __syncthreads();
}

// Per-block changes of the subtable counts, added to the table's counts once
// at the end of a kernel instead of once a pair.
struct BlockCounts {
    long long delta[kMaxSub];

    __device__ void init() {
        if (threadIdx.x < kMaxSub) delta[threadIdx.x] = 0;
    }

    __device__ void add(uint32_t subtable, long long d) {
        atomicAdd(reinterpret_cast<unsigned long long *>(&delta[subtable]), (unsigned long long)d);
    }

    // Adds `d` for every lane of the warp that names `subtable` (kMaxSub: none),
    // one shared atomic a subtable a warp: a shared atomic a lane, all lanes of a
    // block on d words, queues behind itself. Every lane of the warp calls it.
    __device__ void add_warp(uint32_t subtable, long long d) {
        const uint32_t peers = __match_any_sync(0xffffffffu, subtable);
        if (subtable < kMaxSub && (threadIdx.x & 31u) == (uint32_t)__ffs(peers) - 1u) {
            add(subtable, d * __popc(peers));
        }
    }

    __device__ void flush(uint64_t *counts, uint32_t subtables) {
        __syncthreads();
        if (threadIdx.x < subtables && delta[threadIdx.x] != 0) {
            atomicAdd(reinterpret_cast<unsigned long long *>(counts + threadIdx.x),
                      (unsigned long long)delta[threadIdx.x]);
        }
    }
};

// Adds `n` (one value per lane, summed over the warp) to *counter once a warp.
__device__ __forceinline__ void warp_add(uint64_t *counter, uint64_t n) {
    for (int offset = 16; offset > 0; offset /= 2) n += __shfl_down_sync(0xffffffffu, n, offset);
    if ((threadIdx.x & 31u) == 0 && n != 0) atomicAdd(reinterpret_cast<unsigned long long *>(counter), n);
}

// A place in a list whose length is *counter for every lane that `wants` one,
// one atomic a warp (lanes in lane order); other lanes get ~0. Every lane of the
// warp calls it.
__device__ __forceinline__ uint64_t warp_reserve(uint64_t *counter, bool wants) {
    const uint32_t lanes = __ballot_sync(gh::kFullWarp, wants);
    if (lanes == 0) return ~0ull;
    const uint64_t at = gh::group_reserve(reinterpret_cast<unsigned long long *>(counter), lanes);
    return wants ? at : ~0ull;
}

}  // namespace gh_cuckoo
