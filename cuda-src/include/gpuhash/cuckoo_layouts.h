/* Kernel parameter layouts of gpuhash-cuckoo (DyHash), read by the kernels in
 * cuda-src/cuckoo/ and, through bindgen, by crates/gpuhash-cuckoo/src/layouts.rs.
 * Plain C; every kernel takes exactly one of these structs by value. */
#ifndef GPUHASH_CUCKOO_LAYOUTS_H
#define GPUHASH_CUCKOO_LAYOUTS_H

#include <stdint.h>

/* Most subtables a table may have (the paper's d). */
#define GH_CUCKOO_MAX_SUBTABLES 8u
/* Most 4-byte words a value may take (64 bytes). */
#define GH_CUCKOO_MAX_VALUE_WORDS 16u
/* Lanes that read one 128-byte bucket together (the paper's warp), 64 bytes a
 * lane: a warp serves sixteen buckets at a time. On the H100, tiles of 4 lanes
 * inserted as fast and found slower at high load, tiles of 8 were slower at
 * both (docs/benchmarks/cuckoo.md). */
#define GH_CUCKOO_TILE 2u
/* Bytes of the slot words of one bucket: one cache line. */
#define GH_CUCKOO_BUCKET_BYTES 128u
/* Bucket layouts (GhCuckooTable.layout, GhCuckooResizeParams.layout): the host
 * launches the kernels of the table's layout (suffix _u32 / _u64 split, _p32
 * packed); a kernel knows its own and does not read the field.
 * Split: a slot is a key (32 u32 or 16 u64 a bucket); values lie in an array
 * apart (struct of arrays), so a miss reads keys only and values may be 4 to 64
 * bytes. Packed: a slot is one 8-byte word, a u32 key in its low half and its
 * 4-byte value in the high half, 16 a bucket; the values array is empty, and a
 * hit reads its value in the same half line as its key. Both mark an empty slot
 * with the all-ones word. */
#define GH_CUCKOO_LAYOUT_SPLIT 0u
#define GH_CUCKOO_LAYOUT_PACKED 1u
/* Slots of a packed bucket. */
#define GH_CUCKOO_PACKED_SLOTS 16u
/* `exclude` value meaning every subtable may take pairs. */
#define GH_CUCKOO_NO_EXCLUDE 0xffffffffu
/* Pairs a thread of the place kernel takes from each chunk its block claims. */
#define GH_CUCKOO_PLACE_PER_THREAD 8u
/* What the place kernel did with a pair (GhCuckooPlaceParams.status). */
#define GH_CUCKOO_PENDING 0u   /* all its buckets were full: the insert kernel takes it */
#define GH_CUCKOO_DONE 1u      /* placed, or not the place kernel's to place */
#define GH_CUCKOO_DUPLICATE 2u /* an equal key of the batch is placed: its value comes later */
/* Word indices of the reserved-key side slot: flag, lock, then the value. */
#define GH_CUCKOO_SIDE_PRESENT 0u
#define GH_CUCKOO_SIDE_LOCK 1u
#define GH_CUCKOO_SIDE_VALUE 2u

/* One subtable: `buckets` buckets of GH_CUCKOO_BUCKET_BYTES of slot words
 * (keys, or packed pairs: the layout above). The bucket of a key is H_i(key) mod buckets, where H_i depends on the
 * key and the subtable's coefficients only, so doubling `buckets` sends bucket
 * loc to loc or loc + buckets, and halving sends loc and loc + buckets/2 to loc.
 *
 * Early exit: every insert tries a key's buckets in its probe order and a
 * bucket's slots home half first, so while no pair has left a bucket, an empty
 * slot in it proves that no key went past it (to its other half or to a later
 * bucket). A lookup stops there. A bucket some pair may have gone past that is
 * not full any more (a remove emptied a slot, a resize rebuilt it from a full
 * or dirty bucket, a key skipped it) is marked dirty, and lookups go on past it. */
typedef struct GhCuckooSubtable {
    /* buckets * slots slot words (split: uint32_t or uint64_t keys; packed: uint64_t
     * pairs); all ones marks an empty slot. */
    void *keys;
    /* Split: buckets * slots * value_words words, slot s of bucket b at
     * (b * slots + s) * value_words. Packed: unused. */
    uint32_t *values;
    /* One lock word per bucket, 0 when free. */
    uint32_t *locks;
    /* One bit per bucket (bit b % 32 of word b / 32): set when the bucket is dirty. */
    uint32_t *dirty;
    uint64_t buckets;
    /* ceil(2^64 / buckets): H mod buckets with two multiplications (Lemire's fastmod). */
    uint64_t fastmod;
    /* Universal hash coefficients: H = ((a * mix(key) + b) mod p), folded to 32 bits. */
    uint64_t hash_a;
    uint64_t hash_b;
} GhCuckooSubtable;

/* The whole table as kernels see it. */
typedef struct GhCuckooTable {
    GhCuckooSubtable sub[GH_CUCKOO_MAX_SUBTABLES];
    /* Pairs held by each subtable, kept by the kernels. */
    uint64_t *counts;
    /* The side slot of the reserved (all ones) key: present flag, lock, value words. */
    uint32_t *side;
    uint32_t subtables;
    uint32_t value_words;
    /* GH_CUCKOO_LAYOUT_*. */
    uint32_t layout;
    uint32_t pad;
} GhCuckooTable;

/* Where a new pair starts: the first subtable t with choice(key) < thresholds[t],
 * choice a 32-bit hash of the key and `seed` (fixed for a table, so a lookup can
 * probe first the subtable a pair would start in now); thresholds are cumulative,
 * the last 2^32 - 1. A key's probe order is that subtable, then the next ones
 * round by index. The thresholds follow the subtables' sizes and counts, so they move from
 * batch to batch: a key whose choice lies in settled_lo[t] ..= settled_hi[t] of
 * its first subtable t has started in t under every threshold any insert used
 * since the table was last emptied, so its pairs followed today's probe order
 * and a lookup may stop early for it; for other keys lookups read all d buckets. */
typedef struct GhCuckooHome {
    uint32_t thresholds[GH_CUCKOO_MAX_SUBTABLES];
    uint32_t settled_lo[GH_CUCKOO_MAX_SUBTABLES];
    uint32_t settled_hi[GH_CUCKOO_MAX_SUBTABLES];
    uint32_t seed;
} GhCuckooHome;

/* The table as code outside gpuhash sees it: what gpuhash_cuckoo::DeviceView
 * hands out, passed by value to the caller's own kernel and probed there with
 * gh_cuckoo_find_u32 / _u64 (gpuhash/cuckoo_view.cuh). Its layout is part of the
 * crate's public interface: fields are only ever added at the end. */
typedef struct GhCuckooView {
    GhCuckooTable table;
    GhCuckooHome home;
    /* 32-bit words of a key: 1 for uint32_t keys, 2 for uint64_t keys. */
    uint32_t key_words;
    uint32_t pad;
} GhCuckooView;

/* Looks up keys[i] for i < count, probing first the subtable `home` names. found_out[i] = 1 when present (may be null),
 * values_out[i * value_words ...] = its value when present (may be null, else
 * left unwritten for misses); *hits (may be null) gains the number found. */
typedef struct GhCuckooFindParams {
    GhCuckooTable table;
    GhCuckooHome home;
    const void *keys;
    uint32_t *values_out;
    uint8_t *found_out;
    uint64_t *hits;
    uint64_t count;
} GhCuckooFindParams;

/* The lookups of several tables of one layout in one launch: list[i] as a find of its
 * own, by blocks_per_part blocks of the launch (parts * blocks_per_part in all). */
typedef struct GhCuckooFindManyParams {
    const GhCuckooFindParams *list;
    uint32_t parts;
    uint32_t blocks_per_part;
} GhCuckooFindManyParams;

/* A lookup whose every key names the table it may be in: keys[i] is looked up in
 * routes[route_of[i]]; a key whose route is past route_count is not looked up, and
 * its answers are not written. The routes share a bucket layout and value width
 * (value_words); each is a table on the device or an image read in place. found_out
 * is written for every routed key, values_out (may be null) where found. */
typedef struct GhCuckooFindRoutedParams {
    const GhCuckooView *routes;
    const uint32_t *route_of;
    const void *keys;
    uint32_t *values_out;
    uint8_t *found_out;
    uint64_t count;
    uint32_t route_count;
    uint32_t value_words;
} GhCuckooFindRoutedParams;

/* Overwrites the value of every keys[i] present with found[i] == select, each
 * under its bucket's lock, so that of duplicate keys exactly one value wins.
 * When old_values is not null, the value replaced is saved there first (for
 * undoing the batch). Keys do not move during this kernel. */
typedef struct GhCuckooUpdateParams {
    GhCuckooTable table;
    const void *keys;
    const uint32_t *values;
    const uint8_t *found;
    uint32_t *old_values;
    uint64_t count;
    uint32_t select;
    uint32_t pad;
} GhCuckooUpdateParams;

/* The lock-free first pass of an insert batch of keys the table does not hold:
 * pair i (i < count, skip == null or skip[i] == 0) claims the first empty slot of
 * the first of its d buckets, in the lookup's order, that has one, with a CAS on
 * the slot word, then writes its value (split; packed, the CAS wrote it). It never evicts, so during this kernel a
 * slot only goes from empty to full, and a full bucket stays full: two equal keys
 * of the batch, which try a bucket's slots in the same key-fixed order, cannot
 * both be placed (the second sees the first, or loses the CAS to it), and no
 * other pass can read a value before its writer is done. status[i] says what
 * became of pair i (GH_CUCKOO_PENDING, _DONE, _DUPLICATE; the reserved key is
 * left pending); pending pairs are also appended to pending_keys and
 * pending_values (room for count pairs), *pending counting them; *duplicates
 * gains the number of duplicates. */
typedef struct GhCuckooPlaceParams {
    GhCuckooTable table;
    GhCuckooHome home;
    const void *keys;
    const uint32_t *values;
    const uint8_t *skip;
    uint8_t *status;
    void *pending_keys;
    uint32_t *pending_values;
    uint64_t *pending;
    uint64_t *duplicates;
    /* Zero before the launch: the pairs handed out to blocks so far. */
    uint64_t *cursor;
    uint64_t count;
    /* Pairs i < quarter_until read the 32-byte quarter of their first bucket that
     * holds their first slot before the home half (one sector, enough while buckets
     * are mostly empty: blocks take the batch in order, so these go in first). */
    uint64_t quarter_until;
} GhCuckooPlaceParams;

/* Inserts (keys[i], values[i]) for i < count with skip == null or skip[i] == 0,
 * by voter coordination: each tile of GH_CUCKOO_TILE lanes votes a leader among
 * its lanes with pending pairs, the leader locks the bucket with one atomic, the
 * tile places the pair (replacing the value of an equal key) or swaps it with a
 * resident (one whose next bucket has room, where the tile sees one), which moves
 * on to the next subtable of its own probe order.
 * A lane whose lock fails
 * lets the tile re-vote. A pair still homeless after max_evictions swaps goes to
 * the failed list; every key swapped out is logged (for the duplicate check). */
typedef struct GhCuckooInsertParams {
    GhCuckooTable table;
    const void *keys;
    const uint32_t *values;
    const uint8_t *skip;
    uint64_t count;
    /* When not null, the pairs are the first min(*count_at, count) only: a count an
     * earlier kernel of the stream left on the device (the place kernel's pending
     * pairs), so that the host need not read it first. */
    const uint64_t *count_at;
    /* Capacity count. */
    void *failed_keys;
    uint32_t *failed_values;
    uint64_t *failed_count;
    /* Capacity log_capacity; *log_count may pass it (the overflow is then known). */
    void *log_keys;
    uint64_t *log_count;
    uint64_t log_capacity;
    /* Home subtable of a new pair. */
    GhCuckooHome home;
    /* Varies the random choice of the pair a full bucket gives up, launch to launch. */
    uint32_t salt;
    uint32_t max_evictions;
    /* Subtable that takes no pairs (downsizing residuals), or GH_CUCKOO_NO_EXCLUDE:
     * probe orders skip it, marking the skipped bucket dirty. */
    uint32_t exclude;
} GhCuckooInsertParams;

/* Ranges of buckets an insert batch is sorted by (GhCuckooPartitionParams):
 * each subtable's buckets cut into GH_CUCKOO_PARTS_PER_SUBTABLE ranges of equal
 * size, subtable 0's first; GH_CUCKOO_PARTITIONS counters cover the most
 * subtables a table may have. */
#define GH_CUCKOO_PART_BITS 6u
#define GH_CUCKOO_PARTS_PER_SUBTABLE (1u << GH_CUCKOO_PART_BITS)
#define GH_CUCKOO_PARTITIONS (GH_CUCKOO_PARTS_PER_SUBTABLE * GH_CUCKOO_MAX_SUBTABLES)
/* Pairs a thread of the scatter pass sorts at a time. */
#define GH_CUCKOO_SORT_PER_THREAD 8u
/* Threads a block of the scatter pass and of the scan has (one a pair of partitions). */
#define GH_CUCKOO_SORT_THREADS (GH_CUCKOO_PARTITIONS / 2)

/* Sorts an insert batch by the partition of each pair's first bucket (the bucket
 * of the subtable it starts in, as the place kernel picks it). The place kernel
 * takes the pairs in order, so the pairs in flight at one time then touch one or
 * two partitions' lines, which stay in L2, instead of lines all over the table.
 * Three launches: the count pass adds each partition's pairs to offsets[p]; the
 * scan turns those into first places; the scatter pass moves pair i (keys,
 * values) to keys_out / values_out at the next place of its partition (offsets[p]
 * then ends as the partition's end). Order within a partition is not kept. */
typedef struct GhCuckooPartitionParams {
    GhCuckooTable table;
    GhCuckooHome home;
    const void *keys;
    const uint32_t *values;
    void *keys_out;
    uint32_t *values_out;
    /* GH_CUCKOO_PARTITIONS counters, zero before the count pass. */
    uint64_t *offsets;
    uint64_t count;
} GhCuckooPartitionParams;

/* Which copies of a key the remove kernel empties (GhCuckooRemoveParams.copies). */
#define GH_CUCKOO_REMOVE_FIRST 0u      /* the first found (a user's remove) */
#define GH_CUCKOO_REMOVE_ALL 1u        /* every copy in its d buckets (undoing a batch) */
#define GH_CUCKOO_REMOVE_DUPLICATES 2u /* all but the copy in the lowest subtable: after an
                                        * insert batch, a key of the batch that was swapped
                                        * out may have come to rest in a second place */

/* The report a remove launch writes when GhCuckooRemoveParams.report is not null,
 * for the host to read with the batch's counters in one copy: once every block has
 * run, the table's counts (words 0 to GH_CUCKOO_MAX_SUBTABLES - 1, one a subtable)
 * and the side slot's present flag; the word after them counts the blocks done
 * (zero before the launch, and again after it). */
#define GH_CUCKOO_REPORT_SIDE GH_CUCKOO_MAX_SUBTABLES
#define GH_CUCKOO_REPORT_DONE (GH_CUCKOO_MAX_SUBTABLES + 1u)
#define GH_CUCKOO_REPORT_WORDS (GH_CUCKOO_MAX_SUBTABLES + 2u)

/* Removes copies of keys[i] for i < count (skip as for insert), as `copies` says;
 * the reserved key's side slot empties except for GH_CUCKOO_REMOVE_DUPLICATES.
 * removed_out[i] (may be null) becomes 1 when this launch emptied a slot of
 * keys[i], else 0 (of equal keys in one launch, one empties the slot and the
 * others find it empty); emptied slots leave the counts and their buckets turn
 * dirty. */
typedef struct GhCuckooRemoveParams {
    GhCuckooTable table;
    const void *keys;
    const uint8_t *skip;
    uint8_t *removed_out;
    uint64_t count;
    /* When not null, the keys are the first min(*count_at, count) only: the
     * eviction log's length, which the insert kernel just counted, read on the
     * device so that the host need not wait for it. */
    const uint64_t *count_at;
    /* When not null, GH_CUCKOO_REPORT_WORDS words where the launch's last block
     * writes the report above. */
    uint64_t *report;
    uint32_t copies;
    uint32_t pad;
} GhCuckooRemoveParams;

/* Moves every pair of subtable `from` (the old arrays) into `to` (new arrays of
 * twice or half the buckets, keys all empty, locks and dirty bits zero).
 * Upsizing: bucket loc goes to loc or loc + from.buckets, never a conflict.
 * Downsizing: buckets loc and loc + to.buckets merge into loc; what does not fit
 * goes to the residual list (residual_keys, residual_values, *residual_count), to
 * be inserted into the other subtables. Each key goes to its home half while
 * that has room (home slots from `seed`, the table's GhCuckooHome.seed); a new
 * bucket is dirty when it is not full and one of its old buckets was full or
 * dirty (keys may have gone past that). */
typedef struct GhCuckooResizeParams {
    GhCuckooSubtable from;
    GhCuckooSubtable to;
    void *residual_keys;
    uint32_t *residual_values;
    uint64_t *residual_count;
    uint32_t value_words;
    uint32_t seed;
    /* GH_CUCKOO_LAYOUT_*. */
    uint32_t layout;
    uint32_t pad;
} GhCuckooResizeParams;

/* Appends every pair of the table's subtables to keys_out / values_out, with
 * *written counting them; capacity is the room the outputs have. */
typedef struct GhCuckooExportParams {
    GhCuckooTable table;
    void *keys_out;
    uint32_t *values_out;
    uint64_t *written;
    uint64_t capacity;
} GhCuckooExportParams;

/* words[i] = value for i < count. */
typedef struct GhCuckooFillParams {
    uint32_t *words;
    uint64_t count;
    uint32_t value;
    uint32_t pad;
} GhCuckooFillParams;

#endif
