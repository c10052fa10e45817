/* Slab hash layouts, shared by cuda-src/slab_hash and (through bindgen)
 * crates/gpuhash-slab-hash/src/layouts.rs. */
#ifndef GPUHASH_SLAB_HASH_LAYOUTS_H
#define GPUHASH_SLAB_HASH_LAYOUTS_H

#include <stdint.h>

#include "gpuhash/core_layouts.h"
#include "gpuhash/slab_alloc_layouts.h"
#include "gpuhash/slab_list_layouts.h"

/* The three key words a slab reserves: a never-used spot, a removed pair, and a spot
 * claimed by an insert that has not yet written its value (entries wider than 64 bits
 * publish their key only after their value). Users may still store these keys: they live
 * in three extra buckets, under the stored key 0. 64-bit keys reserve the same values
 * sign-extended to 64 bits. */
#define GH_EMPTY_KEY 0xffffffffu
#define GH_TOMBSTONE_KEY 0xfffffffeu
#define GH_BUSY_KEY 0xfffffffdu
#define GH_RESERVED_BUCKETS 3u

/* Buckets are slab lists (slab_list_layouts.h). Key-value slabs: lane 2i holds a key and
 * lane 2i + 1 its value, i < 15. Key-only slabs: lanes 0..29 hold keys. Lane 30 is unused,
 * lane 31 holds the next slab's address (GH_SLAB_NEXT_LANE). GH_EMPTY_KEY is the list's
 * GH_SLAB_EMPTY_WORD, so that a fresh slab is all empty spots. */
#define GH_SLAB_PAIRS 15u
#define GH_SLAB_KEYS 30u

#define GH_TABLE_MAP 0u
#define GH_TABLE_SET 1u
#define GH_TABLE_MULTIMAP 2u

#define GH_OP_INSERT 0u
#define GH_OP_GET 1u
/* Map and set: remove the key. Multimap: remove every pair of the key. */
#define GH_OP_REMOVE 2u
/* Multimap: count the key's pairs. */
#define GH_OP_COUNT 3u
/* Map upserts: a key found has the value combined into its own by one atomic of the
 * value's width (unsigned add, min or max); a key not found is stored with the value, as
 * an insert stores it. */
#define GH_OP_UPSERT_ADD 4u
#define GH_OP_UPSERT_MIN 5u
#define GH_OP_UPSERT_MAX 6u
/* Map: a key found keeps its value and answers it in results; a key not found is stored
 * with the value given (its candidate) and answers that. */
#define GH_OP_INSERT_OR_FIND 7u

/* Per-element status, one byte an element. A pass serves every element when its
 * answer_all is set, else only the PENDING ones (a retry after the allocator grew). Lookups
 * and removals answer DONE or ABSENT, so their status is the found (removed) byte the
 * user asked for. */
/* Get and remove: the key is not there. Set insert: the key was there already. */
#define GH_STATUS_ABSENT 0u
/* Insert, upsert, insert_or_find: stored (or replaced, combined, found); get: found; remove: removed; count: counted. */
#define GH_STATUS_DONE 1u
/* Not yet served: an insert that found no free slab ends so, to be run again. */
#define GH_STATUS_PENDING 2u
/* Kernel-internal: an insert found no free slab. Written as PENDING, or as ABSENT when the
 * pass answers every element (the allocator's exhausted flag says so as well). */
#define GH_STATUS_NO_SLAB 3u
/* Between the two kernels of a multimap insert pass: the tiled pass left the pair to the
 * grouped appends (GhSlabRunsParams), which write its final status. */
#define GH_STATUS_DEFERRED 4u

/* How a bulk batch reads slabs (GhSlabOpsParams.reads): tiles of lanes read whole slabs;
 * tiles read a multimap slab's first half first; tiles read a map's or set's head slab at
 * the key's home quarter first; each thread tries its key's head slab alone, by quarters,
 * and tiles take what is left. */
#define GH_SLAB_READ_WHOLE 0u
#define GH_SLAB_READ_HALF 1u
#define GH_SLAB_READ_HOME 2u
#define GH_SLAB_READ_THREADS 3u

typedef struct GhSlabTable {
    /* bucket_count + GH_RESERVED_BUCKETS head slabs; the last ones hold the reserved keys. */
    uint32_t *buckets;
    uint32_t bucket_count;
    uint32_t kind;
    GhUniversal32 hash;
    GhSlabAllocContext alloc;
} GhSlabTable;

/* A slab hash map as code outside gpuhash sees it: what gpuhash_slab_hash::DeviceView
 * hands out, passed by value to the caller's own kernel and probed there with
 * gh_slab_find_u32 / _u64 (gpuhash/slab_hash_view.cuh). Its layout is part of the crate's
 * public interface: fields are only ever added at the end. */
typedef struct GhSlabView {
    GhSlabTable table;
    /* 32-bit words of a key (1 or 2) and of a value (1 or 2). */
    uint32_t key_words;
    uint32_t value_words;
} GhSlabView;

/* One operation per element: ops[i], or uniform_op when ops is null. */
typedef struct GhSlabOpsParams {
    GhSlabTable table;
    const uint32_t *ops;
    const uint32_t *keys;
    /* Insert values; null for sets. */
    const uint32_t *values;
    /* Get: the value found (written only when found); insert_or_find: the value the key
     * holds after it; count and multimap remove: how many pairs. May be null. */
    uint32_t *results;
    /* One status byte an element; may be null when answer_all is set. */
    uint8_t *status;
    /* Multimap bulk inserts with walk_slabs set: one word, raised by the number of pairs
     * deferred. Null otherwise. */
    uint32_t *deferred;
    uint64_t count;
    uint32_t uniform_op;
    /* Serve every element, whatever status holds; else only PENDING ones. */
    uint32_t answer_all;
    /* How bulk batches read slabs: GH_SLAB_READ_WHOLE, or, while lists are short, for
     * multimap inserts GH_SLAB_READ_HALF, for map and set inserts into tables of many
     * head slabs GH_SLAB_READ_HOME, for map and set operations otherwise
     * GH_SLAB_READ_THREADS (see cuda-src/slab_hash/slab_tile.cuh). */
    uint32_t reads;
    /* Multimap bulk inserts: 0 walks and extends lists as map inserts do; n > 0 claims a
     * spot among the first n slabs of the pair's list and never extends it, or marks the
     * pair GH_STATUS_DEFERRED (status must be given) for the grouped appends. */
    uint32_t walk_slabs;
} GhSlabOpsParams;

/* A multimap insert pass's grouped appends: the pairs the tiled pass deferred, grouped by
 * bucket on the device, then each bucket's list walked once by one warp, which fills its
 * empty spots and links new slabs, filled before they are linked, at its tail.
 *
 * `runs` holds GH_SLAB_RUN_COUNTERS + 3 S words (S = slot_mask + 1), zeroed before the
 * tiled pass: the pairs it deferred (word 0, its GhSlabOpsParams.deferred), the places of
 * `grouped` handed out so far (word 1), then the S slots of an open-addressing table keyed
 * by bucket, in three arrays: bucket + 1 (0 for a free slot), the bucket's deferred pairs,
 * and its cursor into `grouped`. S is a power of two at least twice the buckets that can
 * come (the batch's elements, or every bucket, whichever is fewer). `grouped` (count words)
 * receives the batch indices of the deferred pairs, each bucket's together; count is below
 * 2^32. Statuses become DONE, or for pairs that found no free slab PENDING (ABSENT when
 * answer_all is set, the allocator's exhausted flag raised). */
#define GH_SLAB_RUN_COUNTERS 2u
typedef struct GhSlabRunsParams {
    GhSlabTable table;
    const uint32_t *keys;
    const uint32_t *values;
    uint8_t *status;
    uint32_t *runs;
    uint32_t *grouped;
    uint64_t count;
    uint32_t slot_mask;
    uint32_t answer_all;
} GhSlabRunsParams;

/* Multimap: the values of keys[i] into out[offsets[i] ..], at most counts[i] of them;
 * counts[i] then becomes how many were written, and *short_rows is set to 1 where that
 * is fewer (a concurrent batch removed some since they were counted). */
typedef struct GhSlabGatherParams {
    GhSlabTable table;
    const uint32_t *keys;
    uint32_t *counts;
    const uint64_t *offsets;
    uint32_t *out;
    uint32_t *short_rows;
    uint64_t count;
} GhSlabGatherParams;

/* Buckets in one chunk of the export: chunk c is buckets [c * GH_SLAB_CHUNK_BUCKETS,
 * (c + 1) * GH_SLAB_CHUNK_BUCKETS), the reserved-key buckets counted last. */
#define GH_SLAB_CHUNK_BUCKETS 32u

/* Per chunk of buckets: counts[c] = live pairs (count pass; when counts is null, only
 * their sum is added to *total), or its pairs written, in bucket order, from offsets[c]
 * up to offsets[c + 1] (never past it) into keys_out and values_out (export pass,
 * values_out null for sets). The export pass sets *short_chunks to 1 when a chunk found
 * fewer pairs than its range (a concurrent batch removed some since they were counted),
 * leaving the end of its range unwritten; short_chunks may be null. */
typedef struct GhSlabBucketsParams {
    GhSlabTable table;
    uint64_t *counts;
    uint64_t *total;
    const uint64_t *offsets;
    uint32_t *keys_out;
    uint32_t *values_out;
    uint32_t *short_chunks;
} GhSlabBucketsParams;

/* Readies the status of a pass that serves PENDING elements only: status[i] = DONE where
 * repeated (may be null) flags an earlier copy of a key that a map keeps the last copy
 * of, so that it is skipped, else PENDING. */
typedef struct GhSlabMarkParams {
    const uint8_t *repeated;
    uint8_t *status;
    uint64_t count;
} GhSlabMarkParams;

/* words[i] = value for i < count. */
typedef struct GhFillParams {
    uint32_t *words;
    uint64_t count;
    uint32_t value;
} GhFillParams;

#endif
