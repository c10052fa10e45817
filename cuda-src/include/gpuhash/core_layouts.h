/* Kernel parameter layouts of gpuhash-core, read by the kernels and, through
 * bindgen, by crates/gpuhash-core/src/layouts.rs. Plain C so that bindgen and
 * nvcc see the same bytes; every kernel takes one of these by value so that a
 * launch pushes exactly one argument whose layout both sides agree on. */
#ifndef GPUHASH_CORE_LAYOUTS_H
#define GPUHASH_CORE_LAYOUTS_H

#include <stdint.h>

/* 2^32 - 5, the largest prime below 2^32: keeps (a * k + b) inside 64 bits. */
#define GH_PRIME32 4294967291u
/* 2^61 - 1, a Mersenne prime: reduction needs shifts and adds only. */
#define GH_PRIME61 2305843009213693951ull

#define GH_HASH_FMIX 0u
#define GH_HASH_UNIVERSAL 1u

/* ((a * k + b) mod GH_PRIME32) mod buckets, with 0 < a < p and b < p. */
typedef struct GhUniversal32 {
    uint32_t a;
    uint32_t b;
    uint32_t buckets;
} GhUniversal32;

/* ((a * k + b) mod GH_PRIME61) mod buckets, with 0 < a < p and b < p. */
typedef struct GhUniversal64 {
    uint64_t a;
    uint64_t b;
    uint64_t buckets;
} GhUniversal64;

/* Writes keys[i] = fmix32(first_index + i + index_offset) and
 * values[i] = first_index + i + 1 for i < count; values may be null. */
typedef struct GhWorkloadParams {
    uint32_t *keys;
    uint32_t *values;
    uint64_t count;
    uint32_t first_index;
    uint32_t index_offset;
} GhWorkloadParams;

/* output[i] = hash(input[i]), hash chosen by kind (GH_HASH_FMIX or
 * GH_HASH_UNIVERSAL, the latter with universal's coefficients). */
typedef struct GhHash32Params {
    const uint32_t *input;
    uint32_t *output;
    uint64_t count;
    uint32_t kind;
    GhUniversal32 universal;
} GhHash32Params;

typedef struct GhHash64Params {
    const uint64_t *input;
    uint64_t *output;
    uint64_t count;
    uint32_t kind;
    GhUniversal64 universal;
} GhHash64Params;

#endif
