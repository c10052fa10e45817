// DyHash kernels that sort an insert batch by partition before the place pass:
// count the pairs of each partition, scan the counts (one block), scatter. They
// read keys and bucket counts only, so the u32 instances serve both layouts.
#include "cuckoo/partition.cuh"

extern "C" __global__ void gh_cuckoo_partition_count_u32(GhCuckooPartitionParams p) {
    gh_cuckoo::partition_count<uint32_t>(p);
}
extern "C" __global__ void gh_cuckoo_partition_count_u64(GhCuckooPartitionParams p) {
    gh_cuckoo::partition_count<uint64_t>(p);
}

extern "C" __global__ void __launch_bounds__(GH_CUCKOO_SORT_THREADS) gh_cuckoo_partition_scan(GhCuckooPartitionParams p) {
    gh_cuckoo::partition_scan(p);
}

extern "C" __global__ void gh_cuckoo_partition_scatter_u32(GhCuckooPartitionParams p) {
    gh_cuckoo::partition_scatter<uint32_t>(p);
}
extern "C" __global__ void gh_cuckoo_partition_scatter_u64(GhCuckooPartitionParams p) {
    gh_cuckoo::partition_scatter<uint64_t>(p);
}
