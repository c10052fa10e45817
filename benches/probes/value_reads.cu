// Ceiling probe behind docs/benchmarks/cuckoo.md: how many random bucket lookups a second
// the card serves, depending on how much of a 128-byte key line a lookup reads and where
// its value lies. Tiles of 2 lanes (DyHash's GH_CUCKOO_TILE) read either the whole key line
// (four 16-byte loads a lane) or one 32-byte sector of it (one load a lane), possibly the
// rest of the line after that sector (a second round, as a lookup that misses the sector
// does); then one lane reads the 4-byte value of a slot that depends on the keys loaded, so
// the value read waits for the keys as a real hit does. Values lie in a separate array
// (DyHash's layout) or right after the bucket's keys (interleaved 256-byte buckets).
//
// Not part of the cargo build (it needs only nvcc and a GPU):
//   nvcc -O3 -arch=sm_90 -I cuda-src/include -o value_reads benches/probes/value_reads.cu
//   ./value_reads
#include <cstdint>
#include <cstdio>

#include "gpuhash/hash.cuh"
#include "timing.cuh"

enum Keys { kLine, kSector, kSectorThenLine };
enum Values { kNone, kSeparate, kInterleaved };

struct Mode {
    Keys keys;
    Values values;
    const char *name;
};

template <Keys K, Values V>
__global__ void probe(const uint4 *keys, const uint32_t *values, uint64_t buckets, uint64_t lookups,
                      uint32_t salt, uint32_t *sink) {
    const uint32_t lane = threadIdx.x & 31u, rank = lane & 1u;
    const uint32_t mask = 0x3u << (lane & ~1u);
    const uint64_t tiles = (uint64_t)gridDim.x * blockDim.x / 2;
    uint32_t acc = 0;
    for (uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 2; i < lookups; i += tiles) {
        const uint32_t h = gh_fmix32((uint32_t)i ^ salt);
        const uint64_t b = h % buckets;
        const uint4 *line = keys + b * (V == kInterleaved ? 16 : 8);
        uint32_t k;
        if (K == kLine) {
            k = 0;
            for (uint32_t j = 0; j < 4; ++j) {
                const uint4 x = __ldg(line + rank * 4 + j);
                k ^= x.x ^ x.y ^ x.z ^ x.w;
            }
        } else {
            const uint32_t sector = h >> 30;
            const uint4 x = __ldg(line + sector * 2 + rank);
            k = x.x ^ x.y ^ x.z ^ x.w;
            if (K == kSectorThenLine) {
                k ^= __shfl_xor_sync(mask, k, 1);
                for (uint32_t j = 0; j < 4; ++j) {
                    const uint4 y = __ldg(line + rank * 4 + ((j + (k & 1u)) & 3u));
                    k ^= y.x ^ y.y ^ y.z ^ y.w;
                }
            }
        }
        k ^= __shfl_xor_sync(mask, k, 1);
        if (V != kNone && rank == 0) {
            const uint32_t slot = k & 31u;
            acc += V == kSeparate ? __ldg(values + b * 32 + slot)
                                  : __ldg(reinterpret_cast<const uint32_t *>(line + 8) + slot);
        } else {
            acc += k;
        }
    }
    if (acc == 0x12345678u) *sink = acc;  // keeps the loads alive
}

template <Keys K, Values V>
float median_ms(const uint4 *keys, const uint32_t *values, uint64_t buckets, uint64_t lookups, int grid,
                uint32_t *sink) {
    return median_ms([&](int run) { probe<K, V><<<grid, 256>>>(keys, values, buckets, lookups, run, sink); },
                     [] {});
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
    for (int blocks_per_sm : {4, 8}) {
        const int grid = sms * blocks_per_sm;
        const ProbeRow rows[] = {
            {"key line only", median_ms<kLine, kNone>(keys, values, buckets, lookups, grid, sink)},
            {"key line + separate value", median_ms<kLine, kSeparate>(keys, values, buckets, lookups, grid, sink)},
            {"key line + value in the 256-byte bucket",
             median_ms<kLine, kInterleaved>(keys, values, buckets, lookups, grid, sink)},
            {"key sector only", median_ms<kSector, kNone>(keys, values, buckets, lookups, grid, sink)},
            {"key sector + separate value", median_ms<kSector, kSeparate>(keys, values, buckets, lookups, grid, sink)},
            {"key sector, then line + separate value",
             median_ms<kSectorThenLine, kSeparate>(keys, values, buckets, lookups, grid, sink)},
        };
        print_rows(rows, blocks_per_sm, lookups, "lookups");
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
