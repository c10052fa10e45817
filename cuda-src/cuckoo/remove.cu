// DyHash kernels that remove keys.
#include "cuckoo/remove.cuh"

extern "C" __global__ void gh_cuckoo_remove_u32(GhCuckooRemoveParams p) { gh_cuckoo::remove<uint32_t>(p); }
extern "C" __global__ void gh_cuckoo_remove_u64(GhCuckooRemoveParams p) { gh_cuckoo::remove<uint64_t>(p); }
