// Ceiling probe behind docs/benchmarks/cuckoo.md: how many random inserts a second the
// card serves when an insert reads 64 bytes of a bucket's key line, claims a key slot
// with a CAS and writes a 4-byte value into a separate array (DyHash's layout: the least
// an insert of a new key does there), against the same without the value. Each lane
// inserts its own pairs; the table is emptied before every run, outside the timing, and
// every run inserts 2^26 pairs into 2^23 buckets (load 0.25 for 32-key buckets).
//
// Not part of the cargo build (it needs only nvcc and a GPU):
//   nvcc -O3 -arch=sm_90 -I cuda-src/include -o insert_ceiling benches/probes/insert_ceiling.cu
//   ./insert_ceiling
#include <cstdint>
#include <cstdio>

#include "gpuhash/hash.cuh"
#include "timing.cuh"

enum Mode { kKeyHalf, kKeyHalfAndValue };

template <Mode M>
__global__ void probe(uint32_t *keys, uint32_t *values, uint64_t buckets, uint64_t inserts, uint32_t salt,
                      uint32_t *sink) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint32_t lost = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < inserts; i += stride) {
        const uint32_t key = gh_fmix32((uint32_t)i ^ salt);
        const uint64_t b = gh_fmix32(key) % buckets;
        // 16 keys of 4 bytes: the half of the line the key starts in.
        uint32_t *half = keys + b * 32 + (key >> 31) * 16;
        const uint4 *raw = reinterpret_cast<const uint4 *>(half);
        uint32_t empty = 0;
        for (uint32_t j = 0; j < 4; ++j) {
            const uint4 x = __ldcg(raw + j);
            empty |= (x.x == 0xffffffffu ? 1u : 0u) << (4 * j);
            empty |= (x.y == 0xffffffffu ? 1u : 0u) << (4 * j + 1);
            empty |= (x.z == 0xffffffffu ? 1u : 0u) << (4 * j + 2);
            empty |= (x.w == 0xffffffffu ? 1u : 0u) << (4 * j + 3);
        }
        const uint32_t slot = empty == 0 ? key & 15u : __ffs(empty) - 1;
        const bool won = atomicCAS(half + slot, 0xffffffffu, key) == 0xffffffffu;
        if (M == kKeyHalfAndValue && won) values[(half - keys) + slot] = (uint32_t)i;
        lost += !won;
    }
    if (lost == 0x12345678u) *sink = lost;
}

template <Mode M>
float median_ms(uint32_t *keys, uint32_t *values, uint64_t buckets, uint64_t inserts, int grid,
                uint32_t *sink) {
    return median_ms([&](int run) { probe<M><<<grid, 256>>>(keys, values, buckets, inserts, run, sink); },
                     [&] { cudaMemset(keys, 0xff, buckets * 128); });
}

int main() {
    const uint64_t buckets = 1ull << 23;  // 1 GiB of key lines: far beyond L2
    const uint64_t inserts = 1ull << 26;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    uint32_t *keys, *values, *sink;
    cudaMalloc(&keys, buckets * 128);
    cudaMalloc(&values, buckets * 128);
    cudaMalloc(&sink, 4);
    for (int blocks_per_sm : {4, 8}) {
        const int grid = sms * blocks_per_sm;
        const ProbeRow rows[] = {
            {"key half read, CAS", median_ms<kKeyHalf>(keys, values, buckets, inserts, grid, sink)},
            {"key half read, CAS, separate value write",
             median_ms<kKeyHalfAndValue>(keys, values, buckets, inserts, grid, sink)},
        };
        print_rows(rows, blocks_per_sm, inserts, "inserts");
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
