// Sorting a DyHash insert batch by partition (a range of buckets of a key's
// first subtable), so that the place pass works on few partitions at a time:
// count, scan, scatter.
#pragma once

#include "cuckoo/probe.cuh"

namespace gh_cuckoo {

constexpr uint32_t kParts = GH_CUCKOO_PARTITIONS;
constexpr uint32_t kPartsPerSub = GH_CUCKOO_PARTS_PER_SUBTABLE;
constexpr uint32_t kPartBits = GH_CUCKOO_PART_BITS;
constexpr uint32_t kSortPerThread = GH_CUCKOO_SORT_PER_THREAD;
constexpr uint32_t kSortThreads = GH_CUCKOO_SORT_THREADS;

// The partition of a pair's first bucket; the reserved key's (which goes to the
// side slot) is 0. Within a subtable, the top bits of the fraction that fastmod
// scales by the bucket count: they grow with the bucket, so a partition is a
// range of buckets, found without a division.
template <typename K>
__device__ __forceinline__ uint32_t partition_of(const GhCuckooPartitionParams &p, const GhCuckooSubtable *subs,
                                                 K key) {
    if (key == Keys<K>::kEmpty) return 0;
    const uint32_t first = start_of(p.home, p.table.subtables, key).first;
    const GhCuckooSubtable &s = subs[first];
    const uint64_t fraction = s.fastmod * (uint64_t)Keys<K>::hash(key, s.hash_a, s.hash_b);
    return first * kPartsPerSub + (uint32_t)(fraction >> (64 - kPartBits));
}

// Exclusive prefix sums of data[0 .. 2 * blockDim.x), in place, by the whole
// block (a work-efficient up-sweep and down-sweep).
template <typename T>
__device__ void exclusive_scan(T *data) {
    const uint32_t n = 2 * blockDim.x, t = threadIdx.x;
    for (uint32_t step = 1; step < n; step *= 2) {
        __syncthreads();
        const uint32_t right = (2 * t + 2) * step - 1;
        if (right < n) data[right] += data[right - step];
    }
    __syncthreads();
    if (t == 0) data[n - 1] = 0;
    for (uint32_t step = n / 2; step >= 1; step /= 2) {
        __syncthreads();
        const uint32_t right = (2 * t + 2) * step - 1;
        if (right < n) {
            const T left = data[right - step];
            data[right - step] = data[right];
            data[right] += left;
        }
    }
    __syncthreads();
}

template <typename K>
__device__ void partition_count(const GhCuckooPartitionParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ uint32_t pairs[kParts];
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) pairs[t] = 0;
    stage_subtables(p.table, subs);
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    // Keys a thread loads before it hashes any, so that their loads overlap.
    constexpr uint32_t kBatch = 4;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += kBatch * stride) {
        K key[kBatch];
#pragma unroll
        for (uint32_t j = 0; j < kBatch; ++j) key[j] = i + j * stride < p.count ? keys[i + j * stride] : Keys<K>::kEmpty;
#pragma unroll
        for (uint32_t j = 0; j < kBatch; ++j) {
            if (i + j * stride < p.count) atomicAdd(&pairs[partition_of(p, subs, key[j])], 1u);
        }
    }
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) {
        if (pairs[t] != 0) atomicAdd(reinterpret_cast<unsigned long long *>(p.offsets + t), pairs[t]);
    }
}

// offsets[t] = the pairs of the partitions before t; one block of kSortThreads.
__device__ inline void partition_scan(const GhCuckooPartitionParams &p) {
    __shared__ unsigned long long sums[kParts];
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) sums[t] = p.offsets[t];
    exclusive_scan(sums);
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) p.offsets[t] = sums[t];
}

// Blocks of kSortThreads sort chunks of kSortThreads * kSortPerThread pairs: the
// chunk's pairs are counted a partition in shared memory and laid out there in
// partition order (keys and first value words; further words are read from the
// batch when written); each partition's run then takes a range of the output
// with one atomic, and consecutive threads write consecutive places of it.
template <typename K>
__device__ void partition_scatter(const GhCuckooPartitionParams &p) {
    constexpr uint32_t kChunk = kSortThreads * kSortPerThread;
    static_assert(kChunk <= 0x10000, "a pair's place in its chunk takes 16 bits");
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ uint32_t pairs[kParts];  // a partition's pairs in the chunk, then their first place
    __shared__ unsigned long long base[kParts];
    // In partition order: partition << 16 | place in the chunk, key, first value word.
    __shared__ uint32_t sorted[kChunk];
    __shared__ K sorted_keys[kChunk];
    __shared__ uint32_t sorted_heads[kChunk];
    stage_subtables(p.table, subs);
    const uint32_t words = p.table.value_words;
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t chunks = (p.count + kChunk - 1) / kChunk;
    for (uint64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        const uint64_t start = c * kChunk;
        const uint32_t size = (uint32_t)min((uint64_t)kChunk, p.count - start);
        for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) pairs[t] = 0;
        __syncthreads();
        K key[kSortPerThread];
        uint32_t head[kSortPerThread], part[kSortPerThread], rank[kSortPerThread];
#pragma unroll
        for (uint32_t j = 0; j < kSortPerThread; ++j) {
            const uint32_t q = j * blockDim.x + threadIdx.x;
            if (q < size) {
                key[j] = keys[start + q];
                head[j] = p.values[(start + q) * words];
                part[j] = partition_of(p, subs, key[j]);
                rank[j] = atomicAdd(&pairs[part[j]], 1u);
            }
        }
        __syncthreads();
        for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) {
            base[t] = pairs[t] == 0 ? 0 : atomicAdd(reinterpret_cast<unsigned long long *>(p.offsets + t), pairs[t]);
        }
        exclusive_scan(pairs);
#pragma unroll
        for (uint32_t j = 0; j < kSortPerThread; ++j) {
            const uint32_t q = j * blockDim.x + threadIdx.x;
            if (q < size) {
                const uint32_t r = pairs[part[j]] + rank[j];
                sorted[r] = part[j] << 16 | q;
                sorted_keys[r] = key[j];
                sorted_heads[r] = head[j];
            }
        }
        __syncthreads();
        for (uint32_t r = threadIdx.x; r < size; r += blockDim.x) {
            const uint32_t t = sorted[r] >> 16;
            const uint64_t at = base[t] + (r - pairs[t]);
            static_cast<K *>(p.keys_out)[at] = sorted_keys[r];
            p.values_out[at * words] = sorted_heads[r];
            copy_value(p.values_out + at * words, p.values + (start + (sorted[r] & 0xffffu)) * words, words, 1, 1);
        }
        __syncthreads();
    }
}

}  // namespace gh_cuckoo
