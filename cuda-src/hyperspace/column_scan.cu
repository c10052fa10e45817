// A column scan: searches answered by reading every tuple, the baseline the hyperspace
// index is measured against (what a dataframe library does with a batch of equality
// filters) and a second opinion for its tests. The tuples are columns (GhHsTuples); a
// launch serves a chunk of a batch's entries, the distinct value lists of its queries
// that name the same fields.
//
// Each block puts the chunk's entries in a hash table in shared memory, keyed by a
// fingerprint of the entry's values, then streams the named columns: a warp takes
// GH_HS_SCAN_UNROLL tuples a lane, loads their fields, mixes each tuple's fingerprint and
// probes the table. A tuple meets at most one entry (entries are distinct value lists of
// the same fields). The count pass adds in shared memory and then once per block and
// entry into global memory; the write pass takes places with one atomic per entry and
// warp (lanes meeting the same entry found together by __match_any_sync), and writes the
// tuple once for each query of the entry, so repeated queries each get it.
#include "hyperspace/space.cuh"

using gh::kFullWarp;
using gh::lane_id;
using namespace gh::hs;

namespace {

constexpr unsigned long long kEmptySlot = ~0ull;
constexpr uint32_t kNoEntry = 0xffffffffu;
constexpr uint32_t kSlotMask = GH_HS_SCAN_SLOTS - 1u;
constexpr uint32_t kTile = GH_HS_SCAN_UNROLL * 32u;

static_assert(GH_HS_SCAN_SLOTS >= 2u * GH_HS_SCAN_CHUNK, "the table stays at most half full");
static_assert((GH_HS_SCAN_SLOTS & kSlotMask) == 0u, "slots are a power of two");

// The fingerprint of a value list, one value at a time (j its position). The first value
// alone goes through fmix32, a bijection, so with one field equal fingerprints mean equal
// values; with more, a hit is confirmed against the entry's values.
__device__ __forceinline__ uint32_t mix(uint32_t h, uint32_t value, uint32_t j) {
    return j == 0 ? gh_fmix32(value) : gh_fmix32(h * 0x9e3779b9u + value);
}

// A table slot: the entry in the high word, its fingerprint in the low word.
__device__ __forceinline__ unsigned long long slot_of(uint32_t entry, uint32_t h) {
    return ((unsigned long long)entry << 32) | h;
}

__device__ __forceinline__ uint32_t entry_count(const GhHsScanParams &p) {
    return min(p.entry_count, GH_HS_SCAN_CHUNK);
}

// Fills the block's table with the chunk's entries; the whole block calls it.
__device__ void build_table(const GhHsScanParams &p, unsigned long long *table) {
    for (uint32_t s = threadIdx.x; s < GH_HS_SCAN_SLOTS; s += blockDim.x) {
        table[s] = kEmptySlot;
    }
    __syncthreads();
    for (uint32_t e = threadIdx.x; e < entry_count(p); e += blockDim.x) {
        uint32_t h = 0;
        for (uint32_t j = 0; j < p.field_count; ++j) {
            h = mix(h, p.entry_values[(uint64_t)e * p.field_count + j], j);
        }
        uint32_t s = h & kSlotMask;
        while (atomicCAS(table + s, kEmptySlot, slot_of(e, h)) != kEmptySlot) {
            s = (s + 1u) & kSlotMask;
        }
    }
    __syncthreads();
}

// Whether tuple i holds every value of entry e.
__device__ __forceinline__ bool tuple_meets(const GhHsScanParams &p, uint64_t i, uint32_t e) {
    for (uint32_t j = 0; j < p.field_count; ++j) {
        if (field_of(p.tuples, i, p.fields[j]) != p.entry_values[(uint64_t)e * p.field_count + j]) {
            return false;
        }
    }
    return true;
}

// The entry tuple i (fingerprint h) meets, or kNoEntry.
__device__ __forceinline__ uint32_t find_entry(const GhHsScanParams &p, const unsigned long long *table, uint64_t i,
                                               uint32_t h) {
    for (uint32_t s = h & kSlotMask;; s = (s + 1u) & kSlotMask) {
        const unsigned long long slot = table[s];
        if (slot == kEmptySlot) {
            return kNoEntry;
        }
        const uint32_t e = (uint32_t)(slot >> 32);
        if ((uint32_t)slot == h && (p.field_count == 1u || tuple_meets(p, i, e))) {
            return e;
        }
    }
}

// Tiles of kTile tuples, one a warp at a time, grid-stride, so that every lane of a warp
// takes part in each tile; lane l takes tuples base + u * 32 + l. serve(i, e) for each of
// them, e the entry tuple i meets (kNoEntry when none, or past the end).
template <typename Serve>
__device__ __forceinline__ void scan_tiles(const GhHsScanParams &p, const unsigned long long *table, Serve serve) {
    const uint64_t n = p.tuples.count;
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32u;
    const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32u;
    for (uint64_t base = warp * kTile; base < n; base += warps * kTile) {
        uint32_t h[GH_HS_SCAN_UNROLL] = {};
        // Column by column, the unrolled tuples' loads of one column in flight together.
        for (uint32_t j = 0; j < p.field_count; ++j) {
            const uint32_t field = p.fields[j];
#pragma unroll
            for (uint32_t u = 0; u < GH_HS_SCAN_UNROLL; ++u) {
                const uint64_t i = base + u * 32u + lane_id();
                h[u] = mix(h[u], i < n ? field_of(p.tuples, i, field) : 0u, j);
            }
        }
#pragma unroll
        for (uint32_t u = 0; u < GH_HS_SCAN_UNROLL; ++u) {
            const uint64_t i = base + u * 32u + lane_id();
            serve(i, i < n ? find_entry(p, table, i, h[u]) : kNoEntry);
        }
    }
}

// Tuple i into out at `at`.
__device__ __forceinline__ void write_tuple(const GhHsScanParams &p, uint64_t i, uint64_t at) {
    p.out.keys[at] = p.tuples.keys[i];
    for (uint32_t a = 0; a < p.attribute_count; ++a) {
        p.out.attributes[(uint64_t)a * p.out.capacity + at] = p.tuples.attributes[(uint64_t)a * p.tuples.count + i];
    }
    p.out.values[at] = p.tuples.values[i];
}

}  // namespace

extern "C" __global__ void __launch_bounds__(GH_HS_SCAN_THREADS) gh_hs_scan_count(GhHsScanParams p) {
    __shared__ unsigned long long table[GH_HS_SCAN_SLOTS];
    // A block's counts: a block sees fewer than 2^32 tuples.
    __shared__ uint32_t counts[GH_HS_SCAN_CHUNK];
    for (uint32_t e = threadIdx.x; e < GH_HS_SCAN_CHUNK; e += blockDim.x) {
        counts[e] = 0;
    }
    build_table(p, table);
    scan_tiles(p, table, [&](uint64_t, uint32_t e) {
        // Lanes meeting one entry add once: a skewed value would otherwise serialise
        // the warp's atomics on one word.
        const uint32_t peers = __match_any_sync(kFullWarp, e);
        if (e != kNoEntry && lane_id() == (uint32_t)__ffs(peers) - 1u) {
            atomicAdd(counts + e, (uint32_t)__popc(peers));
        }
    });
    __syncthreads();
    for (uint32_t e = threadIdx.x; e < entry_count(p); e += blockDim.x) {
        if (counts[e] != 0) {
            atomicAdd(p.entry_counts + e, counts[e]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(GH_HS_SCAN_THREADS) gh_hs_scan_write(GhHsScanParams p) {
    __shared__ unsigned long long table[GH_HS_SCAN_SLOTS];
    build_table(p, table);
    const uint32_t lanes_below = (1u << lane_id()) - 1u;
    scan_tiles(p, table, [&](uint64_t i, uint32_t e) {
        const uint32_t peers = __match_any_sync(kFullWarp, e);
        const uint32_t leader = (uint32_t)__ffs(peers) - 1u;
        uint32_t first = 0;
        if (e != kNoEntry && lane_id() == leader) {
            first = atomicAdd(p.entry_cursors + e, (uint32_t)__popc(peers));
        }
        first = __shfl_sync(kFullWarp, first, leader);
        if (e == kNoEntry) {
            return;
        }
        const uint32_t k = first + (uint32_t)__popc(peers & lanes_below);
        // The count pass saw the same columns, so k stays below its count; the check
        // keeps every write inside the query's row whatever happens.
        if (k >= p.entry_counts[e]) {
            return;
        }
        for (uint32_t at = p.entry_query_offsets[e]; at < p.entry_query_offsets[e + 1]; ++at) {
            write_tuple(p, i, p.offsets[p.entry_queries[at]] + k);
        }
    });
}
