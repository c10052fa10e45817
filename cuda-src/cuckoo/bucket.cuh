// A DyHash bucket and the tile that reads it: key traits (the empty key, the
// subtable hash family), the bucket layouts (split: slots of keys, values apart;
// packed: slots of whole pairs), tiles of GH_CUCKOO_TILE lanes that read one
// 128-byte bucket (or one 64-byte half of it) together or one lane that reads
// it alone, and where a slot's value lies.
#pragma once

#include "gpuhash/cuckoo_layouts.h"
#include "gpuhash/hash.cuh"

namespace gh_cuckoo {

constexpr uint32_t kTile = GH_CUCKOO_TILE;
constexpr uint32_t kMaxSub = GH_CUCKOO_MAX_SUBTABLES;
constexpr uint32_t kMaxWords = GH_CUCKOO_MAX_VALUE_WORDS;
// A bucket's line in halves: on the H100 a random read fetches 64 bytes of
// DRAM even for one 32-byte sector (ncu, benches/probes/value_reads.cu), so a
// half line is the least a lookup can read for its cost.
constexpr uint32_t kHalfBytes = 64;
constexpr uint32_t kHalves = GH_CUCKOO_BUCKET_BYTES / kHalfBytes;
static_assert(kHalves == 2, "a bucket is a key's home half and the other half");

template <typename K>
struct Keys;

// u32 keys: the subtable hash family of 32-bit keys.
template <>
struct Keys<uint32_t> {
    static constexpr uint32_t kEmpty = 0xffffffffu;

    // ((a * fmix32(key) + b) mod (2^32 - 5)): fmix32 is a bijection, so keys
    // that agree in many bits still spread; a, b < p keep the product in 64 bits.
    __device__ static __forceinline__ uint32_t hash(uint32_t key, uint64_t a, uint64_t b) {
        uint64_t mixed = a * (uint64_t)gh_fmix32(key) + b;
        return (uint32_t)(mixed % GH_PRIME32);
    }

    __device__ static __forceinline__ uint32_t choice(uint32_t key, uint32_t seed) {
        return gh_fmix32(gh_fmix32(key) ^ seed);
    }
};

// u64 keys.
template <>
struct Keys<uint64_t> {
    static constexpr uint64_t kEmpty = 0xffffffffffffffffull;

    // ((a * (fmix64(key) mod p) + b) mod (2^61 - 1)), folded to 32 bits.
    __device__ static __forceinline__ uint32_t hash(uint64_t key, uint64_t a, uint64_t b) {
        uint64_t k = gh_reduce61(gh_fmix64(key));
        uint64_t lo = a * k;
        uint64_t hi = __umul64hi(a, k);
        uint64_t high_part = (hi << 3) | (lo >> 61);
        uint64_t product = gh_reduce61(high_part + (lo & GH_PRIME61));
        uint64_t h = gh_reduce61(product + b);
        return (uint32_t)(h ^ (h >> 32));
    }

    __device__ static __forceinline__ uint32_t choice(uint64_t key, uint32_t seed) {
        return (uint32_t)gh_fmix64(gh_fmix64(key) ^ seed);
    }
};

// What a bucket's slot word is read and claimed as: 16-byte vector loads of
// whole words (a u64 word is read as an element of a ulonglong2, so a reader
// never sees half of one that a CAS or a store of another lane replaces), and
// a CAS of the whole word.
template <typename W>
struct Words;

template <>
struct Words<uint32_t> {
    using Vec = uint4;

    template <uint32_t N>
    __device__ static __forceinline__ void unpack(const uint4 &raw, uint32_t j, uint32_t (&out)[N]) {
        out[4 * j] = raw.x;
        out[4 * j + 1] = raw.y;
        out[4 * j + 2] = raw.z;
        out[4 * j + 3] = raw.w;
    }

    __device__ static __forceinline__ uint32_t cas(uint32_t *slot, uint32_t expected, uint32_t value) {
        return atomicCAS(slot, expected, value);
    }
};

template <>
struct Words<uint64_t> {
    using Vec = ulonglong2;

    template <uint32_t N>
    __device__ static __forceinline__ void unpack(const ulonglong2 &raw, uint32_t j, uint64_t (&out)[N]) {
        out[2 * j] = raw.x;
        out[2 * j + 1] = raw.y;
    }

    __device__ static __forceinline__ uint64_t cas(uint64_t *slot, uint64_t expected, uint64_t value) {
        return atomicCAS((unsigned long long *)slot, (unsigned long long)expected,
                         (unsigned long long)value);
    }
};

// How many slot words of type W a 128-byte bucket holds, and how a tile or a
// lane splits them.
template <typename W>
struct SlotsOf {
    static constexpr uint32_t kSlots = GH_CUCKOO_BUCKET_BYTES / sizeof(W);
    static constexpr uint32_t kPerLane = kSlots / kTile;
    static constexpr uint32_t kHalfSlots = kSlots / kHalves;
    static constexpr uint32_t kPerLaneInHalf = kHalfSlots / kTile;
};

// Bucket layouts (GH_CUCKOO_LAYOUT_*): every step header takes one as L and
// reads a bucket as L::kSlots slot words of type L::Word, matching keys by
// L::key_of. The all-ones word marks an empty slot in both, and its key part is
// the reserved all-ones key, which never enters a bucket: so a slot is empty
// exactly when its key part is the reserved key.
//
// Split: struct of arrays. A slot word is the key; its value lies in the
// subtable's values array, at slot_index * value_words.
template <typename K>
struct Split : SlotsOf<K> {
    using Key = K;
    using Word = K;
    static constexpr bool kPacked = false;
    static constexpr Word kEmptyWord = Keys<K>::kEmpty;

    __device__ static __forceinline__ Key key_of(Word w) { return w; }
    // The word a pair of this key and first value word claims its slot with.
    __device__ static __forceinline__ Word word_of(Key key, uint32_t) { return key; }
};

// Packed: a u32 key and its 4-byte value in one 64-bit word (key low, value
// high), 16 a bucket, so a hit reads its value in the same sector as its key;
// the subtable's values array is unused. A pair is claimed, replaced and
// emptied as one word, so no reader ever sees a key with half a value.
struct Packed32 : SlotsOf<uint64_t> {
    using Key = uint32_t;
    using Word = uint64_t;
    static constexpr bool kPacked = true;
    static constexpr Word kEmptyWord = 0xffffffffffffffffull;

    __device__ static __forceinline__ Key key_of(Word w) { return (uint32_t)w; }
    __device__ static __forceinline__ uint32_t value_of(Word w) { return (uint32_t)(w >> 32); }
    __device__ static __forceinline__ Word word_of(Key key, uint32_t value) {
        return ((uint64_t)value << 32) | key;
    }
};

// A tile: GH_CUCKOO_TILE consecutive lanes of a warp working as one.
struct Tile {
    uint32_t base;  // first lane of the tile in the warp
    uint32_t mask;  // the tile's lanes, for *_sync intrinsics
    uint32_t rank;  // this lane's place in the tile

    __device__ static __forceinline__ Tile mine() {
        uint32_t lane = threadIdx.x & 31u;
        Tile t;
        t.base = lane & ~(kTile - 1u);
        t.mask = ((1u << kTile) - 1u) << t.base;
        t.rank = lane - t.base;
        return t;
    }

    // Bit r set when the tile's lane r has `pred`.
    __device__ __forceinline__ uint32_t ballot(bool pred) const {
        return (__ballot_sync(mask, pred) >> base) & ((1u << kTile) - 1u);
    }

    template <typename T>
    __device__ __forceinline__ T shfl(T v, uint32_t from) const {
        return __shfl_sync(mask, v, (int)from, (int)kTile);
    }

    __device__ __forceinline__ uint32_t lanes_below() const { return (1u << rank) - 1u; }
};

__device__ __forceinline__ uint64_t tile_index() {
    return ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / kTile;
}

__device__ __forceinline__ uint64_t tile_count() {
    return (uint64_t)gridDim.x * blockDim.x / kTile;
}

// The N slot words that lane `rank` of the readers holds of the piece of a
// bucket starting `offset` bytes in: `offset` / sizeof(Word) + rank * N onwards.
// `coherent` reads bypass L1, for buckets that other warps change while this
// kernel runs.
template <typename L, uint32_t N>
__device__ __forceinline__ void load_words(const GhCuckooSubtable &s, uint64_t bucket, uint32_t offset,
                                           uint32_t rank, bool coherent, typename L::Word (&out)[N]) {
    using W = typename L::Word;
    using Vec = typename Words<W>::Vec;
    constexpr uint32_t kLoads = N * sizeof(W) / 16;
    const Vec *piece = reinterpret_cast<const Vec *>(static_cast<const char *>(s.keys) +
                                                     bucket * GH_CUCKOO_BUCKET_BYTES + offset) +
                       rank * kLoads;
    Vec raw[kLoads];
#pragma unroll
    for (uint32_t j = 0; j < kLoads; ++j) raw[j] = coherent ? __ldcg(piece + j) : __ldg(piece + j);
#pragma unroll
    for (uint32_t j = 0; j < kLoads; ++j) Words<W>::unpack(raw[j], j, out);
}

// The lane's 128 / GH_CUCKOO_TILE bytes of a bucket, read by a tile.
template <typename L>
__device__ __forceinline__ void load_slice(const GhCuckooSubtable &s, uint64_t bucket, uint32_t rank,
                                           bool coherent, typename L::Word (&out)[L::kPerLane]) {
    load_words<L>(s, bucket, 0, rank, coherent, out);
}

// One half of a bucket: N is kPerLaneInHalf when a tile reads it, kHalfSlots
// when a lane reads it alone (rank 0).
template <typename L, uint32_t N>
__device__ __forceinline__ void load_half(const GhCuckooSubtable &s, uint64_t bucket, uint32_t half,
                                          uint32_t rank, bool coherent, typename L::Word (&out)[N]) {
    load_words<L>(s, bucket, half * kHalfBytes, rank, coherent, out);
}

// Bit j set when the key of the lane's word j equals `key` (the reserved key
// for the empty slots).
template <typename L, uint32_t N>
__device__ __forceinline__ uint32_t match_bits(const typename L::Word (&slice)[N], typename L::Key key) {
    uint32_t bits = 0;
#pragma unroll
    for (uint32_t j = 0; j < N; ++j) {
        bits |= (L::key_of(slice[j]) == key ? 1u : 0u) << j;
    }
    return bits;
}

template <typename L, uint32_t N>
__device__ __forceinline__ uint32_t empty_bits(const typename L::Word (&slice)[N]) {
    return match_bits<L>(slice, Keys<typename L::Key>::kEmpty);
}

// Word j of N, for a j known at run time only (a select chain: no local memory).
template <typename W, uint32_t N>
__device__ __forceinline__ W pick(const W (&slice)[N], uint32_t j) {
    W out = slice[0];
#pragma unroll
    for (uint32_t i = 1; i < N; ++i) {
        if (i == j) out = slice[i];
    }
    return out;
}

// The first slot of the bucket whose lane has a bit in `bits`, or kSlots.
template <typename L>
__device__ __forceinline__ uint32_t first_slot(const Tile &t, uint32_t bits) {
    uint32_t lanes = t.ballot(bits != 0);
    if (lanes == 0) return L::kSlots;
    uint32_t lane = __ffs(lanes) - 1;
    uint32_t lane_bits = t.shfl(bits, lane);
    return lane * L::kPerLane + (__ffs(lane_bits) - 1);
}

// The tile's bits of what it read (per_lane slots a lane, from slot `base`:
// 0 for a whole line) as one word: bit i for slot i of the bucket.
__device__ __forceinline__ uint32_t bucket_bits(const Tile &t, uint32_t bits, uint32_t per_lane, uint32_t base) {
    uint32_t all = bits << (base + t.rank * per_lane);
#pragma unroll
    for (uint32_t offset = 1; offset < kTile; offset *= 2) all |= __shfl_xor_sync(t.mask, all, offset, kTile);
    return all;
}

// Word `slot` of a piece the tile read, N words a lane from slot `base` of the
// bucket, on every lane of the tile.
template <typename W, uint32_t N>
__device__ __forceinline__ W tile_word(const Tile &t, const W (&piece)[N], uint32_t base, uint32_t slot) {
    return t.shfl(pick(piece, (slot - base) % N), (slot - base) / N);
}

// What a lane saw of a bucket: bit i of `key` set when slot i holds the key
// looked for, of `empty` when slot i is empty; slots not read are clear. `hit`
// is the word of the first slot holding the key (a packed pair's value with it).
template <typename W>
struct Seen {
    uint32_t key;
    uint32_t empty;
    W hit;
};

// What one lane alone reads of a bucket: its key's home quarter (the 32-byte
// sector holding slot `start`, inside the home half), its home half (the half
// holding slot `start`), the other half, or the whole line. A lane that reads by
// itself keeps twice as many lookups in flight a warp as tiles of two do.
enum class Part { kHomeQuarter, kHomeHalf, kOtherHalf, kLine };

template <typename L, uint32_t N>
__device__ __forceinline__ Seen<typename L::Word> seen_in(const typename L::Word (&piece)[N], uint32_t base,
                                                          typename L::Key key) {
    const uint32_t bits = match_bits<L>(piece, key);
    const typename L::Word hit = pick(piece, bits != 0 ? __ffs(bits) - 1 : 0);
    return {bits << base, empty_bits<L>(piece) << base, hit};
}

template <typename L>
__device__ __forceinline__ Seen<typename L::Word> look_alone(const GhCuckooSubtable &s, uint64_t bucket,
                                                             uint32_t start, Part part, bool coherent,
                                                             typename L::Key key) {
    if (part == Part::kLine) {
        typename L::Word line[L::kSlots];
        load_words<L>(s, bucket, 0, 0, coherent, line);
        return seen_in<L>(line, 0, key);
    }
    if (part == Part::kHomeQuarter) {
        constexpr uint32_t QS = L::kHalfSlots / 2;
        const uint32_t quarter = start / QS;
        typename L::Word piece[QS];
        load_words<L>(s, bucket, quarter * (kHalfBytes / 2), 0, coherent, piece);
        return seen_in<L>(piece, quarter * QS, key);
    }
    constexpr uint32_t HS = L::kHalfSlots;
    const uint32_t half = part == Part::kHomeHalf ? start / HS : 1 - start / HS;
    typename L::Word piece[HS];
    load_half<L>(s, bucket, half, 0, coherent, piece);
    return seen_in<L>(piece, half * HS, key);
}

template <typename L>
__device__ __forceinline__ uint64_t slot_index(uint64_t bucket, uint32_t slot) {
    return bucket * L::kSlots + slot;
}

template <typename L>
__device__ __forceinline__ typename L::Word *slot_word(const GhCuckooSubtable &s, uint64_t bucket, uint32_t slot) {
    return static_cast<typename L::Word *>(s.keys) + slot_index<L>(bucket, slot);
}

// Copies a stored value out: `words` words from lane `from` on, `step` apart
// (a lane alone: 0 and 1; a tile: its rank and kTile).
__device__ __forceinline__ void copy_value(uint32_t *dst, const uint32_t *src, uint32_t words, uint32_t from,
                                           uint32_t step) {
    for (uint32_t w = from; w < words; w += step) dst[w] = src[w];
}

// Copies the value of slot `slot` of a bucket, whose word is `w`, out as
// copy_value does: from the word itself when packed, else from the values array.
template <typename L>
__device__ __forceinline__ void copy_slot_value(uint32_t *dst, const GhCuckooSubtable &s, uint64_t bucket,
                                                uint32_t slot, typename L::Word w, uint32_t words, uint32_t from,
                                                uint32_t step) {
    if constexpr (L::kPacked) {
        if (from == 0) dst[0] = L::value_of(w);
    } else {
        copy_value(dst, s.values + slot_index<L>(bucket, slot) * words, words, from, step);
    }
}

}  // namespace gh_cuckoo
