// Kernel parameter layouts of gpuhash-swap: the partition of a batch by child table.
#pragma once

#include <stdint.h>

// Threads a block of every swap kernel.
#define GH_SWAP_THREADS 256u
// The seed of the child choice, xored into the key before fmix64, so that the choice
// does not follow the hashing of the child tables themselves.
#define GH_SWAP_SEED 0x5bd1e9955bd1e995ull

// Chooses each key's child and counts the keys of each child, and of those the keys that
// the child's miss filter passes where the child's filter is consulted: both counts come
// to the host in one copy, which the partition needs anyway.
typedef struct GhSwapCountParams {
    const uint32_t* keys;      // key_words words a key
    uint64_t count;
    uint32_t key_words;        // 1 or 2
    uint32_t children;
    uint32_t* child_of;        // out: the child of each key (may be null: counts alone)
    uint32_t* counts;          // in: zeros; out: keys a child
    const uint64_t* filters;   // each child's filter address (0 where not consulted), or null
    uint32_t blocks;           // blocks of every child's filter
    uint32_t reserved;
    uint32_t* passed;          // in: zeros; out: keys a consulted filter passed, a child
    const uint8_t* in_pass;    // nonzero for each child of the pass, or null for all: the
                               // keys of the others get no child (all ones) and no count
    uint64_t seed;             // the choice's seed: GH_SWAP_SEED for the table's children
    uint32_t* ruled_out;       // in: zeros; out: keys a consulted filter ruled out, a
                               // child (may be null). Those keys get no child and no count
                               // either: a segment moves none of them.
} GhSwapCountParams;

// Moves each key (and value) into its child's range, recording where it came from; keys
// with no child (all ones, left out by the count) stay out.
typedef struct GhSwapScatterParams {
    const uint32_t* keys;
    const uint8_t* values;      // null when the verb has no values
    const uint32_t* child_of;
    uint64_t count;
    uint32_t key_words;
    uint32_t value_bytes;
    uint32_t* cursors;          // in: each child's first place; advanced by the kernel
    uint32_t children;          // cursors' length
    uint32_t reserved;
    uint32_t* out_keys;
    uint8_t* out_values;        // null with values
    uint32_t* out_index;        // the input place of each partitioned element
} GhSwapScatterParams;

// Puts answers back in input order: target[index[i]] = source[i], where found is null
// or found[i] != 0.
typedef struct GhSwapGatherParams {
    const uint8_t* source;
    const uint32_t* index;
    const uint8_t* found;
    uint64_t count;
    uint32_t element_bytes;
    uint32_t reserved;
    uint8_t* target;
} GhSwapGatherParams;

// Places in the batch of elements picked from a partitioned segment: target[i] =
// offset + index[picked[i]], where index holds each partitioned element's place in the
// segment and offset is the segment's start in the batch. A null picked picks element i
// itself; a null index is the identity (with both null, target[i] = offset + i).
typedef struct GhSwapPlacesParams {
    const uint32_t* index;
    const uint32_t* picked;
    uint64_t count;
    uint64_t offset;
    uint32_t* target;
} GhSwapPlacesParams;

// Miss filters: a blocked Bloom filter a child, kept in device memory while the child is on
// the host, so that a lookup of a key the child does not hold never crosses the bus. A
// block is GH_SWAP_FILTER_BLOCK_WORDS words (256 bits, one 32-byte sector); a key sets one
// bit in each word of its block (a split block Bloom filter).
#define GH_SWAP_FILTER_BLOCK_WORDS 8u

// Adds keys to one child's filter.
typedef struct GhSwapFilterAddParams {
    const uint32_t* keys;  // key_words words a key
    uint64_t count;
    uint32_t key_words;
    uint32_t blocks;       // blocks of the filter
    uint32_t* filter;      // blocks * GH_SWAP_FILTER_BLOCK_WORDS words
} GhSwapFilterAddParams;

