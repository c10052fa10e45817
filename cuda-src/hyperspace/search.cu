// Searches by attributes (the GHSH paper, sections 4.1.1 and 4.2.2): a query names up to
// p + 1 fields with a value each; its subtasks are the (query, bucket) pairs of every
// bucket it touches. A warp walks a bucket's super nodes reading one chain (the scan
// field's), ballots for the lanes equal to the query's value, and checks the other named
// fields, and the key slot's validity, on those lanes only.
//
// Grouped (warp pre-combination data sharing): subtasks come sorted by bucket, a warp
// takes the subtasks of one bucket, up to 32 at a time, and serves them together, reading
// each node once and comparing it with every query of the group. Ungrouped
// (warp-cooperative work sharing): a warp takes 32 subtasks and serves them one at a
// time, each walking its bucket.
#include "hyperspace/slots.cuh"

using gh::group_reserve;
using gh::kFullWarp;
using gh::lane_id;
using namespace gh::hs;

namespace {

// Entry f of a register array, by an index only known at run time, without spilling the
// array to local memory.
template <uint32_t kSize>
__device__ __forceinline__ uint32_t pick(const uint32_t (&words)[kSize], uint32_t index) {
    uint32_t picked = 0;
#pragma unroll
    for (uint32_t f = 0; f < kSize; ++f) {
        picked = f == index ? words[f] : picked;
    }
    return picked;
}

__device__ __forceinline__ bool named(uint32_t mask, uint32_t field) { return (mask >> field) & 1u; }

// The words of this lane's slot in the chains `chains` (bit c for chain c) of a super node,
// read after a fence: an insert publishes the key after the other fields, so words read
// after seeing the key live are the tuple's.
__device__ __forceinline__ void load_slot(const GhHsSpace &space, uint32_t *key_node, uint32_t chains,
                                          uint32_t (&words)[GH_HS_MAX_CHAINS]) {
    __threadfence();
#pragma unroll
    for (uint32_t c = 0; c < GH_HS_MAX_CHAINS; ++c) {
        words[c] = (c < chain_count(space) && named(chains, c)) ? __ldcg(node(key_node, c) + lane_id()) : 0u;
    }
}

// Whether the slot whose words this lane holds is a live tuple that meets query j's
// predicates (the words of query j are broadcast from lane j).
__device__ __forceinline__ bool meets(uint32_t mask, const uint32_t (&want)[GH_HS_MAX_FIELDS], uint32_t j,
                                      const uint32_t (&words)[GH_HS_MAX_CHAINS]) {
    bool ok = is_data_lane() && is_live_key(words[0]);
#pragma unroll
    for (uint32_t f = 0; f < GH_HS_MAX_FIELDS; ++f) {
        if (named(mask, f)) {
            // Every lane shuffles: `mask` is the same in all of them.
            const uint32_t wanted = __shfl_sync(kFullWarp, want[f], j);
            ok = ok && words[f] == wanted;
        }
    }
    return ok;
}

// Writes the matching tuple whose words this lane holds at `at` of out.
__device__ __forceinline__ void write_match(const GhHsSpace &space, const GhHsTuplesOut &out, uint64_t at,
                                            const uint32_t (&words)[GH_HS_MAX_CHAINS]) {
    out.keys[at] = words[0];
#pragma unroll
    for (uint32_t c = 1; c < GH_HS_MAX_CHAINS; ++c) {
        if (c < value_chain(space)) {
            out.attributes[(uint64_t)(c - 1u) * out.capacity + at] = words[c];
        } else if (c == value_chain(space)) {
            out.values[at] = words[c];
        }
    }
}

}  // namespace

// subtask s = (query members[s / touched], the (s % touched)-th bucket of the query): the
// free dimensions' coordinates count up from the last dimension.
extern "C" __global__ void gh_hs_subtasks(GhHsSubtaskParams p) {
    const uint64_t total = p.query_count * p.touched;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; s < total; s += stride) {
        const uint64_t query = p.members[s / p.touched];
        uint64_t free_part = s % p.touched;
        uint32_t bucket = 0;
        uint32_t shift = 0;
        for (uint32_t d = p.space.dimension_count; d-- > 0;) {
            const uint32_t bits = p.space.dimension_bits[d];
            const uint32_t field = p.space.dimension_field[d];
            uint32_t c;
            if (named(p.field_mask, field)) {
                c = coordinate(p.queries[query * GH_HS_MAX_FIELDS + field], p.space.dimension_seed[d], bits);
            } else {
                c = (uint32_t)(free_part & ((1ull << bits) - 1ull));
                free_part >>= bits;
            }
            bucket |= bits == 0 ? 0u : c << shift;
            shift += bits;
        }
        p.subtask_query[s] = (uint32_t)query;
        p.subtask_bucket[s] = bucket;
    }
}

namespace {

// Serves the subtasks of this warp's lanes that are `active` (lane i subtask s of lane i):
// the grouped way, all those of the leader's bucket together, then the next bucket's; the
// other way, one at a time. Counts (count pass) or writes (write pass) the matches.
__device__ void serve_subtasks(const GhHsSearchParams &p, uint64_t s, bool active) {
    const bool write = p.out.keys != nullptr;
    // Chains a matching slot needs: the key (validity) and the named fields; a write
    // pass needs every chain.
    const uint32_t chains = write ? 0xffffffffu : (p.field_mask | 1u);
    const bool mine = active;
    const uint32_t query = active ? p.subtask_query[s] : 0u;
    const uint32_t bucket = active ? p.subtask_bucket[s] : 0u;
    uint32_t want[GH_HS_MAX_FIELDS];
#pragma unroll
    for (uint32_t f = 0; f < GH_HS_MAX_FIELDS; ++f) {
        want[f] = active && named(p.field_mask, f) ? p.queries[(uint64_t)query * GH_HS_MAX_FIELDS + f] : 0u;
    }
    const uint32_t scan_value = pick(want, p.scan_field);
    uint64_t found = 0;
    while (true) {
        const uint32_t pending = __ballot_sync(kFullWarp, active);
        if (pending == 0) {
            break;
        }
        const uint32_t leader = __ffs(pending) - 1;
        const uint32_t shared_bucket = __shfl_sync(kFullWarp, bucket, leader);
        const uint32_t group =
            p.grouped ? __ballot_sync(kFullWarp, active && bucket == shared_bucket) : (1u << leader);
        walk_bucket(p.space, shared_bucket, [&](SuperNode at, uint32_t key_word) {
            const uint32_t scanned =
                p.scan_field == GH_HS_KEY_FIELD ? key_word : __ldcg(node(at.key_node, p.scan_field) + lane_id());
            uint32_t words[GH_HS_MAX_CHAINS];
            bool loaded = false;
            for (uint32_t members = group; members != 0; members &= members - 1) {
                const uint32_t j = __ffs(members) - 1;
                const uint32_t target = __shfl_sync(kFullWarp, scan_value, j);
                if (__ballot_sync(kFullWarp, is_data_lane() && scanned == target) == 0) {
                    continue;
                }
                if (!loaded) {
                    load_slot(p.space, at.key_node, chains, words);
                    loaded = true;
                }
                const bool ok = meets(p.field_mask, want, j, words);
                const uint32_t matches = __ballot_sync(kFullWarp, ok);
                if (matches == 0) {
                    continue;
                }
                if (!write) {
                    found += lane_id() == j ? __popc(matches) : 0u;
                    continue;
                }
                const uint32_t q = __shfl_sync(kFullWarp, query, j);
                const uint64_t k = group_reserve(p.cursors + q, matches);
                // The bound on out's capacity holds of itself when the rows were laid out
                // from the counts; a caller's buffer sized by a guess relies on it.
                if (ok && k < p.limits[q] && p.offsets[q] + k < p.out.capacity) {
                    write_match(p.space, p.out, p.offsets[q] + k, words);
                }
            }
            return true;
        });
        if ((group >> lane_id()) & 1u) {
            active = false;
        }
    }
    if (!write && mine && found != 0) {
        atomicAdd((unsigned long long *)p.counts + query, (unsigned long long)found);
    }
}

}  // namespace

// Grouped: one warp per bucket, so that no warp walks one chain after another while
// others idle (a search naming attributes only touches every key coordinate of a
// key-spread subspace: many buckets, few subtasks each). A warp item is a subtask; the
// subtask that opens a run of one bucket (subtasks come sorted by bucket, or by its low
// bits) leads, its warp serves the run 32 subtasks at a time, the others return at once. Ungrouped: a warp
// serves 32 consecutive subtasks, one at a time.
extern "C" __global__ void gh_hs_search(GhHsSearchParams p) {
    if (p.grouped) {
        for_each_warp_item(p.subtask_count, [&](uint64_t first) {
            const uint32_t bucket = p.subtask_bucket[first];
            if (first != 0 && p.subtask_bucket[first - 1u] == bucket) {
                return;
            }
            for (uint64_t base = first;; base += 32u) {
                const uint64_t s = base + lane_id();
                const uint32_t same = __ballot_sync(kFullWarp, s < p.subtask_count && p.subtask_bucket[s] == bucket);
                // The run is the lanes up to the first of another bucket: a later subtask of
                // this bucket past one of another (a sort by the bucket's low bits only
                // leaves them so) leads a run of its own.
                const uint32_t run = same == kFullWarp ? kFullWarp : (1u << (__ffs(~same) - 1u)) - 1u;
                serve_subtasks(p, s, (run >> lane_id()) & 1u);
                if (run != kFullWarp) {
                    break;
                }
            }
        });
    } else {
        for_each_warp_item((p.subtask_count + 31u) / 32u, [&](uint64_t chunk) {
            const uint64_t s = chunk * 32u + lane_id();
            serve_subtasks(p, s, s < p.subtask_count);
        });
    }
}

// One thread an answer position; the query whose row holds it is found by a binary search
// of `to`. A warp a query left all but a few SMs idle when a batch holds a few queries of
// long rows (an attribute of 100 values: 25 queries, 2^22 matches).
extern "C" __global__ void gh_hs_compact(GhHsCompactParams p) {
    const uint64_t total = p.to[p.query_count];
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t dst = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; dst < total; dst += stride) {
        // to[low] <= dst < to[high]: low ends at the last query whose row starts at or
        // before dst, the one that holds it (rows before it that are empty start there too).
        uint64_t low = 0;
        uint64_t high = p.query_count;
        while (high - low > 1u) {
            const uint64_t middle = low + (high - low) / 2u;
            if (p.to[middle] <= dst) {
                low = middle;
            } else {
                high = middle;
            }
        }
        const uint64_t src = p.from[low] + (dst - p.to[low]);
        p.out.keys[dst] = p.source.keys[src];
        p.out.values[dst] = p.source.values[src];
        for (uint32_t a = 0; a < p.attribute_count; ++a) {
            p.out.attributes[(uint64_t)a * p.out.capacity + dst] = p.source.attributes[(uint64_t)a * p.source.count + src];
        }
    }
}

// Settles a write pass's rows: a query that found more than its room (or, exact, another
// number) raises the flag, and with pad its room becomes what the next pass lays out.
extern "C" __global__ void gh_hs_settle_rows(GhHsRowsParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (first == 0 && p.flag != nullptr && p.total != nullptr && *p.total > p.capacity) {
        atomicOr(p.flag, 1ull);
    }
    for (uint64_t q = first; q < p.count; q += stride) {
        const uint64_t found = p.found[q];
        if (p.flag != nullptr) {
            // Read only when checked: the first padding of a batch's counts writes a room
            // that holds nothing yet.
            const uint64_t room = p.room[q];
            if (p.exact ? found != room : found > room) {
                atomicOr(p.flag, 1ull);
            }
        }
        if (p.pad) {
            p.room[q] = found + found / 4u + 8u;
        }
    }
}
