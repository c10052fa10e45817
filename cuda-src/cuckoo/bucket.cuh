// A DyHash bucket and the tile that reads it: key traits (slots a bucket, the
// empty key, the subtable hash family), tiles of GH_CUCKOO_TILE lanes that read
// one 128-byte bucket (or one 64-byte half of it) together or one lane that
// reads it alone, and where a slot's value lies.
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

// u32 keys: 32 keys a bucket, 128 / GH_CUCKOO_TILE bytes of them a lane.
template <>
struct Keys<uint32_t> {
    static constexpr uint32_t kSlots = GH_CUCKOO_BUCKET_BYTES / 4;
    static constexpr uint32_t kPerLane = kSlots / kTile;
    static constexpr uint32_t kHalfSlots = kSlots / kHalves;
    static constexpr uint32_t kPerLaneInHalf = kHalfSlots / kTile;
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

    // Keys j * 4 .. j * 4 + 3 of a lane's slice from its j-th 16-byte load.
    template <uint32_t N>
    __device__ static __forceinline__ void unpack(uint4 raw, uint32_t j, uint32_t (&out)[N]) {
        out[4 * j] = raw.x;
        out[4 * j + 1] = raw.y;
        out[4 * j + 2] = raw.z;
        out[4 * j + 3] = raw.w;
    }

    __device__ static __forceinline__ uint32_t cas(uint32_t *slot, uint32_t expected, uint32_t value) {
        return atomicCAS(slot, expected, value);
    }
};

// u64 keys: 16 keys a bucket (still one 128-byte line a probe).
template <>
struct Keys<uint64_t> {
    static constexpr uint32_t kSlots = GH_CUCKOO_BUCKET_BYTES / 8;
    static constexpr uint32_t kPerLane = kSlots / kTile;
    static constexpr uint32_t kHalfSlots = kSlots / kHalves;
    static constexpr uint32_t kPerLaneInHalf = kHalfSlots / kTile;
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

    template <uint32_t N>
    __device__ static __forceinline__ void unpack(uint4 raw, uint32_t j, uint64_t (&out)[N]) {
        out[2 * j] = ((uint64_t)raw.y << 32) | raw.x;
        out[2 * j + 1] = ((uint64_t)raw.w << 32) | raw.z;
    }

    __device__ static __forceinline__ uint64_t cas(uint64_t *slot, uint64_t expected, uint64_t value) {
        return atomicCAS((unsigned long long *)slot, (unsigned long long)expected,
                         (unsigned long long)value);
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

// The N keys that lane `rank` of the readers holds of the piece of a bucket
// starting `offset` bytes in: `offset` / sizeof(K) + rank * N onwards. `coherent`
// reads bypass L1, for buckets that other warps change while this kernel runs.
template <typename K, uint32_t N>
__device__ __forceinline__ void load_keys(const GhCuckooSubtable &s, uint64_t bucket, uint32_t offset,
                                          uint32_t rank, bool coherent, K (&out)[N]) {
    constexpr uint32_t kLoads = N * sizeof(K) / 16;
    const uint4 *piece = reinterpret_cast<const uint4 *>(static_cast<const char *>(s.keys) +
                                                         bucket * GH_CUCKOO_BUCKET_BYTES + offset) +
                         rank * kLoads;
    uint4 raw[kLoads];
#pragma unroll
    for (uint32_t j = 0; j < kLoads; ++j) raw[j] = coherent ? __ldcg(piece + j) : __ldg(piece + j);
#pragma unroll
    for (uint32_t j = 0; j < kLoads; ++j) Keys<K>::unpack(raw[j], j, out);
}

// The lane's 128 / GH_CUCKOO_TILE bytes of a bucket, read by a tile.
template <typename K>
__device__ __forceinline__ void load_slice(const GhCuckooSubtable &s, uint64_t bucket, uint32_t rank,
                                           bool coherent, K (&out)[Keys<K>::kPerLane]) {
    load_keys(s, bucket, 0, rank, coherent, out);
}

// One half of a bucket: N is kPerLaneInHalf when a tile reads it, kHalfSlots
// when a lane reads it alone (rank 0).
template <typename K, uint32_t N>
__device__ __forceinline__ void load_half(const GhCuckooSubtable &s, uint64_t bucket, uint32_t half,
                                          uint32_t rank, bool coherent, K (&out)[N]) {
    load_keys(s, bucket, half * kHalfBytes, rank, coherent, out);
}

// Bit j set when the lane's key j equals `key`.
template <typename K, uint32_t N>
__device__ __forceinline__ uint32_t match_bits(const K (&slice)[N], K key) {
    uint32_t bits = 0;
#pragma unroll
    for (uint32_t j = 0; j < N; ++j) {
        bits |= (slice[j] == key ? 1u : 0u) << j;
    }
    return bits;
}

template <typename K>
__device__ __forceinline__ K pick(const K (&slice)[Keys<K>::kPerLane], uint32_t j) {
    K out = slice[0];
#pragma unroll
    for (uint32_t i = 1; i < Keys<K>::kPerLane; ++i) {
        if (i == j) out = slice[i];
    }
    return out;
}

// The first slot of the bucket whose lane has a bit in `bits`, or kSlots.
template <typename K>
__device__ __forceinline__ uint32_t first_slot(const Tile &t, uint32_t bits) {
    uint32_t lanes = t.ballot(bits != 0);
    if (lanes == 0) return Keys<K>::kSlots;
    uint32_t lane = __ffs(lanes) - 1;
    uint32_t lane_bits = t.shfl(bits, lane);
    return lane * Keys<K>::kPerLane + (__ffs(lane_bits) - 1);
}

// The tile's bits of what it read (per_lane slots a lane, from slot `base`:
// 0 for a whole line) as one word: bit i for slot i of the bucket.
__device__ __forceinline__ uint32_t bucket_bits(const Tile &t, uint32_t bits, uint32_t per_lane, uint32_t base) {
    uint32_t all = bits << (base + t.rank * per_lane);
#pragma unroll
    for (uint32_t offset = 1; offset < kTile; offset *= 2) all |= __shfl_xor_sync(t.mask, all, offset, kTile);
    return all;
}

// What a lane saw of a bucket: bit i of `key` set when slot i holds the key
// looked for, of `empty` when slot i is empty; slots not read are clear.
struct Seen {
    uint32_t key;
    uint32_t empty;
};

// What one lane alone reads of a bucket: its key's home half (the half holding
// slot `start`), the other half, or the whole line. A lane that reads by itself
// keeps twice as many lookups in flight a warp as tiles of two do.
enum class Part { kHomeHalf, kOtherHalf, kLine };

template <typename K>
__device__ __forceinline__ Seen look_alone(const GhCuckooSubtable &s, uint64_t bucket, uint32_t start, Part part,
                                           bool coherent, K key) {
    if (part == Part::kLine) {
        K line[Keys<K>::kSlots];
        load_keys(s, bucket, 0, 0, coherent, line);
        return {match_bits(line, key), match_bits(line, Keys<K>::kEmpty)};
    }
    constexpr uint32_t HS = Keys<K>::kHalfSlots;
    const uint32_t half = part == Part::kHomeHalf ? start / HS : 1 - start / HS;
    K piece[HS];
    load_half(s, bucket, half, 0, coherent, piece);
    return {match_bits(piece, key) << (half * HS), match_bits(piece, Keys<K>::kEmpty) << (half * HS)};
}

template <typename K>
__device__ __forceinline__ uint64_t slot_index(uint64_t bucket, uint32_t slot) {
    return bucket * Keys<K>::kSlots + slot;
}

// Copies a stored value out: `words` words from lane `from` on, `step` apart
// (a lane alone: 0 and 1; a tile: its rank and kTile).
__device__ __forceinline__ void copy_value(uint32_t *dst, const uint32_t *src, uint32_t words, uint32_t from,
                                           uint32_t step) {
    for (uint32_t w = from; w < words; w += step) dst[w] = src[w];
}

}  // namespace gh_cuckoo
