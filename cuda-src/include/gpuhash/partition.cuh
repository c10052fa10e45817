// Sorting a batch of pairs by part (a range of buckets, or whatever a table cuts
// itself into) on the device, so that a kernel that then takes the pairs in order
// works on few parts at a time, whose lines stay in L2: count, scan, scatter.
// A table supplies the part of a key (a functor); Parts counters cover every part,
// and the scan and scatter blocks have Parts / 2 threads. Order within a part is
// not kept.
#pragma once

#include <stdint.h>

namespace gh_part {

// What one sort reads and writes: pair i is keys[i] (of type K) with `words`
// value words from values + i * words (none: keys alone); sorted pairs go to
// keys_out / values_out.
// `offsets` holds Parts counters, zero before the count pass.
struct Batch {
    const void *keys;
    const uint32_t *values;
    uint32_t words;
    void *keys_out;
    uint32_t *values_out;
    uint64_t *offsets;
    uint64_t count;
};

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

// offsets[t] += the pairs of part t: counted a block in shared memory, added
// once a part a block.
template <typename K, uint32_t Parts, typename PartOf>
__device__ void count(const Batch &b, const PartOf &part_of) {
    __shared__ uint32_t pairs[Parts];
    for (uint32_t t = threadIdx.x; t < Parts; t += blockDim.x) pairs[t] = 0;
    __syncthreads();
    const K *keys = static_cast<const K *>(b.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    // Keys a thread loads before it places any, so that their loads overlap.
    constexpr uint32_t kBatch = 4;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < b.count; i += kBatch * stride) {
        K key[kBatch];
#pragma unroll
        for (uint32_t j = 0; j < kBatch; ++j) key[j] = i + j * stride < b.count ? keys[i + j * stride] : K{};
#pragma unroll
        for (uint32_t j = 0; j < kBatch; ++j) {
            if (i + j * stride < b.count) atomicAdd(&pairs[part_of(key[j])], 1u);
        }
    }
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < Parts; t += blockDim.x) {
        if (pairs[t] != 0) atomicAdd(reinterpret_cast<unsigned long long *>(b.offsets + t), pairs[t]);
    }
}

// offsets[t] = the pairs of the parts before t; one block of Parts / 2 threads.
template <uint32_t Parts>
__device__ void scan(uint64_t *offsets) {
    __shared__ unsigned long long sums[Parts];
    for (uint32_t t = threadIdx.x; t < Parts; t += blockDim.x) sums[t] = offsets[t];
    exclusive_scan(sums);
    for (uint32_t t = threadIdx.x; t < Parts; t += blockDim.x) offsets[t] = sums[t];
}

// Blocks of Parts / 2 threads sort chunks of PerThread pairs a thread: the
// chunk's pairs are counted a part in shared memory and laid out there in part
// order (keys and first value words; further words are read from the batch when
// written); each part's run then takes a range of the output with one atomic, and
// consecutive threads write consecutive places of it.
template <typename K, uint32_t Parts, uint32_t PerThread, typename PartOf>
__device__ void scatter(const Batch &b, const PartOf &part_of) {
    constexpr uint32_t kChunk = Parts / 2 * PerThread;
    static_assert(kChunk <= 0x10000, "a pair's place in its chunk takes 16 bits");
    __shared__ uint32_t pairs[Parts];  // a part's pairs in the chunk, then their first place
    __shared__ unsigned long long base[Parts];
    // In part order: part << 16 | place in the chunk, key, first value word.
    __shared__ uint32_t sorted[kChunk];
    __shared__ K sorted_keys[kChunk];
    __shared__ uint32_t sorted_heads[kChunk];
    const uint32_t words = b.words;
    const K *keys = static_cast<const K *>(b.keys);
    const uint64_t chunks = (b.count + kChunk - 1) / kChunk;
    for (uint64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        const uint64_t start = c * kChunk;
        const uint32_t size = (uint32_t)min((uint64_t)kChunk, b.count - start);
        for (uint32_t t = threadIdx.x; t < Parts; t += blockDim.x) pairs[t] = 0;
        __syncthreads();
        K key[PerThread];
        uint32_t head[PerThread], part[PerThread], rank[PerThread];
#pragma unroll
        for (uint32_t j = 0; j < PerThread; ++j) {
            const uint32_t q = j * blockDim.x + threadIdx.x;
            if (q < size) {
                key[j] = keys[start + q];
                head[j] = words != 0 ? b.values[(start + q) * words] : 0u;
                part[j] = part_of(key[j]);
                rank[j] = atomicAdd(&pairs[part[j]], 1u);
            }
        }
        __syncthreads();
        for (uint32_t t = threadIdx.x; t < Parts; t += blockDim.x) {
            base[t] = pairs[t] == 0 ? 0 : atomicAdd(reinterpret_cast<unsigned long long *>(b.offsets + t), pairs[t]);
        }
        exclusive_scan(pairs);
#pragma unroll
        for (uint32_t j = 0; j < PerThread; ++j) {
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
            static_cast<K *>(b.keys_out)[at] = sorted_keys[r];
            if (words == 0) continue;
            uint32_t *out = b.values_out + at * words;
            const uint32_t *in = b.values + (start + (sorted[r] & 0xffffu)) * words;
            out[0] = sorted_heads[r];
            for (uint32_t w = 1; w < words; ++w) out[w] = in[w];
        }
        __syncthreads();
    }
}

}  // namespace gh_part
