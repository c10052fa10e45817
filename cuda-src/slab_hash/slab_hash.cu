// Slab hash kernels: batches of operations, multimap gathers, and the per-bucket passes
// (count, export, flush). Each kernel comes in three table kinds; one template each.
#include "slab_hash/slab_list.cuh"

namespace {

using gh::kFullWarp;
using gh::lane_id;

// Grid-stride over elements with warp-uniform bounds: all 32 lanes stay in every loop
// round, as the warp-cooperative slab walk needs.
template <uint32_t kKind>
__device__ void run_ops(const GhSlabOpsParams &p) {
    gh::WarpAllocator allocator(p.table.alloc);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < p.count; base += stride) {
        uint64_t i = base + lane_id();
        bool active = i < p.count && p.status[i] == GH_STATUS_PENDING;
        uint32_t op = 0, key = 0, value = 0, status = GH_STATUS_PENDING, result = 0;
        if (active) {
            op = p.ops != nullptr ? p.ops[i] : p.uniform_op;
            key = p.keys[i];
            value = p.values != nullptr ? p.values[i] : 0;
        }
        gh::serve_warp<kKind>(p.table, allocator, active, op, key, value, status, result);
        if (active) {
            p.status[i] = status;
            if (p.results != nullptr) {
                p.results[i] = result;
            }
        }
    }
}

// Visits every bucket with one warp, the two reserved-key buckets included.
template <typename Visit>
__device__ void for_each_bucket(const GhSlabTable &table, Visit visit) {
    uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
    uint32_t buckets = table.bucket_count + 2;
    for (uint64_t b = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; b < buckets; b += warps) {
        visit((uint32_t)b);
    }
}

template <uint32_t kKind>
__device__ __forceinline__ bool is_live(uint32_t word) {
    return gh::is_key_lane<kKind>(lane_id()) && word != GH_EMPTY_KEY && word != GH_TOMBSTONE_KEY;
}

template <uint32_t kKind>
__device__ void count_buckets(const GhSlabBucketsParams &p) {
    for_each_bucket(p.table, [&](uint32_t bucket) {
        uint64_t live = 0;
        for (uint32_t *slab = gh::head_slab(p.table, bucket); slab != nullptr;) {
            uint32_t word = gh::read_slab(slab);
            live += __popc(__ballot_sync(kFullWarp, is_live<kKind>(word)));
            uint32_t next = __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
            slab = next == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(p.table.alloc, next);
        }
        if (lane_id() == 0) {
            p.counts[bucket] = live;
        }
    });
}

template <uint32_t kKind>
__device__ void export_buckets(const GhSlabBucketsParams &p) {
    uint32_t lanes_below = (1u << lane_id()) - 1u;
    for_each_bucket(p.table, [&](uint32_t bucket) {
        uint64_t written = p.offsets[bucket];
        for (uint32_t *slab = gh::head_slab(p.table, bucket); slab != nullptr;) {
            uint32_t word = gh::read_slab(slab);
            uint32_t value = __shfl_down_sync(kFullWarp, word, 1);
            uint32_t live = __ballot_sync(kFullWarp, is_live<kKind>(word));
            if ((live >> lane_id()) & 1) {
                uint64_t at = written + __popc(live & lanes_below);
                p.keys_out[at] = gh::user_key(p.table, bucket, word);
                if (p.values_out != nullptr) {
                    p.values_out[at] = value;
                }
            }
            written += __popc(live);
            uint32_t next = __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
            slab = next == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(p.table.alloc, next);
        }
    });
}

// Moves a bucket's live entries to the front of its list, in order, marks the rest empty
// and returns the slabs left empty to the allocator. Runs alone: no other kernel may use
// the table meanwhile.
template <uint32_t kKind>
__device__ void flush_buckets(const GhSlabBucketsParams &p) {
    constexpr uint32_t kEntries = kKind == GH_TABLE_SET ? GH_SLAB_KEYS : GH_SLAB_PAIRS;
    constexpr uint32_t kWordsPerEntry = kKind == GH_TABLE_SET ? 1 : 2;
    const uint32_t lane = lane_id();
    const uint32_t lanes_below = (1u << lane) - 1u;
    for_each_bucket(p.table, [&](uint32_t bucket) {
        uint32_t *write_slab = gh::head_slab(p.table, bucket);
        uint32_t *before_write = nullptr;  // the slab whose next is write_slab
        uint32_t written = 0;              // entries already in write_slab
        for (uint32_t *read = write_slab; read != nullptr;) {
            uint32_t word = gh::read_slab(read);
            uint32_t value = __shfl_down_sync(kFullWarp, word, 1);
            uint32_t next = __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
            uint32_t live = __ballot_sync(kFullWarp, is_live<kKind>(word));
            // The slab is in registers; writes below may land in it (never past it), and
            // never touch lane 31, so the list's links stay as they were.
            __syncwarp();
            uint32_t spill_address = __ldcg(write_slab + GH_SLAB_NEXT_LANE);
            if ((live >> lane) & 1) {
                uint32_t entry = written + __popc(live & lanes_below);
                uint32_t *target = entry < kEntries ? write_slab : gh::slab_pointer(p.table.alloc, spill_address);
                uint32_t at = (entry % kEntries) * kWordsPerEntry;
                target[at] = word;
                if (kWordsPerEntry == 2) {
                    target[at + 1] = value;
                }
            }
            written += __popc(live);
            if (written >= kEntries) {
                written -= kEntries;
                before_write = write_slab;
                write_slab = spill_address == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(p.table.alloc, spill_address);
            }
            __syncwarp();
            read = next == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(p.table.alloc, next);
        }
        if (write_slab == nullptr) {
            return;  // every slab is full: nothing to clear or free
        }
        // The last slab keeps `written` entries: empty the rest of it, or, if it holds none
        // and is not the head, unlink it along with everything after it.
        uint32_t *last = written == 0 && before_write != nullptr ? before_write : write_slab;
        if (last == write_slab && lane < kEntries * kWordsPerEntry && lane / kWordsPerEntry >= written) {
            write_slab[lane] = GH_EMPTY_KEY;
        }
        uint32_t tail = __ldcg(last + GH_SLAB_NEXT_LANE);
        __syncwarp();
        if (lane == GH_SLAB_NEXT_LANE) {
            last[GH_SLAB_NEXT_LANE] = GH_INVALID_SLAB;
        }
        while (tail != GH_INVALID_SLAB) {
            uint32_t following = __ldcg(gh::slab_pointer(p.table.alloc, tail) + GH_SLAB_NEXT_LANE);
            if (lane == 0) {
                gh::deallocate(p.table.alloc, tail);
            }
            tail = following;
        }
    });
}

}  // namespace

#define GH_SLAB_KERNELS(name, kind)                                                                       \
    extern "C" __global__ void gh_slab_ops_##name(GhSlabOpsParams p) { run_ops<kind>(p); }               \
    extern "C" __global__ void gh_slab_count_##name(GhSlabBucketsParams p) { count_buckets<kind>(p); }   \
    extern "C" __global__ void gh_slab_export_##name(GhSlabBucketsParams p) { export_buckets<kind>(p); } \
    extern "C" __global__ void gh_slab_flush_##name(GhSlabBucketsParams p) { flush_buckets<kind>(p); }

GH_SLAB_KERNELS(map, GH_TABLE_MAP)
GH_SLAB_KERNELS(set, GH_TABLE_SET)
GH_SLAB_KERNELS(multimap, GH_TABLE_MULTIMAP)

// Multimap get_all: writes the values of keys[i], at most counts[i] of them, from
// offsets[i] on. One warp serves one key at a time, every lane writing its match.
extern "C" __global__ void gh_slab_gather(GhSlabGatherParams p) {
    uint32_t lanes_below = (1u << lane_id()) - 1u;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < p.count; base += stride) {
        uint32_t served = (uint32_t)min((uint64_t)32, p.count - base);
        for (uint32_t src = 0; src < served; ++src) {
            uint64_t i = base + src;
            gh::Placement place = gh::place(p.table, p.keys[i]);
            uint64_t written = 0, limit = p.counts[i], offset = p.offsets[i];
            for (uint32_t *slab = gh::head_slab(p.table, place.bucket); slab != nullptr && written < limit;) {
                uint32_t word = gh::read_slab(slab);
                uint32_t value = __shfl_down_sync(kFullWarp, word, 1);
                uint32_t matches =
                    __ballot_sync(kFullWarp, gh::is_key_lane<GH_TABLE_MULTIMAP>(lane_id()) && word == place.stored);
                uint64_t at = written + __popc(matches & lanes_below);
                if (((matches >> lane_id()) & 1) && at < limit) {
                    p.out[offset + at] = value;
                }
                written += __popc(matches);
                uint32_t next = __shfl_sync(kFullWarp, word, GH_SLAB_NEXT_LANE);
                slab = next == GH_INVALID_SLAB ? nullptr : gh::slab_pointer(p.table.alloc, next);
            }
        }
    }
}

extern "C" __global__ void gh_slab_fill(GhFillParams p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.words[i] = p.value;
    }
}
