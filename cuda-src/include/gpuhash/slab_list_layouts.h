/* Slab lists' layouts, shared by cuda-src/slab_list, the kernels of every crate that
 * chains slabs (the slab hash), and (through bindgen) crates/gpuhash-slab-list/src/layouts.rs. */
#ifndef GPUHASH_SLAB_LIST_LAYOUTS_H
#define GPUHASH_SLAB_LIST_LAYOUTS_H

#include <stdint.h>

#include "gpuhash/slab_alloc_layouts.h"

/* A list is a chain of 128-byte slabs read by one warp, one word a lane: lane 31 holds
 * the next slab's address (GH_INVALID_SLAB at the tail), lanes 0..30 hold data. A word
 * never written holds GH_SLAB_EMPTY_WORD, so a fresh slab is all ones. */
#define GH_SLAB_NEXT_LANE 31u
#define GH_SLAB_DATA_LANES 31u
#define GH_SLAB_EMPTY_WORD 0xffffffffu
/* A removed word: a hole the list's appends never fill again. */
#define GH_SLAB_REMOVED_WORD 0xfffffffeu

/* list_count head slabs, one after another from heads; the rest of each list comes from
 * the allocator. */
typedef struct GhSlabLists {
    uint32_t *heads;
    uint32_t list_count;
    GhSlabAllocContext alloc;
} GhSlabLists;

/* Appends words[i] to list lists[i], for i < count. status[i] becomes 1 when stored,
 * stays 0 when the allocator had no slab (the exhausted flag says so as well); a pass
 * serves only the elements whose status is 0. */
typedef struct GhSlabListAppendParams {
    GhSlabLists lists;
    const uint32_t *lists_of;
    const uint32_t *words;
    uint8_t *status;
    uint64_t count;
} GhSlabListAppendParams;

/* Per list l < lists.list_count: counts[l] = its live words (count pass, words_out null),
 * or its live words written in list order into words_out from offsets[l], never at or past
 * offsets[l + 1] (collect pass, counts null; offsets holds list_count + 1 entries). */
typedef struct GhSlabListScanParams {
    GhSlabLists lists;
    uint64_t *counts;
    const uint64_t *offsets;
    uint32_t *words_out;
} GhSlabListScanParams;

/* Removes every copy of words[i] from list lists_of[i], for i < count; removed[i] (may be
 * null) becomes how many copies went. */
typedef struct GhSlabListRemoveParams {
    GhSlabLists lists;
    const uint32_t *lists_of;
    const uint32_t *words;
    uint32_t *removed;
    uint64_t count;
} GhSlabListRemoveParams;

/* Empties every list: returns every slab after a head to the allocator and resets the
 * heads. Runs alone on the lists. */
typedef struct GhSlabListFreeParams {
    GhSlabLists lists;
} GhSlabListFreeParams;

#endif
