// DyHash kernels of an insert batch, in the order the host runs them: new values
// for keys already present, the lock-free place pass, then the evicting pass
// for the pairs left pending (one instance for any value width, one for one-word
// values, which needs fewer registers). Suffixes name the bucket layout: u32 and
// u64 split buckets (keys and values apart), p32 packed u32 pairs (4-byte values
// only, so it has the one-word instance alone).
#include "cuckoo/evict.cuh"
#include "cuckoo/place.cuh"
#include "cuckoo/update.cuh"

using gh_cuckoo::Packed32;
using gh_cuckoo::Split;

extern "C" __global__ void gh_cuckoo_update_u32(GhCuckooUpdateParams p) { gh_cuckoo::update<Split<uint32_t>>(p); }
extern "C" __global__ void gh_cuckoo_update_u64(GhCuckooUpdateParams p) { gh_cuckoo::update<Split<uint64_t>>(p); }
extern "C" __global__ void gh_cuckoo_update_p32(GhCuckooUpdateParams p) { gh_cuckoo::update<Packed32>(p); }

extern "C" __global__ void gh_cuckoo_place_u32(GhCuckooPlaceParams p) { gh_cuckoo::place<Split<uint32_t>>(p); }
extern "C" __global__ void gh_cuckoo_place_u64(GhCuckooPlaceParams p) { gh_cuckoo::place<Split<uint64_t>>(p); }
extern "C" __global__ void gh_cuckoo_place_p32(GhCuckooPlaceParams p) { gh_cuckoo::place<Packed32>(p); }

extern "C" __global__ void gh_cuckoo_insert_u32(GhCuckooInsertParams p) {
    gh_cuckoo::insert<Split<uint32_t>, GH_CUCKOO_MAX_VALUE_WORDS>(p);
}
extern "C" __global__ void gh_cuckoo_insert_u64(GhCuckooInsertParams p) {
    gh_cuckoo::insert<Split<uint64_t>, GH_CUCKOO_MAX_VALUE_WORDS>(p);
}
extern "C" __global__ void gh_cuckoo_insert1_u32(GhCuckooInsertParams p) { gh_cuckoo::insert<Split<uint32_t>, 1>(p); }
extern "C" __global__ void gh_cuckoo_insert1_u64(GhCuckooInsertParams p) { gh_cuckoo::insert<Split<uint64_t>, 1>(p); }
extern "C" __global__ void gh_cuckoo_insert1_p32(GhCuckooInsertParams p) { gh_cuckoo::insert<Packed32, 1>(p); }
