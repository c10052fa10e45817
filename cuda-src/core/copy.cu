// Small copies made by kernels rather than copy engines: a copy engine runs its queue in
// order, and a small copy queued behind a large one (a paged table's child moving in or
// out) would wait for all of it. Readbacks go by the SMs' stores into mapped pinned
// memory; uploads ride in the launch's parameters.
#include <stdint.h>

#include "gpuhash/core_layouts.h"

extern "C" __global__ void gh_copy_words(GhCopyWordsParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.words; i += stride) {
        p.to[i] = p.from[i];
    }
}

extern "C" __global__ void gh_inline_words(GhInlineWordsParams p) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.words; i += gridDim.x * blockDim.x) {
        p.to[i] = p.data[i];
    }
}
