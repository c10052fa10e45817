/* SlabAlloc's layouts, shared by its kernels, the kernels of every crate that allocates
 * slabs, and (through bindgen) crates/gpuhash-slab-alloc/src/layouts.rs. */
#ifndef GPUHASH_SLAB_ALLOC_LAYOUTS_H
#define GPUHASH_SLAB_ALLOC_LAYOUTS_H

#include <stdint.h>

/* A slab is 128 bytes: one 4-byte word for each lane of a warp. */
#define GH_SLAB_WORDS 32u
#define GH_SLAB_BYTES 128u
/* A memory block holds 1024 slabs; its bitmap is 32 words, one a lane, bit u of word w
 * set when slab 32 w + u is in use. */
#define GH_SLABS_PER_BLOCK 1024u
#define GH_BITMAP_WORDS 32u

/* Regular addresses: super block in bits 31..24, memory block in 23..10, slab in 9..0.
 * Super block 255 is never created, so the all-ones word is never a valid address. */
#define GH_SLAB_UNIT_BITS 10u
#define GH_SLAB_BLOCK_BITS 14u
#define GH_SLAB_SUPER_BLOCK_SHIFT 24u
#define GH_MAX_SUPER_BLOCKS 255u
#define GH_MAX_BLOCKS_PER_SUPER_BLOCK 16384u
/* Light addresses: the slab's index in one contiguous array; all ones stays invalid. */
#define GH_MAX_LIGHT_BLOCKS 4194303u

/* The address meaning "no slab": what warp_allocate returns when it finds none. */
#define GH_INVALID_SLAB 0xffffffffu

#define GH_SLAB_ALLOC_REGULAR 0u
#define GH_SLAB_ALLOC_LIGHT 1u

/* One super block: a contiguous run of memory blocks. */
typedef struct GhSuperBlock {
    /* memory_blocks * GH_BITMAP_WORDS words. */
    uint32_t *bitmaps;
    /* memory_blocks * GH_SLABS_PER_BLOCK slabs. */
    uint32_t *slabs;
    uint32_t memory_blocks;
    /* Global index of its first memory block: super blocks in order number all blocks. */
    uint32_t first_block;
} GhSuperBlock;

/* What a kernel needs to allocate, free and decode slabs. Passed by value inside each
 * kernel's parameters; the host rebuilds it after every growth. */
typedef struct GhSlabAllocContext {
    /* Regular variant: the table of super_block_count super blocks, in device memory.
     * Light variant: null. */
    const GhSuperBlock *super_blocks;
    /* Light variant: the one bitmap array and the one slab array. Regular: null. */
    uint32_t *light_bitmaps;
    uint32_t *light_slabs;
    /* Set to 1 by a warp that found no free slab after GH_MAX_RESIDENT_MOVES tries. */
    uint32_t *exhausted;
    uint32_t variant;
    uint32_t super_block_count;
    uint32_t total_blocks;
    /* Changes from launch to launch so that warps pick fresh resident blocks. */
    uint32_t seed;
} GhSlabAllocContext;

/* A warp gives up, and reports exhaustion, after finding this many full blocks in a row. */
#define GH_MAX_RESIDENT_MOVES 64u

/* One slab for each i < count with addresses[i] == GH_INVALID_SLAB (or for every i when
 * overwrite is set); pointers, when not null, receive each slab's decoded device pointer.
 * With claim_runs, a warp takes up to 32 slabs per atomic instead of one. */
typedef struct GhAllocateParams {
    GhSlabAllocContext alloc;
    uint32_t *addresses;
    uint64_t *pointers;
    uint64_t count;
    uint32_t overwrite;
    uint32_t claim_runs;
} GhAllocateParams;

/* Frees addresses[i] for i < count, skipping GH_INVALID_SLAB; counts in *rejected the
 * addresses that lie outside the allocator or whose slab was not in use. */
typedef struct GhDeallocateParams {
    GhSlabAllocContext alloc;
    const uint32_t *addresses;
    uint64_t count;
    unsigned long long *rejected;
} GhDeallocateParams;

/* *total += number of set bits in words[0..count). */
typedef struct GhPopcountParams {
    const uint32_t *words;
    uint64_t count;
    unsigned long long *total;
} GhPopcountParams;

/* The device-malloc baseline: pointers[i] = malloc(GH_SLAB_BYTES), or free(pointers[i]). */
typedef struct GhDeviceMallocParams {
    uint64_t *pointers;
    uint64_t count;
} GhDeviceMallocParams;

#endif
