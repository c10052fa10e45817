// DyHash kernels of an insert batch, in the order the host runs them: new values
// for keys already present, the lock-free place pass, then the evicting pass
// for the pairs left pending (one instance for any value width, one for one-word
// values, which needs fewer registers).
#include "cuckoo/evict.cuh"
#include "cuckoo/place.cuh"
#include "cuckoo/update.cuh"

extern "C" __global__ void gh_cuckoo_update_u32(GhCuckooUpdateParams p) { gh_cuckoo::update<uint32_t>(p); }
extern "C" __global__ void gh_cuckoo_update_u64(GhCuckooUpdateParams p) { gh_cuckoo::update<uint64_t>(p); }

extern "C" __global__ void gh_cuckoo_place_u32(GhCuckooPlaceParams p) { gh_cuckoo::place<uint32_t>(p); }
extern "C" __global__ void gh_cuckoo_place_u64(GhCuckooPlaceParams p) { gh_cuckoo::place<uint64_t>(p); }

extern "C" __global__ void gh_cuckoo_insert_u32(GhCuckooInsertParams p) {
    gh_cuckoo::insert<uint32_t, GH_CUCKOO_MAX_VALUE_WORDS>(p);
}
extern "C" __global__ void gh_cuckoo_insert_u64(GhCuckooInsertParams p) {
    gh_cuckoo::insert<uint64_t, GH_CUCKOO_MAX_VALUE_WORDS>(p);
}
extern "C" __global__ void gh_cuckoo_insert1_u32(GhCuckooInsertParams p) { gh_cuckoo::insert<uint32_t, 1>(p); }
extern "C" __global__ void gh_cuckoo_insert1_u64(GhCuckooInsertParams p) { gh_cuckoo::insert<uint64_t, 1>(p); }
