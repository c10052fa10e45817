// Batch hashing: exposes the device hash functions to the host, so that tests
// can compare them with their Rust twins and tools can hash keys in bulk.
#include "gpuhash/hash.cuh"

extern "C" __global__ void gh_hash32(GhHash32Params p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        uint32_t key = p.input[i];
        p.output[i] = p.kind == GH_HASH_UNIVERSAL ? gh_universal32(key, p.universal) : gh_fmix32(key);
    }
}

extern "C" __global__ void gh_hash64(GhHash64Params p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        uint64_t key = p.input[i];
        p.output[i] = p.kind == GH_HASH_UNIVERSAL ? gh_universal64(key, p.universal) : gh_fmix64(key);
    }
}
