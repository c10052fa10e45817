// Bulk batches (lookups only, inserts only) served by tiles: kLanes consecutive lanes of a
// warp read one slab together with 16-byte loads, 128 / kLanes bytes a lane, so a warp has
// 32 / kLanes slabs in flight where serve_warp, which a write must wait for, has one. Each
// tile takes the operations of its own lanes one after another; a key found in the slab or
// a spot claimed ends an operation exactly as in serve_warp, so both kinds of kernel keep
// the same list invariants and may follow each other on a table.
//
// Measured on an H100 (n = 2^26 u32 pairs, utilization 0.5, M ops/s build / find hit):
// serve_warp and a four-slot find 7661 / 12898; tiles of 2 lanes 9586 / -, of 4 lanes
// 9937 / 20091, of 8 lanes 9288 / 18060. Prefetching head slabs into L2 (the chunk being
// served, or the next one) made every variant slower, down to 7606 / 11785 with the next
// chunk's heads: the lines in flight outgrow L2 and are fetched twice. So nothing here
// prefetches; the keys of the next chunk are loaded while a chunk is served.
//
// An insert's tile may read a slab's first 64 bytes first (a random read fetches 64 bytes
// of DRAM on the H100) and the whole slab only when that half is full and lacks the key:
// entries fill a list from its first spot on, so while lists are short most first empty
// spots lie there. The host asks for it (GhSlabOpsParams.half_first) only then, and only
// for tables whose head slabs span 4 times the L2 cache or more. Builds on an H100 (u32
// pairs, in batches of 2^20; by halves against whole slabs, same call):
//   n = 2^22 (heads 1.3x L2): 13460 against 15003 M/s at memory utilization 0.5 (-10%)
//   n = 2^23 (2.7x L2):       12598 against 13060 (-3.5%)
//   n = 2^24 (5.3x L2):       11727 against 11362 (+3%), head-slab load 0.5 +5.5%
//   n = 2^25, 2^26:           +6 to +9%; at head-slab load 0.9 (13.5 pairs a bucket) -1 to
//                             -3% even with half reads only while lists held under 10.
// Lists that end up holding up to 5/4 of a half (memory utilization 0.5: 8.07 entries a
// bucket over 8 spots) still gain: +7% at 2^26 and 2^25, +4% at 2^24 (up to 3/2, no more).
// Sorting a build by range of buckets, as DyHash does, made it slower (8500-10900 against
// 10200-11300 M/s at 2^24 to 2^26, ranges of 16 to 512): concurrent inserts into one
// list race for its first empty spot, and a range's lists take a window's inserts at once.
// A rate of second reads kept by each tile on the device chose no better. Finds read the
// whole slab at once: by halves, hits ran no faster (20308 against 20227 M/s at 2^26) and
// misses, which mostly need both halves, 25% slower; tiles of 2 lanes found 3% slower
// than tiles of 4.
//
// Every lane of the warp runs every step (the loops end on warp-wide votes), so whole-warp
// ballots and shuffles serve all tiles at once, and the warp allocator, which needs all 32
// lanes, can extend any tile's list.
#pragma once

#include "slab_hash/slab_warp.cuh"

namespace gh {

template <typename Shape, uint32_t kLanes>
struct SlabTile {
    static_assert(kLanes == 2 || kLanes == 4 || kLanes == 8, "a lane holds 16, 32 or 64 bytes");
    static constexpr uint32_t kWords = GH_SLAB_WORDS / kLanes;  // words a lane holds
    static constexpr uint32_t kSpots = kWords / Shape::kEntryWords;  // entry spots a lane holds
    static constexpr uint32_t kMask = (1u << kLanes) - 1u;
    static constexpr uint32_t kHalfWords = GH_SLAB_WORDS / 2;  // 64 bytes: one DRAM fetch

    uint32_t base;  // the tile's first lane
    uint32_t rank;  // this lane's place in the tile

    __device__ static SlabTile mine() {
        const uint32_t lane = lane_id();
        return SlabTile{lane & ~(kLanes - 1u), lane & (kLanes - 1u)};
    }

    // The lane's words of the slab, or of its first half only (`half`: the lanes past it
    // read the words of the lanes before them again, in the same request, and their spots
    // count as unseen). From L2, as read_slab: other warps change slabs.
    __device__ void read(const uint32_t *slab, bool half, uint32_t (&w)[kWords]) const {
        const uint32_t from = half ? rank % (kLanes / 2) : rank;
        const uint4 *src = reinterpret_cast<const uint4 *>(slab) + from * (kWords / 4);
#pragma unroll
        for (uint32_t j = 0; j < kWords / 4; ++j) {
            const uint4 v = __ldcg(src + j);
            w[4 * j] = v.x;
            w[4 * j + 1] = v.y;
            w[4 * j + 2] = v.z;
            w[4 * j + 3] = v.w;
        }
    }

    // The slab word where this lane's spot j starts.
    __device__ uint32_t word_of(uint32_t j) const { return rank * kWords + j * Shape::kEntryWords; }

    // Whether this lane's spot j is a spot of the slab, and in the part read. Entries of
    // 1, 2 or 4 words never straddle the half.
    __device__ bool is_spot(uint32_t j, bool half) const {
        return word_of(j) < Shape::kEntries * Shape::kEntryWords && (!half || word_of(j) < kHalfWords);
    }

    template <uint32_t kPartWords>
    __device__ static uint64_t part(const uint32_t (&w)[kWords], uint32_t at) {
        return kPartWords == 1 ? w[at] : ((uint64_t)w[at + 1] << 32) | w[at];
    }

    // Bit j set where this lane's spot j, read (`half` as for read), holds `key`.
    __device__ uint32_t spots_holding(const uint32_t (&w)[kWords], uint64_t key, bool half) const {
        uint32_t bits = 0;
#pragma unroll
        for (uint32_t j = 0; j < kSpots; ++j) {
            const bool hit = is_spot(j, half) && part<Shape::kKeyWords>(w, j * Shape::kEntryWords) == key;
            bits |= (hit ? 1u : 0u) << j;
        }
        return bits;
    }

    // The value of this lane's spot j (0 in a set).
    __device__ static uint64_t value_of(const uint32_t (&w)[kWords], uint32_t j) {
        uint64_t value = 0;
#pragma unroll
        for (uint32_t s = 0; s < kSpots; ++s) {
            if (Shape::kKind != GH_TABLE_SET && s == j) {
                value = part<Shape::kValueBufferWords>(w, s * Shape::kEntryWords + Shape::kValueLane);
            }
        }
        return value;
    }

    // This tile's bits of a whole-warp ballot: bit r for the tile's lane r.
    __device__ uint32_t own(uint32_t ballot) const { return (ballot >> base) & kMask; }

    // Lane `from` of this tile's copy of `v` (every lane of the warp calls it).
    __device__ uint64_t from_lane(uint64_t v, uint32_t from) const {
        return __shfl_sync(kFullWarp, (unsigned long long)v, base + from);
    }

    __device__ uint32_t from_lane32(uint32_t v, uint32_t from) const {
        return __shfl_sync(kFullWarp, v, base + from);
    }

    // The slab's next address, held by the tile's last lane.
    __device__ uint32_t next(const uint32_t (&w)[kWords]) const { return from_lane32(w[kWords - 1], kLanes - 1); }
};

// Tile width of the bulk kernels (see the measurements above).
constexpr uint32_t kBulkTileLanes = 4;

// One element of a bulk batch as a lane loads it, a chunk ahead of its serving.
struct BulkLoad {
    bool in_batch;
    uint32_t status;
    uint64_t key;
    uint64_t value;
};

// The element being served: whether it waits for service, and where its key goes.
struct BulkElement {
    bool active;
    uint64_t value;
    Placement place;
};

template <uint32_t kWords>
__device__ __forceinline__ uint64_t load_words(const uint32_t *base, uint64_t i) {
    return kWords == 1 ? base[i] : ((uint64_t)base[2 * i + 1] << 32) | base[2 * i];
}

template <uint32_t kWords>
__device__ __forceinline__ void store_words(uint32_t *base, uint64_t i, uint64_t value) {
    if (kWords == 1) {
        base[i] = (uint32_t)value;
    } else {
        base[2 * i] = (uint32_t)value;
        base[2 * i + 1] = (uint32_t)(value >> 32);
    }
}

// Whether element i is served by this pass: every element, or only those still PENDING.
__device__ __forceinline__ bool is_served(const GhSlabOpsParams &p, uint64_t i) {
    return p.answer_all != 0 || p.status[i] == GH_STATUS_PENDING;
}

// Writes what became of element i: its status byte (a NO_SLAB insert stays PENDING for a
// retry, or reads ABSENT in a pass that answers every element) and its result (a value
// found, or a multimap's count).
template <typename Shape>
__device__ __forceinline__ void answer(const GhSlabOpsParams &p, uint64_t i, uint32_t status, uint64_t result) {
    if (status == GH_STATUS_NO_SLAB) {
        status = p.answer_all != 0 ? GH_STATUS_ABSENT : GH_STATUS_PENDING;
    }
    if (p.status != nullptr) {
        p.status[i] = (uint8_t)status;
    }
    if (p.results != nullptr && (status == GH_STATUS_DONE || Shape::kKind == GH_TABLE_MULTIMAP)) {
        store_words<Shape::kResultWords>(p.results, i, result);
    }
}

template <typename Shape, bool kInsert>
__device__ __forceinline__ BulkLoad load_element(const GhSlabOpsParams &p, uint64_t i) {
    BulkLoad l{i < p.count, GH_STATUS_PENDING, 0, 0};
    if (l.in_batch) {
        // Retries skip the elements an earlier pass served.
        l.status = is_served(p, i) ? GH_STATUS_PENDING : GH_STATUS_DONE;
        l.key = load_words<Shape::kKeyWords>(p.keys, i);
        if (kInsert && p.values != nullptr) {
            l.value = load_words<Shape::kValueBufferWords>(p.values, i);
        }
    }
    return l;
}

template <typename Shape>
__device__ __forceinline__ BulkElement settle(const GhSlabTable &table, const BulkLoad &l) {
    BulkElement e{l.in_batch && l.status == GH_STATUS_PENDING, l.value, Placement{0, 0}};
    if (e.active) {
        e.place = place<Shape>(table, l.key);
    }
    return e;
}

// Serves one chunk: each tile takes its lanes' operations in turn. Writes this lane's status
// and result when its operation ends. Every collective below is reached by all 32 lanes.
//
// A multimap insert with `walk_slabs` set reads at most that many slabs of its list and
// never extends it: where they hold no empty spot, it ends DEFERRED and the grouped
// appends (slab_runs.cuh) store it. So no pair costs more than walk_slabs reads here,
// however many copies of its key the batch or the list holds, and the thousands of tiles
// that may share one key's list never race to extend it.
template <typename Shape, uint32_t kLanes, bool kInsert, bool kHalfFirst>
__device__ void serve_tiles(const GhSlabTable &table, WarpAllocator &allocator, const BulkElement &mine,
                            uint32_t walk_slabs, uint32_t &status, uint64_t &result) {
    static_assert(kInsert || !kHalfFirst, "finds read whole slabs");
    using Tile = SlabTile<Shape, kLanes>;
    constexpr uint32_t kKind = Shape::kKind;
    const bool defers = kInsert && kKind == GH_TABLE_MULTIMAP && walk_slabs != 0;
    const Tile t = Tile::mine();
    uint32_t pending = t.own(__ballot_sync(kFullWarp, mine.active));
    uint32_t served = 0;  // the tile's lane being served, while pending != 0
    const uint32_t *slab = nullptr;
    uint64_t want = 0, value = 0;
    bool finished = true;  // start (or move on to) the next pending lane
    bool half = kHalfFirst;  // read the slab's first half only
    uint32_t walked = 0;     // slabs of the served operation's list left behind
    while (true) {
        // The next pending lane's operation, shuffled to every lane of its tile.
        const uint32_t first_pending = pending == 0 ? 0 : __ffs(pending) - 1;
        const uint32_t bucket = t.from_lane32(mine.place.bucket, first_pending);
        const uint64_t next_want = t.from_lane(mine.place.stored, first_pending);
        const uint64_t next_value = kInsert ? t.from_lane(mine.value, first_pending) : 0;
        if (finished) {
            served = first_pending;
            slab = head_slab(table, bucket);
            want = next_want;
            value = next_value;
            half = kHalfFirst;
            walked = 0;
        }
        const bool busy = pending != 0;
        if (!__any_sync(kFullWarp, busy)) {
            return;
        }
        uint32_t w[Tile::kWords];
        if (busy) {
            t.read(slab, half, w);
        } else {
#pragma unroll
            for (uint32_t j = 0; j < Tile::kWords; ++j) w[j] = GH_INVALID_SLAB;
        }
        const uint32_t next = t.next(w);
        const uint32_t matches = kInsert && kKind == GH_TABLE_MULTIMAP ? 0 : t.spots_holding(w, want, half);
        const uint32_t match_lanes = t.own(__ballot_sync(kFullWarp, matches != 0));
        const uint32_t match_lane = match_lanes == 0 ? 0 : __ffs(match_lanes) - 1;
        uint32_t outcome = GH_STATUS_PENDING;
        uint64_t found = 0;
        bool advance = false;  // move down the list: neither key nor room here
        bool widen = false;    // read the whole slab: its first half has neither
        if (!kInsert) {
            found = t.from_lane(Tile::value_of(w, __ffs(matches) - 1), match_lane);
            if (busy && match_lanes != 0) {
                outcome = GH_STATUS_DONE;
            } else if (busy && next == GH_INVALID_SLAB) {
                outcome = GH_STATUS_ABSENT;
            }
            advance = busy && outcome == GH_STATUS_PENDING;
        } else {
            // Entries are only ever added at the first empty spot of a list, so a key not
            // met before that spot is in the list nowhere.
            const bool busy_spot = Shape::kWaitsForBusy && busy && match_lanes == 0 &&
                                   t.spots_holding(w, Shape::kBusy, half) != 0;
            const bool wait = must_wait<Shape>(t.own(__ballot_sync(kFullWarp, busy_spot)) != 0);
            const uint32_t empties =
                busy && match_lanes == 0 && !wait ? t.spots_holding(w, Shape::kEmpty, half) : 0;
            const uint32_t empty_lanes = t.own(__ballot_sync(kFullWarp, empties != 0));
            const bool stored = empty_lanes != 0 && t.rank == __ffs(empty_lanes) - 1 &&
                                claim_spot<Shape>(const_cast<uint32_t *>(slab), t.word_of(__ffs(empties) - 1),
                                                  want, value);
            const bool claimed = t.own(__ballot_sync(kFullWarp, stored)) != 0;
            if (busy && match_lanes != 0) {
                // Unique keys: a map replaces the value, a set has nothing to do.
                if (kKind == GH_TABLE_MAP && t.rank == match_lane) {
                    store_value<Shape::kValueWords>(const_cast<uint32_t *>(slab),
                                                    t.word_of(__ffs(matches) - 1) + Shape::kValueLane, value);
                }
                outcome = kKind == GH_TABLE_SET ? GH_STATUS_ABSENT : GH_STATUS_DONE;
            } else if (empty_lanes != 0) {
                // A lost claim (another warp took the spot) reads the slab again.
                outcome = claimed ? GH_STATUS_DONE : GH_STATUS_PENDING;
            } else if (wait) {
                outcome = GH_STATUS_PENDING;  // read the slab again once the busy spot resolves
            } else if (busy && half) {
                widen = true;  // a full first half: the key or the first empty spot lies past it
            } else if (busy && defers && (next == GH_INVALID_SLAB || walked + 1 >= walk_slabs)) {
                outcome = GH_STATUS_DEFERRED;  // a full tail, or a list longer than this pass walks
            } else if (busy && next == GH_INVALID_SLAB) {
                outcome = GH_STATUS_NO_SLAB;  // unless a slab is linked below
            } else {
                advance = busy;
            }
            // Tiles at the tail of their list extend it one after another, the whole warp
            // allocating for each; a tile whose list got a slab reads its slab again.
            uint32_t tails = __ballot_sync(kFullWarp, outcome == GH_STATUS_NO_SLAB && t.rank == 0);
            while (tails != 0) {
                const uint32_t owner = __ffs(tails) - 1;
                tails &= tails - 1;
                auto *tail = reinterpret_cast<uint32_t *>(
                    __shfl_sync(kFullWarp, (unsigned long long)reinterpret_cast<uintptr_t>(slab), owner));
                if (extend_list(allocator, table.alloc, tail) && t.base == owner) {
                    outcome = GH_STATUS_PENDING;
                }
            }
        }
        finished = outcome != GH_STATUS_PENDING;
        if (finished) {
            if (t.rank == served) {
                status = outcome;
                result = found;
            }
            pending &= pending - 1;
        } else if (advance) {
            slab = slab_pointer(table.alloc, next);
            half = kHalfFirst;
            ++walked;
        } else if (widen) {
            half = false;
        }
    }
}

// A bulk batch (kInsert: inserts only, else lookups only) over grid-stride chunks of 32
// elements a warp; each chunk's elements are loaded while the chunk before is served.
template <typename Shape, bool kInsert>
__device__ void run_bulk(const GhSlabOpsParams &p) {
    WarpAllocator allocator(p.table.alloc);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull;
    BulkLoad ahead = load_element<Shape, kInsert>(p, first + lane_id());
    for (uint64_t base = first; base < p.count; base += stride) {
        const BulkElement mine = settle<Shape>(p.table, ahead);
        ahead = load_element<Shape, kInsert>(p, base + stride + lane_id());
        uint32_t status = GH_STATUS_PENDING;
        uint64_t result = 0;
        // Two copies of the walk, so that whole-slab passes carry no test of `half`.
        if (kInsert && p.half_first != 0) {
            serve_tiles<Shape, kBulkTileLanes, kInsert, kInsert>(p.table, allocator, mine, p.walk_slabs, status,
                                                                 result);
        } else {
            serve_tiles<Shape, kBulkTileLanes, kInsert, false>(p.table, allocator, mine, p.walk_slabs, status,
                                                               result);
        }
        if (mine.active) {
            answer<Shape>(p, base + lane_id(), status, result);
        }
        if (kInsert && Shape::kKind == GH_TABLE_MULTIMAP && p.deferred != nullptr) {
            const uint32_t deferred = __ballot_sync(kFullWarp, mine.active && status == GH_STATUS_DEFERRED);
            if (lane_id() == 0 && deferred != 0) {
                atomicAdd(p.deferred, (uint32_t)__popc(deferred));
            }
        }
    }
}

}  // namespace gh
