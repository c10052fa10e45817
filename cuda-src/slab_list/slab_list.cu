// Slab list kernels: lists of 32-bit words built from the building blocks of
// slab_list.cuh, for users of plain lists and as the tests of those blocks. A word lives in
// one of the 31 data lanes of a slab; appends take the first empty word of a list, so a
// list's words stay in the order they went in, and removals leave holes that stay.
#include "slab_list/slab_list.cuh"

namespace {

using gh::kFullWarp;
using gh::lane_id;

__device__ __forceinline__ bool is_data_lane(uint32_t lane) { return lane < GH_SLAB_DATA_LANES; }

__device__ __forceinline__ bool is_live(uint32_t word) {
    return is_data_lane(lane_id()) && word != GH_SLAB_EMPTY_WORD && word != GH_SLAB_REMOVED_WORD;
}

// Grid-stride over elements with warp-uniform bounds, so that all 32 lanes take part in
// every walk: serve(i, active) with this lane's element i.
template <typename Serve>
__device__ __forceinline__ void for_each_element(uint64_t count, Serve serve) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t base = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) & ~31ull; base < count; base += stride) {
        const uint64_t i = base + lane_id();
        serve(i, i < count);
    }
}

// One warp per list.
template <typename Visit>
__device__ __forceinline__ void for_each_list(const GhSlabLists &lists, Visit visit) {
    const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
    for (uint64_t l = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; l < lists.list_count; l += warps) {
        visit((uint32_t)l);
    }
}

}  // namespace

// Warp-cooperative appends: the warp takes its lanes' words in turn, lowest lane first,
// walks that word's list to the first empty word and claims it with a compare-and-swap
// (a lost claim reads the slab again); a full tail gets a new slab. Everything before the
// first empty word is full, so a lane appending to the list just served starts from the
// slab where the last append ended instead of the head.
extern "C" __global__ void gh_slab_list_append(GhSlabListAppendParams p) {
    gh::WarpAllocator allocator(p.lists.alloc);
    for_each_element(p.count, [&](uint64_t i, bool in_batch) {
        bool active = in_batch && p.status[i] == 0;
        const uint32_t list = active ? p.lists_of[i] : 0;
        const uint32_t word = active ? p.words[i] : 0;
        uint32_t served_list = ~0u;  // none yet: no list index reaches it
        uint32_t *slab = nullptr;
        while (true) {
            const uint32_t queue = __ballot_sync(kFullWarp, active);
            if (queue == 0) {
                return;
            }
            const uint32_t src = __ffs(queue) - 1;
            const uint32_t src_list = __shfl_sync(kFullWarp, list, src);
            const uint32_t src_word = __shfl_sync(kFullWarp, word, src);
            if (src_list != served_list) {
                served_list = src_list;
                slab = gh::list_head(p.lists.heads, src_list);
            }
            const uint32_t here = gh::read_slab(slab);
            const uint32_t spot = gh::find_first(is_data_lane(lane_id()) && here == GH_SLAB_EMPTY_WORD);
            const uint32_t next = gh::next_address(here);
            if (spot < 32) {
                const bool stored = lane_id() == spot && atomicCAS(slab + spot, GH_SLAB_EMPTY_WORD, src_word) == GH_SLAB_EMPTY_WORD;
                if (__ballot_sync(kFullWarp, stored) == 0) {
                    continue;  // another warp took the word: read the slab again
                }
                if (lane_id() == src) {
                    p.status[i] = 1;
                    active = false;
                }
            } else if (next != GH_INVALID_SLAB) {
                slab = gh::slab_pointer(p.lists.alloc, next);
            } else if (!gh::extend_list(allocator, p.lists.alloc, slab)) {
                // No slab: this word stays out (status 0) for a retry after growth.
                if (lane_id() == src) {
                    active = false;
                }
            }
        }
    });
}

// Live words per list (counts), or, with offsets and words_out, the live words of list l
// in order from offsets[l], never past offsets[l + 1].
extern "C" __global__ void gh_slab_list_scan(GhSlabListScanParams p) {
    const uint32_t lanes_below = (1u << lane_id()) - 1u;
    for_each_list(p.lists, [&](uint32_t list) {
        const bool collect = p.words_out != nullptr;
        uint64_t seen = collect ? p.offsets[list] : 0;
        const uint64_t end = collect ? p.offsets[list + 1] : 0;
        gh::traverse(p.lists.alloc, gh::list_head(p.lists.heads, list), [&](uint32_t *, uint32_t word) {
            const uint32_t live = __ballot_sync(kFullWarp, is_live(word));
            const uint64_t at = seen + __popc(live & lanes_below);
            if (collect && ((live >> lane_id()) & 1) && at < end) {
                p.words_out[at] = word;
            }
            seen += __popc(live);
        });
        if (p.counts != nullptr && lane_id() == 0) {
            p.counts[list] = seen;
        }
    });
}

// Every copy of words[i] in list lists_of[i] becomes a removed word; the warp walks one
// element's list at a time, each matching lane swapping its own word.
extern "C" __global__ void gh_slab_list_remove(GhSlabListRemoveParams p) {
    for_each_element(p.count, [&](uint64_t i, bool in_batch) {
        const uint32_t list = in_batch ? p.lists_of[i] : 0;
        const uint32_t word = in_batch ? p.words[i] : 0;
        uint32_t queue = __ballot_sync(kFullWarp, in_batch);
        while (queue != 0) {
            const uint32_t src = __ffs(queue) - 1;
            queue &= queue - 1;
            const uint32_t src_word = __shfl_sync(kFullWarp, word, src);
            uint32_t removed = 0;
            gh::traverse(p.lists.alloc, gh::list_head(p.lists.heads, __shfl_sync(kFullWarp, list, src)),
                         [&](uint32_t *slab, uint32_t here) {
                             const bool mine = is_live(here) && here == src_word &&
                                               atomicCAS(slab + lane_id(), src_word, GH_SLAB_REMOVED_WORD) == src_word;
                             removed += __popc(__ballot_sync(kFullWarp, mine));
                         });
            if (lane_id() == src && p.removed != nullptr) {
                p.removed[i] = removed;
            }
        }
    });
}

// Empties every list; runs alone on the lists.
extern "C" __global__ void gh_slab_list_free(GhSlabListFreeParams p) {
    for_each_list(p.lists, [&](uint32_t list) { gh::free_chain(p.lists.alloc, gh::list_head(p.lists.heads, list)); });
}
