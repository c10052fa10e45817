// Slab hash kernels: batches of operations, multimap gathers and grouped appends, and the
// per-bucket passes (count and export by chunks of buckets, flush), for every table kind and
// key and value width; one template each. Keys, values and results travel as arrays of
// 32-bit words, a 64-bit element as two (low word first).
#include "slab_hash/slab_runs.cuh"

namespace {

using gh::kFullWarp;
using gh::lane_id;
using gh::load_words;
using gh::store_words;

// Grid-stride over elements with warp-uniform bounds: all 32 lanes stay in every loop
// round, as the warp-cooperative slab walk needs.
template <typename Shape>
__device__ void run_ops(const GhSlabOpsParams &p) {
    gh::WarpAllocator allocator(p.table.alloc);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < p.count; base += stride) {
        uint64_t i = base + lane_id();
        bool active = i < p.count && gh::is_served(p, i);
        uint32_t op = 0, status = GH_STATUS_PENDING;
        uint64_t key = 0, value = 0, result = 0;
        if (active) {
            op = p.ops != nullptr ? p.ops[i] : p.uniform_op;
            key = load_words<Shape::kKeyWords>(p.keys, i);
            value = p.values != nullptr ? load_words<Shape::kValueBufferWords>(p.values, i) : 0;
        }
        gh::serve_warp<Shape>(p.table, allocator, active, op, key, value, status, result);
        if (active) {
            gh::answer<Shape>(p, i, status, result);
        }
    }
}

// Visits every bucket with one warp, the reserved-key buckets included.
template <typename Visit>
__device__ void for_each_bucket(const GhSlabTable &table, Visit visit) {
    uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
    uint32_t buckets = table.bucket_count + GH_RESERVED_BUCKETS;
    for (uint64_t b = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; b < buckets; b += warps) {
        visit((uint32_t)b);
    }
}

// Whether this lane holds a live key; `here` is what join_words gave it. A busy spot's
// entry is not there yet.
template <typename Shape>
__device__ __forceinline__ bool is_live(uint64_t here) {
    return Shape::is_key_lane(lane_id()) && here != Shape::kEmpty && here != Shape::kTombstone &&
           here != Shape::kBusy;
}

// Visits every chunk of GH_SLAB_CHUNK_BUCKETS buckets with one warp, the chunk's buckets in
// order, so that a count pass and an export pass see each chunk's pairs in the same order.
template <typename Visit>
__device__ void for_each_chunk(const GhSlabTable &table, Visit visit) {
    uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
    uint32_t buckets = table.bucket_count + GH_RESERVED_BUCKETS;
    uint64_t chunks = ((uint64_t)buckets + GH_SLAB_CHUNK_BUCKETS - 1) / GH_SLAB_CHUNK_BUCKETS;
    for (uint64_t c = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; c < chunks; c += warps) {
        uint32_t first = (uint32_t)(c * GH_SLAB_CHUNK_BUCKETS);
        uint32_t end = (uint32_t)min((uint64_t)buckets, (uint64_t)first + GH_SLAB_CHUNK_BUCKETS);
        visit(c, first, end);
    }
}

// Live entries of one bucket, the same on every lane.
template <typename Shape>
__device__ uint64_t live_in_bucket(const GhSlabTable &table, uint32_t bucket) {
    uint64_t live = 0;
    gh::traverse(table.alloc, gh::head_slab(table, bucket), [&](uint32_t *, uint32_t word) {
        live += __popc(__ballot_sync(kFullWarp, is_live<Shape>(gh::join_words<Shape::kKeyWords>(word))));
    });
    return live;
}

// Live entries per chunk of buckets into counts, or, when counts is null, their sum into
// *total with one atomic a warp: counting the table then needs no memory in proportion to
// it.
template <typename Shape>
__device__ void count_buckets(const GhSlabBucketsParams &p) {
    uint64_t warp_total = 0;
    for_each_chunk(p.table, [&](uint64_t chunk, uint32_t first, uint32_t end) {
        uint64_t live = 0;
        for (uint32_t bucket = first; bucket < end; ++bucket) {
            live += live_in_bucket<Shape>(p.table, bucket);
        }
        if (p.counts != nullptr && lane_id() == 0) {
            p.counts[chunk] = live;
        }
        warp_total += live;
    });
    if (p.counts == nullptr && lane_id() == 0 && warp_total != 0) {
        atomicAdd(reinterpret_cast<unsigned long long *>(p.total), (unsigned long long)warp_total);
    }
}

// Each chunk's pairs from its offset on, in bucket order. A chunk never writes past the
// next chunk's offset: should a batch on another stream insert between the count and this
// pass, its pairs are left out rather than written over another chunk's (or past the
// outputs). Should one remove pairs, the chunk finds fewer than its range and the end of
// the range stays unwritten: it raises *short_chunks, and the host exports again. (An
// export that runs alone, where nothing can change, passes no flag.)
template <typename Shape>
__device__ void export_buckets(const GhSlabBucketsParams &p) {
    uint32_t lanes_below = (1u << lane_id()) - 1u;
    for_each_chunk(p.table, [&](uint64_t chunk, uint32_t first, uint32_t end) {
        uint64_t written = p.offsets[chunk];
        const uint64_t limit = p.offsets[chunk + 1];
        for (uint32_t bucket = first; bucket < end; ++bucket) {
            gh::traverse(p.table.alloc, gh::head_slab(p.table, bucket), [&](uint32_t *, uint32_t word) {
                uint64_t here = gh::join_words<Shape::kKeyWords>(word);
                uint64_t value =
                    __shfl_down_sync(kFullWarp, gh::join_words<Shape::kValueBufferWords>(word), Shape::kValueLane);
                uint32_t live = __ballot_sync(kFullWarp, is_live<Shape>(here));
                uint64_t at = written + __popc(live & lanes_below);
                if (((live >> lane_id()) & 1) && at < limit) {
                    store_words<Shape::kKeyWords>(p.keys_out, at, gh::user_key<Shape>(p.table, bucket, here));
                    if (p.values_out != nullptr) {
                        store_words<Shape::kValueBufferWords>(p.values_out, at, value);
                    }
                }
                written += __popc(live);
            });
        }
        if (lane_id() == 0 && written < limit && p.short_chunks != nullptr) {
            atomicExch(p.short_chunks, 1u);
        }
    });
}

// Puts the entries of a head slab that holds its whole list, compacted to its front, where
// inserts one after another would have: each in the first empty spot of its home quarter,
// else the first empty spot of the slab (see gh::home_quarter). Runs alone, as a flush.
template <typename Shape>
__device__ void rehome(uint32_t *head) {
    constexpr uint32_t kWords = Shape::kEntryWords;
    const uint32_t lane = lane_id();
    __syncwarp();
    const uint32_t word = gh::read_slab(head);
    const uint64_t here = gh::join_words<Shape::kKeyWords>(word);
    const uint32_t key_lanes = __ballot_sync(kFullWarp, Shape::is_key_lane(lane));
    const uint32_t live = __ballot_sync(kFullWarp, is_live<Shape>(here));
    const uint32_t quarter = gh::home_quarter<Shape>(here);
    uint32_t taken = 0;   // key lanes of the spots given out so far (the same on every lane)
    uint32_t target = 0;  // on an entry's key lane: the key lane of its new spot
    for (uint32_t left = live; left != 0; left &= left - 1) {
        const uint32_t from = __ffs(left) - 1;
        const uint32_t open = key_lanes & ~taken;
        const uint32_t in_home = open & gh::quarter_lanes(__shfl_sync(kFullWarp, quarter, from));
        const uint32_t to = __ffs(in_home != 0 ? in_home : open) - 1;
        taken |= 1u << to;
        if (lane == from) {
            target = to;
        }
    }
    // Every word of an entry moves with its key.
    const uint32_t key_lane = lane - lane % kWords;
    const uint32_t to = __shfl_sync(kFullWarp, target, key_lane);
    const bool entry_word = lane < Shape::kEntries * kWords;
    if (entry_word) {
        head[lane] = GH_EMPTY_KEY;
    }
    __syncwarp();
    if (entry_word && ((live >> key_lane) & 1)) {
        head[to + lane % kWords] = word;
    }
    __syncwarp();
}

// Moves a bucket's live entries to the front of its list, in order, marks the rest empty
// and returns the slabs left empty to the allocator; a list left in its head slab alone
// then has its entries homed again (rehome). Runs alone: no other kernel may use the table
// meanwhile.
template <typename Shape>
__device__ void flush_buckets(const GhSlabBucketsParams &p) {
    constexpr uint32_t kEntries = Shape::kEntries;
    constexpr uint32_t kWords = Shape::kEntryWords;
    const uint32_t lane = lane_id();
    const uint32_t lanes_below = (1u << lane) - 1u;
    for_each_bucket(p.table, [&](uint32_t bucket) {
        uint32_t *const head = gh::head_slab(p.table, bucket);
        uint32_t *write_slab = head;
        uint32_t *before_write = nullptr;  // the slab whose next is write_slab
        uint32_t written = 0;              // entries already in write_slab
        for (uint32_t *read = write_slab; read != nullptr;) {
            uint32_t word = gh::read_slab(read);
            uint32_t entry_words[kWords];
#pragma unroll
            for (uint32_t j = 0; j < kWords; ++j) {
                entry_words[j] = __shfl_down_sync(kFullWarp, word, j);
            }
            uint32_t *following = gh::follow(p.table.alloc, word);
            uint32_t live = __ballot_sync(kFullWarp, is_live<Shape>(gh::join_words<Shape::kKeyWords>(word)));
            // The slab is in registers; writes below may land in it (never past it), and
            // never touch lane 31, so the list's links stay as they were.
            __syncwarp();
            uint32_t spill_address = __ldcg(write_slab + GH_SLAB_NEXT_LANE);
            if ((live >> lane) & 1) {
                uint32_t entry = written + __popc(live & lanes_below);
                uint32_t *target = entry < kEntries ? write_slab : gh::slab_pointer(p.table.alloc, spill_address);
#pragma unroll
                for (uint32_t j = 0; j < kWords; ++j) {
                    target[(entry % kEntries) * kWords + j] = entry_words[j];
                }
            }
            written += __popc(live);
            if (written >= kEntries) {
                written -= kEntries;
                before_write = write_slab;
                write_slab = spill_address == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(p.table.alloc, spill_address);
            }
            __syncwarp();
            read = following;
        }
        if (write_slab == nullptr) {
            return;  // every slab is full: nothing to clear or free
        }
        // The last slab keeps `written` entries: empty the rest of it, or, if it holds none
        // and is not the head, unlink it along with everything after it.
        uint32_t *last = written == 0 && before_write != nullptr ? before_write : write_slab;
        if (last == write_slab && lane < kEntries * kWords && lane / kWords >= written) {
            write_slab[lane] = GH_EMPTY_KEY;
        }
        gh::release_after(p.table.alloc, last);
        if (Shape::kHomed && last == head) {
            rehome<Shape>(head);
        }
    });
}

// Multimap get_all: writes the values of keys[i], at most counts[i] of them, from
// offsets[i] on, and how many it wrote into counts[i]. One warp serves one key at a time,
// every lane writing its match.
template <typename Shape>
__device__ void gather(const GhSlabGatherParams &p) {
    uint32_t lanes_below = (1u << lane_id()) - 1u;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < p.count; base += stride) {
        uint32_t served = (uint32_t)min((uint64_t)32, p.count - base);
        for (uint32_t src = 0; src < served; ++src) {
            uint64_t i = base + src;
            gh::Placement place = gh::place<Shape>(p.table, load_words<Shape::kKeyWords>(p.keys, i));
            uint64_t written = 0, limit = p.counts[i], offset = p.offsets[i];
            for (uint32_t *slab = gh::head_slab(p.table, place.bucket); slab != nullptr && written < limit;) {
                uint32_t word = gh::read_slab(slab);
                uint64_t here = gh::join_words<Shape::kKeyWords>(word);
                uint64_t value =
                    __shfl_down_sync(kFullWarp, gh::join_words<Shape::kValueBufferWords>(word), Shape::kValueLane);
                uint32_t matches = __ballot_sync(kFullWarp, Shape::is_key_lane(lane_id()) && here == place.stored);
                uint64_t at = written + __popc(matches & lanes_below);
                if (((matches >> lane_id()) & 1) && at < limit) {
                    store_words<Shape::kValueBufferWords>(p.out, offset + at, value);
                }
                written += __popc(matches);
                slab = gh::follow(p.table.alloc, word);
            }
            if (lane_id() == 0) {
                p.counts[i] = (uint32_t)min(written, limit);
                if (written < limit) {
                    *p.short_rows = 1;
                }
            }
        }
    }
}

}  // namespace

#define GH_SLAB_KERNELS(name, kind, key_words, value_words)                                                    \
    using Shape_##name = gh::SlabShape<kind, key_words, value_words>;                                          \
    extern "C" __global__ void gh_slab_ops_##name(GhSlabOpsParams p) { run_ops<Shape_##name>(p); }           \
    extern "C" __global__ void gh_slab_insert_##name(GhSlabOpsParams p) { gh::run_bulk<Shape_##name, true>(p); } \
    extern "C" __global__ void gh_slab_find_##name(GhSlabOpsParams p) { gh::run_bulk<Shape_##name, false>(p); } \
    extern "C" __global__ void gh_slab_count_##name(GhSlabBucketsParams p) { count_buckets<Shape_##name>(p); } \
    extern "C" __global__ void gh_slab_export_##name(GhSlabBucketsParams p) { export_buckets<Shape_##name>(p); } \
    extern "C" __global__ void gh_slab_flush_##name(GhSlabBucketsParams p) { flush_buckets<Shape_##name>(p); }

GH_SLAB_KERNELS(map_k1v1, GH_TABLE_MAP, 1, 1)
GH_SLAB_KERNELS(map_k1v2, GH_TABLE_MAP, 1, 2)
GH_SLAB_KERNELS(map_k2v1, GH_TABLE_MAP, 2, 1)
GH_SLAB_KERNELS(map_k2v2, GH_TABLE_MAP, 2, 2)
GH_SLAB_KERNELS(multimap_k1v1, GH_TABLE_MULTIMAP, 1, 1)
GH_SLAB_KERNELS(multimap_k1v2, GH_TABLE_MULTIMAP, 1, 2)
GH_SLAB_KERNELS(multimap_k2v1, GH_TABLE_MULTIMAP, 2, 1)
GH_SLAB_KERNELS(multimap_k2v2, GH_TABLE_MULTIMAP, 2, 2)
GH_SLAB_KERNELS(set_k1v0, GH_TABLE_SET, 1, 0)
GH_SLAB_KERNELS(set_k2v0, GH_TABLE_SET, 2, 0)

#define GH_SLAB_GATHER(name, key_words, value_words)                                  \
    extern "C" __global__ void gh_slab_gather_##name(GhSlabGatherParams p) {          \
        gather<gh::SlabShape<GH_TABLE_MULTIMAP, key_words, value_words>>(p);            \
    }

GH_SLAB_GATHER(k1v1, 1, 1)
GH_SLAB_GATHER(k1v2, 1, 2)
GH_SLAB_GATHER(k2v1, 2, 1)
GH_SLAB_GATHER(k2v2, 2, 2)

// The grouped appends of a multimap insert pass (slab_runs.cuh); the reserve step below
// is the same at every width.
#define GH_SLAB_RUNS(name, key_words, value_words)                                             \
    using Runs_##name = gh::SlabShape<GH_TABLE_MULTIMAP, key_words, value_words>;               \
    extern "C" __global__ void gh_slab_runs_count_##name(GhSlabRunsParams p) {                  \
        gh::count_runs<Runs_##name>(p);                                                       \
    }                                                                                         \
    extern "C" __global__ void gh_slab_runs_scatter_##name(GhSlabRunsParams p) {                \
        gh::scatter_runs<Runs_##name>(p);                                                     \
    }                                                                                         \
    extern "C" __global__ void gh_slab_runs_append_##name(GhSlabRunsParams p) {                 \
        gh::append_runs<Runs_##name>(p);                                                      \
    }

GH_SLAB_RUNS(k1v1, 1, 1)
GH_SLAB_RUNS(k1v2, 1, 2)
GH_SLAB_RUNS(k2v1, 2, 1)
GH_SLAB_RUNS(k2v2, 2, 2)

extern "C" __global__ void gh_slab_runs_reserve(GhSlabRunsParams p) { gh::reserve_runs(p); }

extern "C" __global__ void gh_slab_mark_pending(GhSlabMarkParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        bool repeated = p.repeated != nullptr && p.repeated[i] != 0;
        p.status[i] = repeated ? GH_STATUS_DONE : GH_STATUS_PENDING;
    }
}

extern "C" __global__ void gh_slab_fill(GhFillParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.words[i] = p.value;
    }
}
