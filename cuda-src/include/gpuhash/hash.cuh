// Hash functions every gpuhash table uses on the device. Each has a twin in
// gpuhash_core::hash that must return the same value for every input: the
// GPU tests hold the two against each other.
#pragma once

#include "gpuhash/core_layouts.h"

// MurmurHash3's finalizer: a bijection on 32 bits, so fmix32(i) over distinct
// i gives distinct keys with no bias in the low bits.
__device__ __forceinline__ uint32_t gh_fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

__device__ __forceinline__ uint64_t gh_fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

__device__ __forceinline__ uint32_t gh_universal32(uint32_t key, GhUniversal32 h) {
    // a < 2^32 - 5 and key < 2^32, so a * key + b < 2^64: no overflow.
    uint64_t mixed = (uint64_t)h.a * key + h.b;
    return (uint32_t)(mixed % GH_PRIME32) % h.buckets;
}

// x mod (2^61 - 1) for x < 2^64, using 2^61 = 1 (mod p).
__device__ __forceinline__ uint64_t gh_reduce61(uint64_t x) {
    uint64_t r = (x & GH_PRIME61) + (x >> 61);
    return r >= GH_PRIME61 ? r - GH_PRIME61 : r;
}

__device__ __forceinline__ uint64_t gh_universal64(uint64_t key, GhUniversal64 h) {
    uint64_t k = gh_reduce61(key);
    // a, k < 2^61: the 122-bit product splits into a high part below 2^61
    // (bits 61 and up) and a low part below 2^61, each reduced separately.
    uint64_t lo = h.a * k;
    uint64_t hi = __umul64hi(h.a, k);
    uint64_t high_part = (hi << 3) | (lo >> 61);
    uint64_t product = gh_reduce61(high_part + (lo & GH_PRIME61));
    return gh_reduce61(product + h.b) % h.buckets;
}
