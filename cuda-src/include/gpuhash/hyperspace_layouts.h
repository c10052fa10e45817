/* The hyperspace index's layouts, shared by cuda-src/hyperspace and (through bindgen)
 * crates/gpuhash-hyperspace/src/layouts.rs. */
#ifndef GPUHASH_HYPERSPACE_LAYOUTS_H
#define GPUHASH_HYPERSPACE_LAYOUTS_H

#include <stdint.h>

#include "gpuhash/slab_alloc_layouts.h"
#include "gpuhash/slab_list_layouts.h"

/* A tuple is (key, A1..Ap, value), 1 <= p <= GH_HS_MAX_ATTRIBUTES. Field f names the key
 * (f = 0) or attribute f - 1; chain f of a super node holds field f, chain p + 1 the values. */
#define GH_HS_MAX_ATTRIBUTES 8u
#define GH_HS_MAX_FIELDS 9u
#define GH_HS_MAX_CHAINS 10u
#define GH_HS_KEY_FIELD 0u

/* A key slot claimed by an insert whose tuple is not written yet. With the slab lists'
 * empty and removed words, the three key words no tuple may use. */
#define GH_HS_BUSY_KEY 0xfffffffdu

/* Key slots are named by 64-bit ids that stay valid when the allocator grows (its light
 * variant moves every slab): a head's slot by its word in the heads array, with
 * GH_HS_HEAD_SLOT set; any other by its super node's slab address times 32 plus its lane,
 * with GH_HS_SLAB_SLOT set. An id of 0 names no slot. */
#define GH_HS_HEAD_SLOT 0x8000000000000000ull
#define GH_HS_SLAB_SLOT 0x4000000000000000ull

/* Per-item status of inserts: PENDING until served (and after a pass whose allocator ran
 * dry), then INSERTED or, for a key the index holds, PRESENT. */
#define GH_HS_PENDING 0u
#define GH_HS_INSERTED 1u
#define GH_HS_PRESENT 2u

/* One space: a grid of bucket_count = 2^(sum of bits) buckets. Bucket b's head super node
 * is the p + 2 slabs from heads + b * (p + 2) * 32: its key node, one node per attribute,
 * its value node. Every other super node is a run of p + 2 consecutive slabs of alloc,
 * claimed together, so node c of a super node lies c slabs after its key node. The key
 * node's lane 31 links the next super node; the other nodes' lane 31 repeat the link (node
 * c of the next super node) once the extension is published. */
typedef struct GhHsSpace {
    uint32_t *heads;
    uint32_t bucket_count;
    uint32_t attribute_count;
    uint32_t dimension_count;
    /* Dimension d hashes field dimension_field[d] to dimension_bits[d] bits, with its seed;
     * the first dimension gives the bucket's highest bits. */
    uint32_t dimension_field[GH_HS_MAX_FIELDS];
    uint32_t dimension_bits[GH_HS_MAX_FIELDS];
    uint32_t dimension_seed[GH_HS_MAX_FIELDS];
    GhSlabAllocContext alloc;
} GhHsSpace;

/* Tuples as structure of arrays: attribute a of tuple i at attributes[a * count + i]. */
typedef struct GhHsTuples {
    const uint32_t *keys;
    const uint32_t *attributes;
    const uint32_t *values;
    uint64_t count;
} GhHsTuples;

/* Tuples written by a kernel, same layout, `capacity` of them. */
typedef struct GhHsTuplesOut {
    uint32_t *keys;
    uint32_t *attributes;
    uint32_t *values;
    uint64_t capacity;
} GhHsTuplesOut;

/* buckets[i] = the bucket of tuple i in the space. */
typedef struct GhHsBucketsParams {
    GhHsSpace space;
    GhHsTuples tuples;
    uint32_t *buckets;
} GhHsBucketsParams;

/* Inserts the tuples whose status is GH_HS_PENDING. With unique set, a key the bucket
 * holds already (published or being inserted) answers GH_HS_PRESENT; without, the tuple
 * is appended whatever the bucket holds (a modify's new copy). A tuple that finds no free
 * super node stays PENDING and raises the allocator's exhausted flag. slots (may be null)
 * receives the id of each inserted tuple's key slot. */
typedef struct GhHsInsertParams {
    GhHsSpace space;
    GhHsTuples tuples;
    uint8_t *status;
    uint64_t *slots;
    uint32_t unique;
} GhHsInsertParams;

/* Looks tuples.keys[i] up in the bucket tuple i hashes to (only the space's dimensions
 * are read: a key space needs keys alone): found[i] = 1 and the tuple into out (slot i,
 * when out.keys is not null), and when slots is not null its key slot's id; or
 * found[i] = 0, slot 0 and the empty word as out's key. */
typedef struct GhHsGetParams {
    GhHsSpace space;
    GhHsTuples tuples;
    uint8_t *found;
    GhHsTuplesOut out;
    uint64_t *slots;
} GhHsGetParams;

/* Removes every live copy of tuples.keys[i] from the bucket that tuple i hashes to;
 * removed[i] (may be null) = copies removed. */
typedef struct GhHsDeleteParams {
    GhHsSpace space;
    GhHsTuples tuples;
    uint32_t *removed;
} GhHsDeleteParams;

/* Removes the copy whose key slot is slots[i], if it still holds keys[i] (a slot id of 0 is
 * skipped); removed[i] (may be null) = 1 when it did. */
typedef struct GhHsSlotDeleteParams {
    GhHsSpace space;
    const uint64_t *slots;
    const uint32_t *keys;
    uint64_t count;
    uint8_t *removed;
} GhHsSlotDeleteParams;

/* Subtasks of a search batch: subtask s = (query members[s / touched], its
 * (s % touched)-th bucket), the buckets of a query being every coordinate of the dimensions
 * it leaves free. queries holds GH_HS_MAX_FIELDS words a query of the whole batch (word f
 * the value of field f; only fields in field_mask count); members names the batch's
 * queries this group runs (query_count of them), so that every pass answers at the batch's
 * own query indices. */
typedef struct GhHsSubtaskParams {
    GhHsSpace space;
    const uint32_t *queries;
    const uint32_t *members;
    uint64_t query_count;
    uint32_t field_mask;
    uint64_t touched;
    uint32_t *subtask_query;
    uint32_t *subtask_bucket;
} GhHsSubtaskParams;

/* One search pass over subtasks (subtask_query[s], subtask_bucket[s]), s < subtask_count:
 * every live tuple of the bucket whose fields in field_mask equal the query's words,
 * scanning chain scan_field and checking the other named fields on the matching lanes.
 * Count pass (out.keys null): counts[q] += matches. Write pass: the matches of query q go
 * to out at offsets[q] + k for k < limits[q] and offsets[q] + k < out.capacity, cursors[q]
 * counting them (it may pass limits[q]: nothing is written there). With grouped set, a warp serves 32 subtasks at a
 * time and compares every subtask of one bucket on each node it reads (subtasks sorted by
 * bucket: warp pre-combination data sharing); else one subtask at a time (warp-cooperative
 * work sharing). */
typedef struct GhHsSearchParams {
    GhHsSpace space;
    const uint32_t *queries;
    const uint32_t *subtask_query;
    const uint32_t *subtask_bucket;
    uint64_t subtask_count;
    uint32_t field_mask;
    uint32_t scan_field;
    uint32_t grouped;
    uint64_t *counts;
    const uint64_t *offsets;
    const uint64_t *limits;
    unsigned long long *cursors;
    GhHsTuplesOut out;
} GhHsSearchParams;

/* Moves each query's matches from a write pass's padded layout to the answer: query q's
 * to[q + 1] - to[q] tuples from source position from[q] to answer position to[q]
 * (source.count is the padded capacity, the attributes' column stride). */
typedef struct GhHsCompactParams {
    GhHsTuples source;
    GhHsTuplesOut out;
    const uint64_t *from;
    const uint64_t *to;
    uint64_t query_count;
    uint32_t attribute_count;
} GhHsCompactParams;

/* Settles the rows of a write pass, one thread a query: a query whose found[q] breaks its
 * room[q] (passes it; with exact set, differs from it) raises *flag, as does *total past
 * capacity when total is given; with pad set, room[q] then becomes found[q] + found[q] / 4
 * + 8, the room the next write pass lays out. flag and total may be null. */
typedef struct GhHsRowsParams {
    const uint64_t *found;
    uint64_t *room;
    uint64_t count;
    uint32_t exact;
    uint32_t pad;
    unsigned long long *flag;
    const uint64_t *total;
    uint64_t capacity;
} GhHsRowsParams;

/* *total += live tuples of every bucket (counts null), or counts[b] = live tuples of
 * bucket b. */
typedef struct GhHsCountParams {
    GhHsSpace space;
    unsigned long long *total;
    uint64_t *counts;
} GhHsCountParams;

/* Every live tuple of the space into out, packed from 0 in no particular order: *cursor
 * counts them (it may pass out.capacity: nothing is written there). */
typedef struct GhHsExportParams {
    GhHsSpace space;
    unsigned long long *cursor;
    GhHsTuplesOut out;
} GhHsExportParams;

/* histogram[keys[i] & mask] += 1 (histogram zeroed by the caller); with order set, the
 * scatter pass instead: order[cursors[keys[i] & mask]++] = i. */
typedef struct GhHsPartitionParams {
    const uint32_t *keys;
    uint64_t count;
    uint32_t mask;
    unsigned long long *histogram;
    unsigned long long *cursors;
    uint32_t *order;
} GhHsPartitionParams;

/* values[i * width + c] = source[order[i] * width + c] for i < count and c < width (a
 * gather by permutation of rows of width words). */
typedef struct GhHsPermuteParams {
    const uint32_t *source;
    const uint32_t *order;
    uint32_t *values;
    uint64_t count;
    uint32_t width;
} GhHsPermuteParams;

/* rows[i * (p + 2) + c] = field c of tuple i for i < tuples.count: the key (c = 0), the
 * attributes (c = 1..p), the value (c = p + 1), as the chains of a super node number them. */
typedef struct GhHsTupleRowsParams {
    GhHsTuples tuples;
    uint32_t attribute_count;
    uint32_t *rows;
} GhHsTupleRowsParams;

/* nodes[b] = ceil(histogram[b] / 31), the super nodes bucket b takes, for b < bucket_count;
 * totals[0] += every bucket's, totals[1] += those past the buckets' heads (totals zeroed by
 * the caller). */
typedef struct GhHsNodeCountsParams {
    const unsigned long long *histogram;
    unsigned long long *nodes;
    unsigned long long *totals;
    uint32_t bucket_count;
} GhHsNodeCountsParams;

/* *fault becomes nonzero when some key of keys[0..count) is reserved or met twice: each key
 * is put in table (a power of two of slots, mask + 1, at least twice count, zeroed by the
 * caller; a slot holds key + 1), probed linearly from a hash of the key and seed. */
typedef struct GhHsKeyFaultsParams {
    const uint32_t *keys;
    uint64_t count;
    uint32_t *table;
    uint32_t mask;
    uint32_t seed;
    uint32_t *fault;
} GhHsKeyFaultsParams;

/* Bulk build into an empty space: bucket b's tuples are tuples[offsets[b]..offsets[b + 1]]
 * (sorted by bucket), its super nodes node_starts[b]..node_starts[b + 1] of node_count in
 * all (ceil(tuples / 31) a bucket). links[t] is the allocator address of super node t,
 * past a bucket's head (the head's entry is unused): gh_hs_build_links fills it, then
 * gh_hs_build writes super node t whole, one warp a node, linking it to links[t + 1]. */
typedef struct GhHsBuildParams {
    GhHsSpace space;
    /* The tuples sorted by bucket, as rows (see GhHsTupleRowsParams). */
    const uint32_t *rows;
    const uint64_t *offsets;
    const uint64_t *node_starts;
    uint32_t *links;
    uint64_t node_count;
} GhHsBuildParams;

/* words[i] = value for i < count. */
typedef struct GhHsFillParams {
    uint32_t *words;
    uint64_t count;
    uint32_t value;
} GhHsFillParams;

/* A column scan (cuda-src/hyperspace/column_scan.cu): the baseline that answers searches
 * by reading every tuple's columns, as a dataframe library would. The distinct value
 * lists of a batch's queries that name the same fields are its entries; a launch serves
 * up to GH_HS_SCAN_CHUNK of them from a hash table of GH_HS_SCAN_SLOTS slots in each
 * block's shared memory (half full at most, so every probe ends at an empty slot). A
 * block has GH_HS_SCAN_THREADS threads; a warp reads GH_HS_SCAN_UNROLL tuples a lane at
 * a time, so that several loads of a column are in flight. */
#define GH_HS_SCAN_CHUNK 2048u
#define GH_HS_SCAN_SLOTS 4096u
#define GH_HS_SCAN_THREADS 512u
#define GH_HS_SCAN_UNROLL 4u

/* One pass of a column scan over the tuples (tuples.count below 2^32) for entry_count
 * entries (at most GH_HS_SCAN_CHUNK, all distinct): entry e asks that field fields[j] of
 * a tuple hold entry_values[e * field_count + j] for every j < field_count (distinct
 * fields below GH_HS_MAX_FIELDS, field 0 the key). Count pass (out.keys null):
 * entry_counts[e] += the tuples meeting entry e. Write pass: the k-th tuple meeting entry
 * e (in no particular order), k = entry_cursors[e]++, goes to out at offsets[q] + k for
 * every query q of entry_queries[entry_query_offsets[e] .. entry_query_offsets[e + 1]],
 * while k < entry_counts[e] (the count pass's). */
typedef struct GhHsScanParams {
    GhHsTuples tuples;
    uint32_t attribute_count;
    uint32_t field_count;
    uint32_t fields[GH_HS_MAX_FIELDS];
    const uint32_t *entry_values;
    uint32_t entry_count;
    uint32_t *entry_counts;
    uint32_t *entry_cursors;
    const uint32_t *entry_query_offsets;
    const uint32_t *entry_queries;
    const uint64_t *offsets;
    GhHsTuplesOut out;
} GhHsScanParams;

#endif
