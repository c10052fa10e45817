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

/* The last copy of each key in one batch (gpuhash_core::last_copy). Kernels
 * that walk the batch by tiles run blocks of GH_LAST_COPY_THREADS threads, each
 * tile GH_LAST_COPY_THREADS * GH_LAST_COPY_PER_THREAD elements. */
#define GH_LAST_COPY_THREADS 256u
#define GH_LAST_COPY_PER_THREAD 8u

/* A scratch open-addressing table of the batch's keys (u32 or u64, as the
 * kernel's suffix says): mask + 1 slots, a power of two at least twice the
 * batch, zeroed, so that 0 marks an empty slot; the key 0 has no slot and
 * keeps its index in last[mask + 1]. last[s] is the highest batch index of the
 * key in slot s (mask + 2 entries, zeroed). */
typedef struct GhLastCopyTable {
    void *keys;
    uint32_t *last;
    uint64_t mask;
} GhLastCopyTable;

/* Record: each element i raises last[] of its key's slot to i. Mark: then
 * repeated[i] = 1 where last[] of its key is not i, that is where a later
 * element repeats the key. */
typedef struct GhLastCopyMarkParams {
    const void *keys;
    uint64_t count;
    GhLastCopyTable table;
    uint8_t *repeated;
} GhLastCopyMarkParams;

/* Compacting the elements not marked repeated, in input order: count writes
 * each tile's kept elements into tile_offsets[tile]; scan (one block) turns
 * them into exclusive prefix sums and writes the total into *kept; scatter
 * writes each kept element's key and value_words value words at its place of
 * keys_out and values_out. */
typedef struct GhLastCopyCompactParams {
    const void *keys;
    const uint32_t *values;
    const uint8_t *repeated;
    uint64_t count;
    uint64_t *tile_offsets;
    uint64_t tiles;
    uint64_t *kept;
    void *keys_out;
    uint32_t *values_out;
    uint32_t value_words;
    uint32_t pad;
} GhLastCopyCompactParams;

/* Combining a batch's copies of each key (gpuhash_core::last_copy::reduce),
 * over the scratch table above. Values are value_words (1 or 2) 4-byte words,
 * read as one unsigned integer of that width (two words: low word first).
 * Record: each element i raises last[] of its key's slot to i (to ~i when
 * first is set, so that the earliest copy wins) and, unless op is
 * GH_COMBINE_KEEP, combines its value into acc[] of the slot: Add and Max
 * directly, Min as the Max of complements (so a zeroed acc starts every op).
 * Mark: repeated[i] = 1 where the winning index of its key is not i, and, with
 * values_out set, values_out[i] = its key's combined value. Store: acc[] of
 * the slot of keys[i] = values[i] (the keys distinct). Load: values_out[i] =
 * acc[] of the slot of keys[i]. acc holds (mask + 2) * value_words words. */
#define GH_COMBINE_KEEP 0u
#define GH_COMBINE_ADD 1u
#define GH_COMBINE_MIN 2u
#define GH_COMBINE_MAX 3u

typedef struct GhCombineParams {
    const void *keys;
    const uint32_t *values;
    uint64_t count;
    GhLastCopyTable table;
    uint32_t *acc;
    uint32_t *values_out;
    uint8_t *repeated;
    uint32_t op;
    uint32_t value_words;
    uint32_t first;
    uint32_t pad;
} GhCombineParams;

/* Folding what a table holds into a reduced batch: for i < count with
 * found[i] != 0, values[i] = held[i] op values[i], or held[i] with
 * GH_COMBINE_KEEP; values where found[i] == 0 stay. */
typedef struct GhCombineFoldParams {
    const uint32_t *held;
    const uint8_t *found;
    uint32_t *values;
    uint64_t count;
    uint32_t op;
    uint32_t value_words;
} GhCombineFoldParams;

/* A copy of `words` 32-bit words from device memory into mapped pinned host
 * memory (`to` is the host memory's device address), made by a kernel: a
 * readback of a few words then goes as the SMs' stores, and does not queue
 * behind large copies on the copy engines. */
typedef struct GhCopyWordsParams {
    const uint32_t *from;
    uint32_t *to;
    uint64_t words;
} GhCopyWordsParams;

/* Hits of a lookup batch: for every i with found[i] != 0, the index base + i
 * goes to hit_index and value i (value_words words) to hit_values, at a place
 * taken from *hits (which counts them, across launches). Hits come out in no
 * particular order. With hit_index null, only *hits is raised. */
typedef struct GhHitsParams {
    const uint8_t *found;
    const uint32_t *values;
    uint64_t count;
    uint64_t base;
    uint32_t *hit_index;
    uint32_t *hit_values;
    unsigned long long *hits;
    uint64_t capacity;
    uint32_t value_words;
    uint32_t pad;
} GhHitsParams;

/* Exclusive scan (prefix sum) of `count` counts, 32- or 64-bit as the kernel's
 * name says, in tiles of GH_SCAN_TILE: the tiles kernel writes out[i] = the sum
 * of counts[0..i) for every i <= count (out holds count + 1 offsets, the last
 * being the total), each tile's sums starting from tile_offsets[tile] (from 0
 * when null); the tile sums kernel writes each tile's sum to out[tile]. Both take
 * blocks of GH_SCAN_THREADS threads, each block scanning tiles a grid apart, of
 * count / GH_SCAN_TILE + 1 tiles: any grid covers them all. */
#define GH_SCAN_THREADS 256u
#define GH_SCAN_TILE 4096u
typedef struct GhScanParams {
    const void *counts;
    uint64_t count;
    const uint64_t *tile_offsets;
    uint64_t *out;
} GhScanParams;

#endif
