// DyHash kernels that read the table and change nothing: batch lookups and the
// export of every pair.
#include "cuckoo/export.cuh"
#include "cuckoo/locate.cuh"

extern "C" __global__ void gh_cuckoo_find_u32(GhCuckooFindParams p) { gh_cuckoo::find<uint32_t>(p); }
extern "C" __global__ void gh_cuckoo_find_u64(GhCuckooFindParams p) { gh_cuckoo::find<uint64_t>(p); }

extern "C" __global__ void gh_cuckoo_export_u32(GhCuckooExportParams p) { gh_cuckoo::export_pairs<uint32_t>(p); }
extern "C" __global__ void gh_cuckoo_export_u64(GhCuckooExportParams p) { gh_cuckoo::export_pairs<uint64_t>(p); }
