// DyHash kernels that lay out a subtable's memory: rebuilding it at a new size,
// and filling its key array with one word (the empty key: a new or cleared one;
// all ones is the empty slot word of every layout).
#include "cuckoo/resize.cuh"

extern "C" __global__ void gh_cuckoo_resize_u32(GhCuckooResizeParams p) {
    gh_cuckoo::resize<gh_cuckoo::Split<uint32_t>>(p);
}
extern "C" __global__ void gh_cuckoo_resize_u64(GhCuckooResizeParams p) {
    gh_cuckoo::resize<gh_cuckoo::Split<uint64_t>>(p);
}
extern "C" __global__ void gh_cuckoo_resize_p32(GhCuckooResizeParams p) { gh_cuckoo::resize<gh_cuckoo::Packed32>(p); }

extern "C" __global__ void gh_cuckoo_fill(GhCuckooFillParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.words[i] = p.value;
    }
}
