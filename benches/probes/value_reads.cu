// Ceiling probe behind docs/benchmarks/cuckoo.md: how many random bucket lookups a second
// the card serves when a hit must also read its value, with values in a separate array
// (DyHash's layout) or right after the bucket's keys (interleaved 256-byte buckets), against
// reading the key line alone. Tiles of 4 lanes read a 128-byte key line (two 16-byte loads a
// lane); then one lane reads the 4-byte value of a slot that depends on the keys loaded, so
// the value read waits for the line as a real hit does.
//
// Not part of the cargo build (it needs only nvcc and a GPU):
//   nvcc -O3 -arch=sm_90 -I cuda-src/include -o value_reads benches/probes/value_reads.cu
//   ./value_reads
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gpuhash/hash.cuh"

enum Layout { kKeysOnly, kSeparateValues, kInterleaved };

template <Layout L>
__global__ void probe(const uint4 *keys, const uint32_t *values, uint64_t buckets, uint64_t lookups,
                      uint32_t salt, uint32_t *sink) {
    const uint32_t lane = threadIdx.x & 31u, rank = lane & 3u;
    const uint32_t mask = 0xfu << (lane & ~3u);
    const uint64_t tiles = (uint64_t)gridDim.x * blockDim.x / 4;
    uint32_t acc = 0;
    for (uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 4; i < lookups; i += tiles) {
        const uint64_t b = gh_fmix32((uint32_t)i ^ salt) % buckets;
        // Interleaved buckets are 256 bytes: 128 of keys, then 128 of values.
        const uint4 *line = keys + b * (L == kInterleaved ? 16 : 8);
        const uint4 x = __ldg(line + rank * 2), y = __ldg(line + rank * 2 + 1);
        uint32_t k = x.x ^ x.y ^ x.z ^ x.w ^ y.x ^ y.y ^ y.z ^ y.w;
        k ^= __shfl_xor_sync(mask, k, 1);
        k ^= __shfl_xor_sync(mask, k, 2);
        if (L != kKeysOnly && rank == 0) {
            const uint32_t slot = k & 31u;
            acc += L == kSeparateValues ? __ldg(values + b * 32 + slot)
                                        : __ldg(reinterpret_cast<const uint32_t *>(line + 8) + slot);
        } else {
            acc += k;
        }
    }
    if (acc == 0x12345678u) *sink = acc;  // keeps the loads alive
}

template <Layout L>
float median_ms(const uint4 *keys, const uint32_t *values, uint64_t buckets, uint64_t lookups, int grid,
                uint32_t *sink) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> times;
    for (int run = 0; run < 8; ++run) {
        cudaEventRecord(start);
        probe<L><<<grid, 256>>>(keys, values, buckets, lookups, run, sink);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms;
        cudaEventElapsedTime(&ms, start, stop);
        if (run >= 2) times.push_back(ms);  // two warm-up runs
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

int main() {
    const uint64_t buckets = 1ull << 23;  // 1 GiB of key lines: far beyond L2
    const uint64_t lookups = 1ull << 26;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    uint4 *keys;
    uint32_t *values, *sink;
    cudaMalloc(&keys, buckets * 256);
    cudaMalloc(&values, buckets * 128);
    cudaMalloc(&sink, 4);
    cudaMemset(keys, 1, buckets * 256);
    cudaMemset(values, 2, buckets * 128);
    const char *names[] = {"key line only", "key line + value in a separate array",
                           "key line + value in the same 256-byte bucket"};
    for (int blocks_per_sm : {4, 8}) {
        const int grid = sms * blocks_per_sm;
        const float ms[] = {median_ms<kKeysOnly>(keys, values, buckets, lookups, grid, sink),
                            median_ms<kSeparateValues>(keys, values, buckets, lookups, grid, sink),
                            median_ms<kInterleaved>(keys, values, buckets, lookups, grid, sink)};
        for (int l = 0; l < 3; ++l) {
            printf("%-46s %d blocks/SM: %6.0f M lookups/s\n", names[l], blocks_per_sm,
                   lookups / (ms[l] / 1e3) / 1e6);
        }
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
