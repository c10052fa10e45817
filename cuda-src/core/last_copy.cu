// The last copy of each key in one batch: which elements a later element
// repeats, and the batch compacted to the others, in input order. Tables whose
// inserts let any copy of a key win use it to make the last one win. The
// same scratch table also combines the copies' values of each key (Add, Min,
// Max) or keeps its first copy, for tables whose upserts take distinct keys.
#include "gpuhash/hash.cuh"

namespace {

constexpr uint32_t kThreads = GH_LAST_COPY_THREADS;
constexpr uint32_t kPerThread = GH_LAST_COPY_PER_THREAD;
constexpr uint32_t kWarps = kThreads / 32;

__device__ __forceinline__ uint64_t home_of(uint32_t key) { return gh_fmix32(key); }
__device__ __forceinline__ uint64_t home_of(uint64_t key) { return gh_fmix64(key); }

__device__ __forceinline__ uint32_t claim(uint32_t *slot, uint32_t key) { return atomicCAS(slot, 0u, key); }
__device__ __forceinline__ uint64_t claim(uint64_t *slot, uint64_t key) {
    return atomicCAS(reinterpret_cast<unsigned long long *>(slot), 0ull, (unsigned long long)key);
}

// The slot of `key`, claimed if the key has none yet. Linear probing from the
// key's home; the table has at least twice the batch's slots, so an empty one
// is always ahead. A slot's key only goes from 0 to a key, once, so a plain
// read that sees a key sees the final one, and one that sees 0 is settled by
// the CAS.
template <typename K>
__device__ uint64_t claim_slot(const GhLastCopyTable &t, K key) {
    if (key == 0) return t.mask + 1;
    K *slots = static_cast<K *>(t.keys);
    for (uint64_t s = home_of(key) & t.mask;; s = (s + 1) & t.mask) {
        K seen = slots[s];
        if (seen == 0) seen = claim(&slots[s], key);
        if (seen == 0 || seen == key) return s;
    }
}

// The slot of a key that the record kernel has placed.
template <typename K>
__device__ uint64_t find_slot(const GhLastCopyTable &t, K key) {
    if (key == 0) return t.mask + 1;
    const K *slots = static_cast<const K *>(t.keys);
    uint64_t s = home_of(key) & t.mask;
    while (slots[s] != key) s = (s + 1) & t.mask;
    return s;
}

template <typename K>
__device__ void record(const GhLastCopyMarkParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        atomicMax(&p.table.last[claim_slot(p.table, keys[i])], (uint32_t)i);
    }
}

template <typename K>
__device__ void mark(const GhLastCopyMarkParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.repeated[i] = p.table.last[find_slot(p.table, keys[i])] != (uint32_t)i;
    }
}

// Element `round` of this thread in tile `tile`: consecutive threads take
// consecutive elements, so a round covers kThreads elements in input order.
__device__ __forceinline__ uint64_t element_of(uint64_t tile, uint32_t round) {
    return tile * kThreads * kPerThread + (uint64_t)round * kThreads + threadIdx.x;
}

__device__ __forceinline__ bool is_kept(const GhLastCopyCompactParams &p, uint64_t i) {
    return i < p.count && p.repeated[i] == 0;
}

// The sum of `value` over the block's threads before this one; `total` gets
// the whole block's. Every thread of a block of kThreads calls it.
__device__ uint64_t block_exclusive_sum(uint64_t value, uint64_t &total) {
    __shared__ uint64_t warp_sums[kWarps];
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x / 32;
    uint64_t inclusive = value;
    for (uint32_t offset = 1; offset < 32; offset *= 2) {
        const uint64_t below = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += below;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    uint64_t before = 0;
    total = 0;
    for (uint32_t w = 0; w < kWarps; ++w) {
        if (w < warp) before += warp_sums[w];
        total += warp_sums[w];
    }
    // warp_sums is written again by the next call.
    __syncthreads();
    return before + inclusive - value;
}

__device__ void count_kept(const GhLastCopyCompactParams &p) {
    for (uint64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
        uint64_t kept = 0;
        for (uint32_t round = 0; round < kPerThread; ++round) {
            kept += __syncthreads_count(is_kept(p, element_of(tile, round)));
        }
        if (threadIdx.x == 0) p.tile_offsets[tile] = kept;
    }
}

// One block: the tiles' counts, kThreads at a time, become exclusive prefix sums.
__device__ void scan_kept(const GhLastCopyCompactParams &p) {
    uint64_t carry = 0;
    for (uint64_t first = 0; first < p.tiles; first += kThreads) {
        const uint64_t tile = first + threadIdx.x;
        const uint64_t kept = tile < p.tiles ? p.tile_offsets[tile] : 0;
        uint64_t total;
        const uint64_t before = block_exclusive_sum(kept, total);
        if (tile < p.tiles) p.tile_offsets[tile] = carry + before;
        carry += total;
    }
    if (threadIdx.x == 0) *p.kept = carry;
}

template <typename K>
__device__ void scatter_kept(const GhLastCopyCompactParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    K *keys_out = static_cast<K *>(p.keys_out);
    for (uint64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
        uint64_t place = p.tile_offsets[tile];
        for (uint32_t round = 0; round < kPerThread; ++round) {
            const uint64_t i = element_of(tile, round);
            const bool kept = is_kept(p, i);
            uint64_t round_kept;
            const uint64_t at = place + block_exclusive_sum(kept, round_kept);
            if (kept) {
                keys_out[at] = keys[i];
                for (uint32_t w = 0; w < p.value_words; ++w) {
                    p.values_out[at * p.value_words + w] = p.values[i * p.value_words + w];
                }
            }
            place += round_kept;
        }
    }
}

// ---- Combining the copies of each key (GhCombineParams).

__device__ __forceinline__ uint64_t read_value(const uint32_t *words, uint64_t i, uint32_t value_words) {
    if (value_words == 1) return words[i];
    return (uint64_t)words[2 * i] | ((uint64_t)words[2 * i + 1] << 32);
}

__device__ __forceinline__ void write_value(uint32_t *words, uint64_t i, uint32_t value_words, uint64_t v) {
    if (value_words == 1) {
        words[i] = (uint32_t)v;
    } else {
        words[2 * i] = (uint32_t)v;
        words[2 * i + 1] = (uint32_t)(v >> 32);
    }
}

// Combines `v` into the accumulator of slot `s`, atomically at the value's width.
__device__ __forceinline__ void combine_into(uint32_t *acc, uint64_t s, uint32_t value_words, uint32_t op,
                                             uint64_t v) {
    if (value_words == 1) {
        uint32_t *a = &acc[s];
        const uint32_t w = (uint32_t)v;
        if (op == GH_COMBINE_ADD) atomicAdd(a, w);
        else if (op == GH_COMBINE_MIN) atomicMax(a, ~w);
        else atomicMax(a, w);
    } else {
        // Two words a slot, so the pair is 8-byte aligned.
        unsigned long long *a = reinterpret_cast<unsigned long long *>(&acc[2 * s]);
        const unsigned long long w = v;
        if (op == GH_COMBINE_ADD) atomicAdd(a, w);
        else if (op == GH_COMBINE_MIN) atomicMax(a, ~w);
        else atomicMax(a, w);
    }
}

// The combined value of slot `s` (Min's accumulator holds the complement).
__device__ __forceinline__ uint64_t combined_of(const GhCombineParams &p, uint64_t s) {
    const uint64_t v = read_value(p.acc, s, p.value_words);
    if (p.op != GH_COMBINE_MIN) return v;
    return p.value_words == 1 ? (uint64_t)(uint32_t)~(uint32_t)v : ~v;
}

__device__ __forceinline__ uint32_t winner_mark(const GhCombineParams &p, uint64_t i) {
    return p.first ? ~(uint32_t)i : (uint32_t)i;
}

template <typename K>
__device__ void combine_record(const GhCombineParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t s = claim_slot(p.table, keys[i]);
        atomicMax(&p.table.last[s], winner_mark(p, i));
        if (p.op != GH_COMBINE_KEEP) combine_into(p.acc, s, p.value_words, p.op, read_value(p.values, i, p.value_words));
    }
}

template <typename K>
__device__ void combine_mark(const GhCombineParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t s = find_slot(p.table, keys[i]);
        p.repeated[i] = p.table.last[s] != winner_mark(p, i);
        if (p.values_out != nullptr) write_value(p.values_out, i, p.value_words, combined_of(p, s));
    }
}

template <typename K>
__device__ void combine_store(const GhCombineParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t s = find_slot(p.table, keys[i]);
        write_value(p.acc, s, p.value_words, read_value(p.values, i, p.value_words));
    }
}

template <typename K>
__device__ void combine_load(const GhCombineParams &p) {
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        const uint64_t s = find_slot(p.table, keys[i]);
        write_value(p.values_out, i, p.value_words, read_value(p.acc, s, p.value_words));
    }
}

__device__ void combine_fold(const GhCombineFoldParams &p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t mask = p.value_words == 1 ? 0xffffffffull : ~0ull;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        if (p.found[i] == 0) continue;
        const uint64_t held = read_value(p.held, i, p.value_words);
        const uint64_t v = read_value(p.values, i, p.value_words);
        uint64_t out = held;
        if (p.op == GH_COMBINE_ADD) out = (held + v) & mask;
        else if (p.op == GH_COMBINE_MIN) out = held < v ? held : v;
        else if (p.op == GH_COMBINE_MAX) out = held > v ? held : v;
        write_value(p.values, i, p.value_words, out);
    }
}

}  // namespace

#define GH_LAST_COPY_KERNELS(K, suffix)                                                                   \
    extern "C" __global__ void gh_last_copy_record_##suffix(GhLastCopyMarkParams p) { record<K>(p); }     \
    extern "C" __global__ void gh_last_copy_mark_##suffix(GhLastCopyMarkParams p) { mark<K>(p); }         \
    extern "C" __global__ void __launch_bounds__(GH_LAST_COPY_THREADS)                                   \
        gh_last_copy_scatter_##suffix(GhLastCopyCompactParams p) {                                        \
        scatter_kept<K>(p);                                                                               \
    }

#define GH_COMBINE_KERNELS(K, suffix)                                                                      \
    extern "C" __global__ void gh_combine_record_##suffix(GhCombineParams p) { combine_record<K>(p); }     \
    extern "C" __global__ void gh_combine_mark_##suffix(GhCombineParams p) { combine_mark<K>(p); }         \
    extern "C" __global__ void gh_combine_store_##suffix(GhCombineParams p) { combine_store<K>(p); }       \
    extern "C" __global__ void gh_combine_load_##suffix(GhCombineParams p) { combine_load<K>(p); }

GH_COMBINE_KERNELS(uint32_t, u32)
GH_COMBINE_KERNELS(uint64_t, u64)

extern "C" __global__ void gh_combine_fold(GhCombineFoldParams p) { combine_fold(p); }

GH_LAST_COPY_KERNELS(uint32_t, u32)
GH_LAST_COPY_KERNELS(uint64_t, u64)

extern "C" __global__ void __launch_bounds__(GH_LAST_COPY_THREADS) gh_last_copy_count(GhLastCopyCompactParams p) {
    count_kept(p);
}

extern "C" __global__ void __launch_bounds__(GH_LAST_COPY_THREADS) gh_last_copy_scan(GhLastCopyCompactParams p) {
    scan_kept(p);
}
