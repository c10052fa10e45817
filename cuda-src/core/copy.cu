// Readbacks of a few words by the SMs' stores into mapped pinned memory: a copy engine
// runs its queue in order, and a small copy queued behind a large one (a page-out of a
// paged table's child) would wait for all of it.
#include <stdint.h>

#include "gpuhash/core_layouts.h"

extern "C" __global__ void gh_copy_words(GhCopyWordsParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.words; i += stride) {
        p.to[i] = p.from[i];
    }
}
