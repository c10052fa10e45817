// Sorting a DyHash insert batch by partition (a range of buckets of a key's
// first subtable), so that the place pass works on few partitions at a time: the
// shared counting sort (gpuhash/partition.cuh) with DyHash's partitions.
#pragma once

#include "cuckoo/probe.cuh"
#include "gpuhash/partition.cuh"

namespace gh_cuckoo {

constexpr uint32_t kParts = GH_CUCKOO_PARTITIONS;
constexpr uint32_t kPartsPerSub = GH_CUCKOO_PARTS_PER_SUBTABLE;
constexpr uint32_t kPartBits = GH_CUCKOO_PART_BITS;
constexpr uint32_t kSortPerThread = GH_CUCKOO_SORT_PER_THREAD;
constexpr uint32_t kSortThreads = GH_CUCKOO_SORT_THREADS;

// The partition of a pair's first bucket; the reserved key's (which goes to the
// side slot) is 0. Within a subtable, the top bits of the fraction that fastmod
// scales by the bucket count: they grow with the bucket, so a partition is a
// range of buckets, found without a division.
template <typename K>
__device__ __forceinline__ uint32_t partition_of(const GhCuckooPartitionParams &p, const GhCuckooSubtable *subs,
                                                 K key) {
    if (key == Keys<K>::kEmpty) return 0;
    const uint32_t first = start_of(p.home, p.table.subtables, key).first;
    const GhCuckooSubtable &s = subs[first];
    const uint64_t fraction = s.fastmod * (uint64_t)Keys<K>::hash(key, s.hash_a, s.hash_b);
    return first * kPartsPerSub + (uint32_t)(fraction >> (64 - kPartBits));
}

// The partition of a key as the shared sort asks for it.
template <typename K>
struct PartitionOf {
    const GhCuckooPartitionParams &p;
    const GhCuckooSubtable *subs;
    __device__ uint32_t operator()(K key) const { return partition_of(p, subs, key); }
};

__device__ inline gh_part::Batch sort_batch(const GhCuckooPartitionParams &p) {
    return {p.keys, p.values, p.table.value_words, p.keys_out, p.values_out, p.offsets, p.count};
}

template <typename K>
__device__ void partition_count(const GhCuckooPartitionParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    gh_part::count<K, kParts>(sort_batch(p), PartitionOf<K>{p, subs});
}

// offsets[t] = the pairs of the partitions before t; one block of kSortThreads.
__device__ inline void partition_scan(const GhCuckooPartitionParams &p) { gh_part::scan<kParts>(p.offsets); }

template <typename K>
__device__ void partition_scatter(const GhCuckooPartitionParams &p) {
    static_assert(kSortThreads == kParts / 2, "the shared sort's blocks");
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    gh_part::scatter<K, kParts, kSortPerThread>(sort_batch(p), PartitionOf<K>{p, subs});
}

}  // namespace gh_cuckoo
