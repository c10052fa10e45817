// DyHash kernels that remove keys, for each bucket layout (insert.cu names the
// suffixes).
#include "cuckoo/remove.cuh"

using gh_cuckoo::Packed32;
using gh_cuckoo::Split;

extern "C" __global__ void gh_cuckoo_remove_u32(GhCuckooRemoveParams p) { gh_cuckoo::remove<Split<uint32_t>>(p); }
extern "C" __global__ void gh_cuckoo_remove_u64(GhCuckooRemoveParams p) { gh_cuckoo::remove<Split<uint64_t>>(p); }
extern "C" __global__ void gh_cuckoo_remove_p32(GhCuckooRemoveParams p) { gh_cuckoo::remove<Packed32>(p); }
