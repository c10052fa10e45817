// DyHash kernels that read the table and change nothing: batch lookups and the
// export of every pair, for each bucket layout (insert.cu names the suffixes).
#include "cuckoo/export.cuh"
#include "cuckoo/locate.cuh"

using gh_cuckoo::Packed32;
using gh_cuckoo::Split;

extern "C" __global__ void gh_cuckoo_find_u32(GhCuckooFindParams p) { gh_cuckoo::find<Split<uint32_t>>(p); }
extern "C" __global__ void gh_cuckoo_find_u64(GhCuckooFindParams p) { gh_cuckoo::find<Split<uint64_t>>(p); }
extern "C" __global__ void gh_cuckoo_find_p32(GhCuckooFindParams p) { gh_cuckoo::find<Packed32>(p); }

extern "C" __global__ void gh_cuckoo_find_many_u32(GhCuckooFindManyParams p) {
    gh_cuckoo::find_many<Split<uint32_t>>(p);
}
extern "C" __global__ void gh_cuckoo_find_many_u64(GhCuckooFindManyParams p) {
    gh_cuckoo::find_many<Split<uint64_t>>(p);
}
extern "C" __global__ void gh_cuckoo_find_many_p32(GhCuckooFindManyParams p) { gh_cuckoo::find_many<Packed32>(p); }

extern "C" __global__ void gh_cuckoo_find_routed_u32(GhCuckooFindRoutedParams p) {
    gh_cuckoo::find_routed<Split<uint32_t>>(p);
}
extern "C" __global__ void gh_cuckoo_find_routed_u64(GhCuckooFindRoutedParams p) {
    gh_cuckoo::find_routed<Split<uint64_t>>(p);
}
extern "C" __global__ void gh_cuckoo_find_routed_p32(GhCuckooFindRoutedParams p) {
    gh_cuckoo::find_routed<Packed32>(p);
}

extern "C" __global__ void gh_cuckoo_export_u32(GhCuckooExportParams p) {
    gh_cuckoo::export_pairs<Split<uint32_t>>(p);
}
extern "C" __global__ void gh_cuckoo_export_u64(GhCuckooExportParams p) {
    gh_cuckoo::export_pairs<Split<uint64_t>>(p);
}
extern "C" __global__ void gh_cuckoo_export_p32(GhCuckooExportParams p) { gh_cuckoo::export_pairs<Packed32>(p); }
