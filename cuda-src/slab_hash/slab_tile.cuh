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
// A map's or set's key lives in its home quarter of its head slab while that quarter has
// room (home_quarter, slab_warp.cuh). While lists are short (GhSlabOpsParams.reads, chosen
// by the host) an operation first tries its head slab on its own thread, 32 bytes a read
// (settle_in_head): a find its home quarter, ending there on the key or on an empty spot;
// an insert the home quarter and then the others in order. Only what that leaves (a full
// head slab, a busy spot, lost claims) goes to the tiles. Inserts into tables whose head
// slabs span 4 times the L2 cache or more go to the tiles at once, each tile reading the
// home quarter first (GH_SLAB_READ_HOME), and a multimap's inserts there read a slab's
// first half first (a multimap's list fills from its first spot). On an H100, u32 pairs,
// against the tiles alone reading whole slabs (builds by halves at 2^26), same call:
//   n = 2^26, memory utilization 0.5: build 11111 against 10965 M/s, find hit 23728
//     against 20354, miss 22077 against 20820;
//   n = 2^22: build 15408 against 14300, hit 35521 against 26771, miss 33132 against 26199.
// Tried on the way: tiles reading home quarters first for finds too (2^26 hit 21456, miss
// 16320; 2^22 hit 20416: every tile step grew, and tiles serve their lanes in turn);
// threads for inserts at 2^26 (10061, walking the quarters 9649: a thread's read then
// claim loses to a tile's there); a thread reading its whole head slab at once (32 words
// in registers: hits at 2^26 21416).
// Sorting a build by range of buckets, as DyHash does, made it slower (8500-10900 against
// 10200-11300 M/s at 2^24 to 2^26, ranges of 16 to 512): concurrent inserts into one
// list race for its first empty spot, and a range's lists take a window's inserts at once.
// Tiles of 2 lanes found 3% slower than tiles of 4.
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

    uint32_t base;  // the tile's first lane
    uint32_t rank;  // this lane's place in the tile

    __device__ static SlabTile mine() {
        const uint32_t lane = lane_id();
        return SlabTile{lane & ~(kLanes - 1u), lane & (kLanes - 1u)};
    }

    // The lane's words of the slab's words [lo, hi): the whole slab, its first half or a
    // quarter (a lane whose words lie outside reads the window's first words again, in the
    // same request, and its spots count as unseen). From L2, as read_slab: other warps
    // change slabs.
    __device__ void read(const uint32_t *slab, uint32_t lo, uint32_t hi, uint32_t (&w)[kWords]) const {
        const uint32_t own = rank * kWords;
        const uint32_t from = own >= lo && own < hi ? rank : lo / kWords;
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

    // Whether this lane's spot j is a spot of the slab within words [lo, hi). Entries of 1,
    // 2 or 4 words never straddle a half or a quarter.
    __device__ bool is_spot(uint32_t j, uint32_t lo, uint32_t hi) const {
        const uint32_t at = word_of(j);
        return at < Shape::kEntries * Shape::kEntryWords && at >= lo && at < hi;
    }

    template <uint32_t kPartWords>
    __device__ static uint64_t part(const uint32_t (&w)[kWords], uint32_t at) {
        return kPartWords == 1 ? w[at] : ((uint64_t)w[at + 1] << 32) | w[at];
    }

    // Bit j set where this lane's spot j within words [lo, hi) holds `key`.
    __device__ uint32_t spots_holding(const uint32_t (&w)[kWords], uint64_t key, uint32_t lo, uint32_t hi) const {
        uint32_t bits = 0;
#pragma unroll
        for (uint32_t j = 0; j < kSpots; ++j) {
            const bool hit = is_spot(j, lo, hi) && part<Shape::kKeyWords>(w, j * Shape::kEntryWords) == key;
            bits |= (hit ? 1u : 0u) << j;
        }
        return bits;
    }

    // Bit j set where this lane's spot j lies in quarter q of the slab.
    __device__ uint32_t spots_in_quarter(uint32_t q) const {
        uint32_t bits = 0;
#pragma unroll
        for (uint32_t j = 0; j < kSpots; ++j) {
            bits |= (is_spot(j, q * kQuarterWords, (q + 1) * kQuarterWords) ? 1u : 0u) << j;
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
template <typename Shape, uint32_t kLanes, bool kInsert, uint32_t kFirst>
__device__ void serve_tiles(const GhSlabTable &table, WarpAllocator &allocator, const BulkElement &mine,
                            uint32_t walk_slabs, uint32_t &status, uint64_t &result) {
    static_assert(kInsert || kFirst == GH_SLAB_READ_WHOLE, "finds read whole slabs");
    static_assert(kFirst != GH_SLAB_READ_HALF || !Shape::kHomed, "a map or set key's place starts at its home");
    static_assert(kFirst != GH_SLAB_READ_HOME || Shape::kHomed, "multimaps have no home quarters");
    using Tile = SlabTile<Shape, kLanes>;
    constexpr uint32_t kKind = Shape::kKind;
    const bool defers = kInsert && kKind == GH_TABLE_MULTIMAP && walk_slabs != 0;
    const Tile t = Tile::mine();
    uint32_t pending = t.own(__ballot_sync(kFullWarp, mine.active));
    uint32_t served = 0;  // the tile's lane being served, while pending != 0
    const uint32_t *slab = nullptr;
    uint64_t want = 0, value = 0;
    bool finished = true;  // start (or move on to) the next pending lane
    uint32_t walked = 0;  // slabs of the served operation's list left behind
    uint32_t home = 0;    // the served key's home quarter (maps and sets)
    // The words of the slab a step reads, [lo, hi): first the home quarter of a map's or
    // set's head slab or the first half of a multimap's slabs, when kFirst says so.
    uint32_t lo = 0, hi = GH_SLAB_WORDS;
    const auto first_part = [&]() {
        if (kFirst == GH_SLAB_READ_HOME && walked == 0) {
            lo = home * kQuarterWords;
            hi = lo + kQuarterWords;
        } else {
            lo = 0;
            hi = kFirst == GH_SLAB_READ_HALF ? GH_SLAB_WORDS / 2 : GH_SLAB_WORDS;
        }
    };
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
            walked = 0;
            home = Shape::kHomed ? home_quarter<Shape>(want) : 0;
            first_part();
        }
        const bool busy = pending != 0;
        if (!__any_sync(kFullWarp, busy)) {
            return;
        }
        // The window as the compiler sees it: whole-slab passes read constants.
        const uint32_t from = kFirst == GH_SLAB_READ_WHOLE ? 0 : lo;
        const uint32_t to = kFirst == GH_SLAB_READ_WHOLE ? GH_SLAB_WORDS : hi;
        const bool part = from != 0 || to != GH_SLAB_WORDS;
        uint32_t w[Tile::kWords];
        if (busy) {
            t.read(slab, from, to, w);
        } else {
#pragma unroll
            for (uint32_t j = 0; j < Tile::kWords; ++j) w[j] = GH_INVALID_SLAB;
        }
        const uint32_t next = t.next(w);
        const uint32_t matches = kInsert && kKind == GH_TABLE_MULTIMAP ? 0 : t.spots_holding(w, want, from, to);
        const uint32_t match_lanes = t.own(__ballot_sync(kFullWarp, matches != 0));
        const uint32_t match_lane = match_lanes == 0 ? 0 : __ffs(match_lanes) - 1;
        uint32_t outcome = GH_STATUS_PENDING;
        uint64_t found = 0;
        bool advance = false;  // move down the list: neither key nor room here
        bool widen = false;    // read the whole slab: the part read has neither
        if (!kInsert) {
            found = t.from_lane(Tile::value_of(w, __ffs(matches) - 1), match_lane);
            if (busy && match_lanes != 0) {
                outcome = GH_STATUS_DONE;
            } else if (busy && next == GH_INVALID_SLAB) {
                outcome = GH_STATUS_ABSENT;
            }
            advance = busy && outcome == GH_STATUS_PENDING;
        } else {
            // Entries are only ever added at the first empty spot of a list, or of their
            // home quarter, so a key met neither in the slab that holds the list's first
            // empty spot nor before it is in the list nowhere.
            const bool busy_spot = Shape::kWaitsForBusy && busy && match_lanes == 0 &&
                                   t.spots_holding(w, Shape::kBusy, from, to) != 0;
            const bool wait = must_wait<Shape>(t.own(__ballot_sync(kFullWarp, busy_spot)) != 0);
            uint32_t empties = busy && match_lanes == 0 && !wait ? t.spots_holding(w, Shape::kEmpty, from, to) : 0;
            // A map's or set's key takes an empty spot of its home quarter first.
            const uint32_t home_empties =
                Shape::kHomed && walked == 0 && !part ? empties & t.spots_in_quarter(home) : 0;
            if (t.own(__ballot_sync(kFullWarp, home_empties != 0)) != 0) {
                empties = home_empties;
            }
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
            } else if (busy && part) {
                widen = true;  // a full part: the key or the first empty spot lies past it
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
            ++walked;
            first_part();
        } else if (widen) {
            lo = 0;
            hi = GH_SLAB_WORDS;
        }
    }
}

// What one thread read of quarter q of a head slab: the slab words where the key and the
// first empty spot are (GH_SLAB_WORDS for none), whether a spot is busy, and the value
// beside the key. The thread reads as the lane of a tile of 4 whose words are quarter q.
struct QuarterScan {
    uint32_t match;
    uint32_t empty;
    bool busy;
    uint64_t value;
};

template <typename Shape>
__device__ __forceinline__ QuarterScan scan_quarter(const uint32_t *head, uint32_t q, uint64_t stored) {
    using Tile = SlabTile<Shape, GH_SLAB_WORDS / kQuarterWords>;
    const Tile t{0, q};
    const uint32_t lo = q * kQuarterWords, hi = lo + kQuarterWords;
    uint32_t w[Tile::kWords];
    t.read(head, lo, hi, w);
    const uint32_t matches = t.spots_holding(w, stored, lo, hi);
    const uint32_t empties = t.spots_holding(w, Shape::kEmpty, lo, hi);
    const auto word = [&](uint32_t spots) { return spots == 0 ? GH_SLAB_WORDS : t.word_of(__ffs(spots) - 1); };
    return QuarterScan{word(matches), word(empties), t.spots_holding(w, Shape::kBusy, lo, hi) != 0,
                       Tile::value_of(w, __ffs(matches) - 1)};
}

// One thread's try at its map or set operation in its head slab alone, 32 bytes a read:
// its key's home quarter (see home_quarter), where at memory utilization 0.5 nearly every
// operation ends, and with kEveryQuarter, when that one is full, the slab's other quarters
// in order. True when it ended there: a find that met its key (DONE, with the value) or an
// empty spot (ABSENT: the key would be there or before it); an insert that met its key (a
// map's value replaced) or claimed the first empty spot it read. False leaves the
// operation to the tiles: full quarters without the key, a busy spot, or claims lost
// kHomeTries times.
template <typename Shape, bool kInsert, bool kEveryQuarter>
__device__ bool settle_in_head(const GhSlabTable &table, const BulkElement &e, uint32_t &status, uint64_t &result) {
    constexpr uint32_t kHomeTries = 4;
    const uint32_t home = home_quarter<Shape>(e.place.stored);
    uint32_t *head = head_slab(table, e.place.bucket);
    const auto ends_at = [&](const QuarterScan &s) {
        if (s.match != GH_SLAB_WORDS) {
            if (kInsert && Shape::kKind == GH_TABLE_MAP) {
                store_value<Shape::kValueWords>(head, s.match + Shape::kValueLane, e.value);
            }
            status = kInsert && Shape::kKind == GH_TABLE_SET ? GH_STATUS_ABSENT : GH_STATUS_DONE;
            result = kInsert ? 0 : s.value;
            return true;
        }
        if (s.empty == GH_SLAB_WORDS || (kInsert && must_wait<Shape>(s.busy))) {
            return false;
        }
        if (kInsert && !claim_spot<Shape>(head, s.empty, e.place.stored, e.value)) {
            return false;
        }
        status = kInsert ? GH_STATUS_DONE : GH_STATUS_ABSENT;
        return true;
    };
    for (uint32_t attempt = 0; attempt < (kInsert ? kHomeTries : 1); ++attempt) {
        // The home quarter, then, if it is full, the others in order to the first that
        // holds the key or an empty spot: a key that came after its quarter filled took
        // the list's first empty spot then, and no spot before it empties again. A
        // quarter a read, so that a thread holds 8 words, not the slab.
        bool retry = false;
        for (uint32_t i = 0; i < (kEveryQuarter ? 4 : 1) && !retry; ++i) {
            const uint32_t q = i == 0 ? home : (i - 1 < home ? i - 1 : i);
            const QuarterScan s = scan_quarter<Shape>(head, q, e.place.stored);
            if (kInsert && s.match == GH_SLAB_WORDS && must_wait<Shape>(s.busy)) {
                return false;  // the tiles wait for the busy spot
            }
            if (ends_at(s)) {
                return true;
            }
            retry = s.empty != GH_SLAB_WORDS;  // an insert's lost claim
        }
        if (!retry) {
            return false;  // a full head slab without the key
        }
    }
    return false;
}

// A bulk batch (kInsert: inserts only, else lookups only) over grid-stride chunks of 32
// elements a warp; each chunk's elements are loaded while the chunk before is served, in the
// way GhSlabOpsParams.reads names: a map's or set's operation may first try its head slab
// alone (settle_in_head), the tiles taking what is left.
template <typename Shape, bool kInsert>
__device__ void run_bulk(const GhSlabOpsParams &p) {
    WarpAllocator allocator(p.table.alloc);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull;
    const bool alone = Shape::kHomed && p.reads == GH_SLAB_READ_THREADS;
    BulkLoad ahead = load_element<Shape, kInsert>(p, first + lane_id());
    for (uint64_t base = first; base < p.count; base += stride) {
        BulkElement mine = settle<Shape>(p.table, ahead);
        ahead = load_element<Shape, kInsert>(p, base + stride + lane_id());
        const bool served = mine.active;
        uint32_t status = GH_STATUS_PENDING;
        uint64_t result = 0;
        // A find ends in its home quarter or goes to the tiles; an insert walks the
        // quarters of its head slab.
        if (alone && mine.active && settle_in_head<Shape, kInsert, kInsert>(p.table, mine, status, result)) {
            mine.active = false;
        }
        // Copies of the walk by what it reads first, so that whole-slab passes carry no
        // test of a part.
        constexpr uint32_t kPart = !kInsert ? GH_SLAB_READ_WHOLE : (Shape::kHomed ? GH_SLAB_READ_HOME : GH_SLAB_READ_HALF);
        if (kPart != GH_SLAB_READ_WHOLE && p.reads == kPart) {
            serve_tiles<Shape, kBulkTileLanes, kInsert, kPart>(p.table, allocator, mine, p.walk_slabs, status, result);
        } else {
            serve_tiles<Shape, kBulkTileLanes, kInsert, GH_SLAB_READ_WHOLE>(p.table, allocator, mine, p.walk_slabs,
                                                                           status, result);
        }
        if (served) {
            answer<Shape>(p, base + lane_id(), status, result);
        }
        if (kInsert && Shape::kKind == GH_TABLE_MULTIMAP && p.deferred != nullptr) {
            const uint32_t deferred = __ballot_sync(kFullWarp, served && status == GH_STATUS_DEFERRED);
            if (lane_id() == 0 && deferred != 0) {
                atomicAdd(p.deferred, (uint32_t)__popc(deferred));
            }
        }
    }
}

}  // namespace gh
