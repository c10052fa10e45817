// DyHash (seed 003): d bucketed cuckoo subtables, voter-coordinated inserts,
// resizing one subtable at a time. Every kernel comes for u32 and u64 keys;
// values are value_words 4-byte words stored apart from the keys.
#include "cuckoo/cuckoo.cuh"

namespace gh_cuckoo {
namespace {

// Per-block changes of the subtable counts, added to the table's counts once
// at the end of a kernel instead of once a pair.
struct BlockCounts {
    long long delta[kMaxSub];

    __device__ void init() {
        if (threadIdx.x < kMaxSub) delta[threadIdx.x] = 0;
    }

    __device__ void add(uint32_t subtable, long long d) {
        atomicAdd(reinterpret_cast<unsigned long long *>(&delta[subtable]), (unsigned long long)d);
    }

    __device__ void flush(uint64_t *counts, uint32_t subtables) {
        __syncthreads();
        if (threadIdx.x < subtables && delta[threadIdx.x] != 0) {
            atomicAdd(reinterpret_cast<unsigned long long *>(counts + threadIdx.x),
                      (unsigned long long)delta[threadIdx.x]);
        }
    }
};

// Adds `n` (one value per lane, summed over the warp) to *counter once a warp.
__device__ __forceinline__ void warp_add(uint64_t *counter, uint64_t n) {
    for (int offset = 16; offset > 0; offset /= 2) n += __shfl_down_sync(0xffffffffu, n, offset);
    if ((threadIdx.x & 31u) == 0 && n != 0) atomicAdd(reinterpret_cast<unsigned long long *>(counter), n);
}

template <typename K>
__device__ __forceinline__ uint64_t slot_index(uint64_t bucket, uint32_t slot) {
    return bucket * Keys<K>::kSlots + slot;
}

// -------------------------------------------------------------- update

// Where `key` sits: subtable in *sub_out, bucket in *bucket_out; false if absent.
template <typename K>
__device__ bool locate(const Tile &t, const GhCuckooSubtable *subs, uint32_t d, K key, bool coherent,
                       uint32_t *sub_out, uint64_t *bucket_out, uint32_t *slot_out) {
    for (uint32_t s = 0; s < d; ++s) {
        const uint64_t bucket = bucket_of(subs[s], key);
        K slice[Keys<K>::kPerLane];
        load_slice(subs[s], bucket, t.rank, coherent, slice);
        const uint32_t slot = first_slot<K>(t, match_bits(slice, key));
        if (slot < Keys<K>::kSlots) {
            *sub_out = s;
            *bucket_out = bucket;
            *slot_out = slot;
            return true;
        }
    }
    return false;
}

template <typename K>
__device__ void update(const GhCuckooUpdateParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const uint32_t words = p.table.value_words;
    const K *keys = static_cast<const K *>(p.keys);
    for (uint64_t i = tile_index(); i < p.count; i += tile_count()) {
        if (p.found[i] != p.select) continue;
        const K key = keys[i];
        const uint32_t *value = p.values + i * words;
        uint32_t *old = p.old_values == nullptr ? nullptr : p.old_values + i * words;
        if (key == Keys<K>::kEmpty) {
            if (t.rank == 0) {
                uint32_t v[kMaxWords];
#pragma unroll
                for (uint32_t w = 0; w < kMaxWords; ++w) v[w] = w < words ? value[w] : 0u;
                side_write(p.table.side, v, words, old);
            }
            continue;
        }
        uint32_t s, slot;
        uint64_t bucket;
        if (!locate(t, subs, p.table.subtables, key, false, &s, &bucket, &slot)) continue;
        // Keys do not move in this kernel, so a bucket's lock is held by a copy of one
        // of its keys, and the lock word names the slot (+ 1) that copy writes. The lock
        // makes one whole value win; any copy's may, so a copy that finds its own slot
        // being written leaves it to that copy. Copies of a hot key would otherwise
        // queue for the lock one at a time, each turn slowed by all the others' atomics.
        uint32_t *lock = subs[s].locks + bucket;
        uint32_t holder = 0;
        do {
            if (t.rank == 0) holder = lock_as(lock, slot + 1);
            holder = t.shfl(holder, 0);
        } while (holder != 0 && holder != slot + 1);
        if (holder != 0) continue;
        uint32_t *dst = subs[s].values + slot_index<K>(bucket, slot) * words;
        for (uint32_t w = t.rank; w < words; w += kTile) {
            if (old != nullptr) old[w] = __ldcg(dst + w);
            dst[w] = value[w];
        }
        // Every lane's writes reach the device before the lock opens.
        __threadfence();
        __syncwarp(t.mask);
        if (t.rank == 0) unlock(lock);
    }
}

// -------------------------------------------------------------- insert

// Where a key starts, and whether a lookup of it may stop at a clean bucket with
// an empty slot (its choice is settled: GhCuckooHome).
struct Start {
    uint32_t first;
    bool settled;
};

template <typename K>
__device__ __forceinline__ Start start_of(const GhCuckooHome &home, uint32_t d, K key) {
    const uint32_t r = Keys<K>::choice(key, home.seed);
    uint32_t s = 0;
    while (s + 1 < d && r >= home.thresholds[s]) ++s;
    return {s, r >= home.settled_lo[s] && r <= home.settled_hi[s]};
}

// The j-th subtable of the probe order of a key that starts in `first`: from
// there round by index, so that an evicted pair moves on to the next subtable
// whatever its start (one direction for all; with the start's position kept but
// the others by index, a 2^26-pair build of u64 keys at load 0.95 ran out of
// evictions on an H100). Inserts, evictions and lookups all follow this order.
__device__ __forceinline__ uint32_t probe_subtable(uint32_t first, uint32_t j, uint32_t d) {
    return first + j < d ? first + j : first + j - d;
}

// Where subtable s comes in that order.
__device__ __forceinline__ uint32_t probe_position(uint32_t first, uint32_t s, uint32_t d) {
    return s >= first ? s - first : s + d - first;
}

// `pos`, or the position after it when that is the excluded subtable: the key
// passes its bucket there, full or not, so that bucket turns dirty.
template <typename K>
__device__ __forceinline__ uint32_t skip_excluded(const GhCuckooSubtable *subs, uint32_t d, uint32_t exclude,
                                                  uint32_t first, uint32_t pos, K key) {
    const uint32_t s = probe_subtable(first, pos, d);
    if (s != exclude) return pos;
    mark_dirty(subs[s], bucket_of(subs[s], key));
    return pos + 1 == d ? 0 : pos + 1;
}

// ---------------------------------------------------------------- find

// Copies a stored value out: `words` words from lane `from` on, `step` apart
// (a lane alone: 0 and 1; a tile: its rank and kTile).
__device__ __forceinline__ void copy_value(uint32_t *dst, const uint32_t *src, uint32_t words, uint32_t from,
                                           uint32_t step) {
    for (uint32_t w = from; w < words; w += step) dst[w] = src[w];
}

// The tile's search for a key that the home half of its first bucket (`bucket`
// in subtable `first`, home slot `start`) does not hold: first the other half of
// that bucket together with the whole second bucket (at the loads where a key is
// not in its home half, a miss mostly needs both, so one round trip serves
// them), then the other buckets in probe order, up to a clean bucket with an
// empty slot when the key is settled. Copies the value to `out` (when not null)
// if found.
template <typename K>
__device__ bool find_rest(const Tile &t, const GhCuckooSubtable *subs, uint32_t d, uint32_t first, uint64_t bucket,
                          uint32_t start, bool settled, K key, uint32_t *out, uint32_t words) {
    constexpr uint32_t HS = Keys<K>::kHalfSlots;
    const uint32_t other = 1 - start / HS;
    const GhCuckooSubtable *where = &subs[first];
    K half[Keys<K>::kPerLaneInHalf];
    K line[Keys<K>::kPerLane];
    load_half(*where, bucket, other, t.rank, false, half);
    const GhCuckooSubtable &second = subs[probe_subtable(first, 1, d)];  // d is at least 2
    const uint64_t second_bucket = bucket_of(second, key);
    load_slice(second, second_bucket, t.rank, false, line);
    uint32_t bits = bucket_bits(t, match_bits(half, key), Keys<K>::kPerLaneInHalf, other * HS);
    uint32_t empty = bucket_bits(t, match_bits(half, Keys<K>::kEmpty), Keys<K>::kPerLaneInHalf, other * HS);
    for (uint32_t j = 1; j < d; ++j) {
        // The dirty bit is read only when needed: reading it along with the keys made
        // misses at loads 0.8 to 0.95 4 to 5% faster on an H100 but hits 2% slower.
        if (bits != 0 || (settled && empty != 0 && !is_dirty(*where, bucket, false))) break;
        where = &subs[probe_subtable(first, j, d)];
        bucket = j == 1 ? second_bucket : bucket_of(*where, key);
        if (j > 1) load_slice(*where, bucket, t.rank, false, line);
        bits = bucket_bits(t, match_bits(line, key), Keys<K>::kPerLane, 0);
        empty = bucket_bits(t, match_bits(line, Keys<K>::kEmpty), Keys<K>::kPerLane, 0);
    }
    if (bits != 0 && out != nullptr) {
        copy_value(out, where->values + slot_index<K>(bucket, __ffs(bits) - 1) * words, words, t.rank, kTile);
    }
    return bits != 0;
}

template <typename K>
__device__ void find(const GhCuckooFindParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const uint32_t words = p.table.value_words;
    const uint32_t d = p.table.subtables;
    const K *keys = static_cast<const K *>(p.keys);
    uint64_t hits = 0;
    const uint64_t chunks = (p.count + kTile - 1) / kTile;
    for (uint64_t c = tile_index(); c < chunks; c += tile_count()) {
        // Each lane first looks for its own key alone in the home half of the bucket
        // in the subtable the key would start in now, where most pairs rest. (L2
        // prefetches cost finds on an H100: of that bucket up front, 3 to 5%, as lines
        // fetched early are evicted before their turn comes; of what the tile reads
        // next, once the lane missed, a quarter of the misses' speed.)
        const uint64_t mine = c * kTile + t.rank;
        const K my_key = mine < p.count ? keys[mine] : Keys<K>::kEmpty;
        uint32_t my_found = 0;
        bool tile_next = false;
        Start from = {0, false};
        uint32_t start = 0;
        uint64_t bucket = 0;
        if (mine < p.count && my_key != Keys<K>::kEmpty) {
            from = start_of(p.home, d, my_key);
            const GhCuckooSubtable &sub = subs[from.first];
            bucket = bucket_of(sub, my_key);
            start = home_slot(my_key, p.home.seed);
            const Seen seen = look_alone(sub, bucket, start, Part::kHomeHalf, false, my_key);
            if (seen.key != 0) {
                my_found = 1;
                if (p.values_out != nullptr) {
                    copy_value(p.values_out + mine * words,
                               sub.values + slot_index<K>(bucket, __ffs(seen.key) - 1) * words, words, 0, 1);
                }
            } else {
                // An empty slot in a clean home half: the key never went past it.
                tile_next = !(from.settled && seen.empty != 0 && !is_dirty(sub, bucket, false));
            }
        } else {
            tile_next = mine < p.count;
        }
        // The rest, the tile together: the other buckets, or the side slot.
        uint32_t turns = t.ballot(tile_next);
        while (turns != 0) {
            const uint32_t q = __ffs(turns) - 1;
            turns &= turns - 1;
            const uint64_t i = c * kTile + q;
            const K key = t.shfl(my_key, q);
            uint32_t *out = p.values_out == nullptr ? nullptr : p.values_out + i * words;
            bool found = false;
            if (key == Keys<K>::kEmpty) {
                found = __ldcg(p.table.side + GH_CUCKOO_SIDE_PRESENT) != 0;
                if (found && out != nullptr) copy_value(out, p.table.side + GH_CUCKOO_SIDE_VALUE, words, t.rank, kTile);
            } else {
                found = find_rest(t, subs, d, t.shfl(from.first, q), t.shfl(bucket, q), t.shfl(start, q),
                                  t.shfl((uint32_t)from.settled, q) != 0, key, out, words);
            }
            if (t.rank == q) my_found = found ? 1 : 0;
        }
        if (mine < p.count) {
            if (p.found_out != nullptr) p.found_out[mine] = (uint8_t)my_found;
            hits += my_found;
        }
    }
    if (p.hits != nullptr) warp_add(p.hits, hits);
}

// MaxW: most value words a lane carries; 1 for the common 4-byte values, which
// saves registers and raises occupancy.
template <typename K, uint32_t MaxW>
__device__ void insert(const GhCuckooInsertParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ BlockCounts counts;
    counts.init();
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const uint32_t words = p.table.value_words;
    const uint32_t d = p.table.subtables;
    constexpr uint32_t S = Keys<K>::kSlots;
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t chunks = (p.count + kTile - 1) / kTile;

    for (uint64_t c = tile_index(); c < chunks; c += tile_count()) {
        // Each lane of the tile owns one pair of the chunk.
        const uint64_t i = c * kTile + t.rank;
        bool active = i < p.count && (p.skip == nullptr || p.skip[i] == 0);
        K key = Keys<K>::kEmpty;
        uint32_t value[MaxW];
        // The carried key's first subtable, and where in its probe order it is.
        uint32_t first = 0, pos = 0;
        uint32_t evictions = 0;
#pragma unroll
        for (uint32_t w = 0; w < MaxW; ++w) value[w] = (active && w < words) ? p.values[i * words + w] : 0u;
        if (active) {
            key = keys[i];
            if (key == Keys<K>::kEmpty) {
                side_write(p.table.side, value, words, nullptr);
                active = false;
            } else {
                first = start_of(p.home, d, key).first;
                pos = skip_excluded(subs, d, p.exclude, first, 0, key);
            }
        }

        // Voter coordination: lanes whose lock failed sit out the next votes
        // until every pending lane has failed once.
        uint32_t failed = 0;
        while (true) {
            const uint32_t pending = t.ballot(active);
            if (pending == 0) break;
            uint32_t voters = pending & ~failed;
            if (voters == 0) {
                failed = 0;
                voters = pending;
            }
            const uint32_t leader = __ffs(voters) - 1;
            const bool lead = t.rank == leader;
            const K lkey = t.shfl(key, leader);
            const uint32_t lsub = t.shfl(probe_subtable(first, pos, d), leader);
            const GhCuckooSubtable &st = subs[lsub];
            const uint64_t bucket = bucket_of(st, lkey);
            uint32_t *lock = st.locks + bucket;
            bool locked = false;
            if (lead) locked = try_lock(lock);
            locked = t.shfl(locked, leader);
            if (!locked) {
                failed |= 1u << leader;
                continue;
            }
            K slice[Keys<K>::kPerLane];
            load_slice(st, bucket, t.rank, true, slice);
            uint32_t slot = first_slot<K>(t, match_bits(slice, lkey));
            const bool replace = slot < S;
            bool place = false;
            if (!replace) {
                const uint32_t empty = bucket_bits(t, match_bits(slice, Keys<K>::kEmpty), Keys<K>::kPerLane, 0);
                slot = first_in_order<K>(empty, home_slot(lkey, p.home.seed));
                place = slot < S;
            }
            if (!replace && !place) {
                // Full: swap with a random resident, which moves on in its probe order.
                const uint32_t lev = t.shfl(evictions, leader);
                slot = gh_fmix32((uint32_t)lkey ^ (uint32_t)(lkey >> 16) ^ (lev * 0x9e3779b9u) ^ p.salt) % S;
            }
            const K resident = t.shfl(pick(slice, slot % Keys<K>::kPerLane), slot / Keys<K>::kPerLane);
            if (lead) {
                K *kslot = static_cast<K *>(st.keys) + slot_index<K>(bucket, slot);
                uint32_t *vslot = st.values + slot_index<K>(bucket, slot) * words;
                if (replace || place) {
#pragma unroll
                    for (uint32_t w = 0; w < MaxW; ++w) {
                        if (w < words) vslot[w] = value[w];
                    }
                    if (place) {
                        *kslot = key;
                        counts.add(lsub, 1);
                    }
                    active = false;
                } else {
#pragma unroll
                    for (uint32_t w = 0; w < MaxW; ++w) {
                        if (w < words) {
                            const uint32_t old = __ldcg(vslot + w);
                            vslot[w] = value[w];
                            value[w] = old;
                        }
                    }
                    *kslot = key;
                    key = resident;
                    first = start_of(p.home, d, key).first;
                    const uint32_t next = probe_position(first, lsub, d) + 1;
                    pos = skip_excluded(subs, d, p.exclude, first, next == d ? 0 : next, key);
                    ++evictions;
                    const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.log_count), 1ull);
                    if (at < p.log_capacity) static_cast<K *>(p.log_keys)[at] = resident;
                }
                // The release store orders the leader's writes before the lock opens.
                unlock(lock);
                if (active && evictions > p.max_evictions) {
                    // Homeless after the eviction bound: keep the pair for the host.
                    const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.failed_count), 1ull);
                    static_cast<K *>(p.failed_keys)[at] = key;
#pragma unroll
                    for (uint32_t w = 0; w < MaxW; ++w) {
                        if (w < words) p.failed_values[at * words + w] = value[w];
                    }
                    active = false;
                }
            }
            failed = 0;
        }
    }
    counts.flush(p.table.counts, d);
}

// --------------------------------------------------------------- place

constexpr uint32_t kPlacePerThread = GH_CUCKOO_PLACE_PER_THREAD;

// The value of a pair whose key slot was just claimed: `head` (its first word,
// read before the claim so that the store need not wait for it), then the rest.
template <typename K>
__device__ __forceinline__ void store_value(const GhCuckooSubtable &sub, uint64_t bucket, uint32_t slot,
                                            uint32_t head, const uint32_t *value, uint32_t words) {
    uint32_t *dst = sub.values + slot_index<K>(bucket, slot) * words;
    dst[0] = head;
    copy_value(dst, value, words, 1, 1);
}

// A lane places its own pair: an empty slot of the first of its d buckets, in
// probe order, that has one (GH_CUCKOO_DONE), unless an equal key is there
// already or takes the slot first (GH_CUCKOO_DUPLICATE); GH_CUCKOO_PENDING when
// all are full. Slots are tried in the key's order (first_in_order), so two
// equal keys aim at the same slot and the second sees the first or loses the
// CAS to it. The first bucket is read by halves, home half first (at low loads
// it takes the pair); later buckets come at high loads, where the whole line is
// usually needed. Losing the CAS to another key means the bucket gained a pair:
// read again.
template <typename K>
__device__ uint8_t place_pair(const GhCuckooSubtable *subs, uint32_t d, uint32_t first, uint32_t start, K key,
                              const uint32_t *value, uint32_t words, BlockCounts &counts) {
    const uint32_t head = __ldg(value);
    for (uint32_t j = 0; j < d; ++j) {
        const uint32_t s = probe_subtable(first, j, d);
        const GhCuckooSubtable &sub = subs[s];
        const uint64_t bucket = bucket_of(sub, key);
        Part part = j == 0 ? Part::kHomeHalf : Part::kLine;
        while (true) {
            const Seen seen = look_alone(sub, bucket, start, part, true, key);
            if (seen.key != 0) return GH_CUCKOO_DUPLICATE;
            if (seen.empty == 0) {
                if (part != Part::kHomeHalf) break;
                part = Part::kOtherHalf;
                continue;
            }
            const uint32_t slot = first_in_order<K>(seen.empty, start);
            const K held =
                Keys<K>::cas(static_cast<K *>(sub.keys) + slot_index<K>(bucket, slot), Keys<K>::kEmpty, key);
            if (held == key) return GH_CUCKOO_DUPLICATE;
            if (held == Keys<K>::kEmpty) {
                store_value<K>(sub, bucket, slot, head, value, words);
                counts.add(s, 1);
                return GH_CUCKOO_DONE;
            }
        }
    }
    return GH_CUCKOO_PENDING;
}

// One pair of the place pass: status[i] says what became of it.
template <typename K>
__device__ __forceinline__ void place_one(const GhCuckooPlaceParams &p, const GhCuckooSubtable *subs, uint64_t i,
                                          uint64_t &duplicates, BlockCounts &counts) {
    const uint32_t words = p.table.value_words;
    const uint32_t d = p.table.subtables;
    if (p.skip != nullptr && p.skip[i] != 0) {
        p.status[i] = GH_CUCKOO_DONE;
        return;
    }
    const K key = static_cast<const K *>(p.keys)[i];
    // The reserved key goes to the side slot, which the insert kernel writes.
    uint8_t status = GH_CUCKOO_PENDING;
    if (key != Keys<K>::kEmpty) {
        status = place_pair(subs, d, start_of(p.home, d, key).first, home_slot(key, p.home.seed), key,
                            p.values + i * words, words, counts);
    }
    p.status[i] = status;
    duplicates += status == GH_CUCKOO_DUPLICATE ? 1 : 0;
    if (status == GH_CUCKOO_PENDING) {
        // Few pairs are left (most at high loads): one atomic each is cheap.
        const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.pending), 1ull);
        static_cast<K *>(p.pending_keys)[at] = key;
        for (uint32_t w = 0; w < words; ++w) p.pending_values[at * words + w] = p.values[i * words + w];
    }
}

// Blocks take chunks of the batch in order from a shared cursor, so the pairs in
// flight at any time are one stretch of the batch: sorted by partition, that is a
// few partitions, whose lines stay in L2 while their pairs go in.
template <typename K>
__device__ void place(const GhCuckooPlaceParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ BlockCounts counts;
    __shared__ unsigned long long chunk;
    counts.init();
    stage_subtables(p.table, subs);
    uint64_t duplicates = 0;
    const uint64_t chunk_pairs = (uint64_t)blockDim.x * kPlacePerThread;
    while (true) {
        if (threadIdx.x == 0) chunk = atomicAdd(reinterpret_cast<unsigned long long *>(p.cursor), chunk_pairs);
        __syncthreads();
        const uint64_t first = chunk;
        __syncthreads();
        if (first >= p.count) break;
#pragma unroll 1
        for (uint32_t j = 0; j < kPlacePerThread; ++j) {
            const uint64_t i = first + (uint64_t)j * blockDim.x + threadIdx.x;
            if (i < p.count) place_one<K>(p, subs, i, duplicates, counts);
        }
    }
    warp_add(p.duplicates, duplicates);
    counts.flush(p.table.counts, p.table.subtables);
}

// ----------------------------------------------------------- partition

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

// Exclusive prefix sums of data[0 .. 2 * blockDim.x), in place, by the whole
// block (a work-efficient up-sweep and down-sweep).
template <typename T>
__device__ void exclusive_scan(T *data) {
    const uint32_t n = 2 * blockDim.x, t = threadIdx.x;
    for (uint32_t step = 1; step < n; step *= 2) {
        __syncthreads();
        const uint32_t right = (2 * t + 2) * step - 1;
        if (right < n) data[right] += data[right - step];
    }
    __syncthreads();
    if (t == 0) data[n - 1] = 0;
    for (uint32_t step = n / 2; step >= 1; step /= 2) {
        __syncthreads();
        const uint32_t right = (2 * t + 2) * step - 1;
        if (right < n) {
            const T left = data[right - step];
            data[right - step] = data[right];
            data[right] += left;
        }
    }
    __syncthreads();
}

template <typename K>
__device__ void partition_count(const GhCuckooPartitionParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ uint32_t pairs[kParts];
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) pairs[t] = 0;
    stage_subtables(p.table, subs);
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    // Keys a thread loads before it hashes any, so that their loads overlap.
    constexpr uint32_t kBatch = 4;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += kBatch * stride) {
        K key[kBatch];
#pragma unroll
        for (uint32_t j = 0; j < kBatch; ++j) key[j] = i + j * stride < p.count ? keys[i + j * stride] : Keys<K>::kEmpty;
#pragma unroll
        for (uint32_t j = 0; j < kBatch; ++j) {
            if (i + j * stride < p.count) atomicAdd(&pairs[partition_of(p, subs, key[j])], 1u);
        }
    }
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) {
        if (pairs[t] != 0) atomicAdd(reinterpret_cast<unsigned long long *>(p.offsets + t), pairs[t]);
    }
}

// offsets[t] = the pairs of the partitions before t; one block of kSortThreads.
__device__ void partition_scan(const GhCuckooPartitionParams &p) {
    __shared__ unsigned long long sums[kParts];
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) sums[t] = p.offsets[t];
    exclusive_scan(sums);
    for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) p.offsets[t] = sums[t];
}

// Blocks of kSortThreads sort chunks of kSortThreads * kSortPerThread pairs: the
// chunk's pairs are counted a partition in shared memory and laid out there in
// partition order (keys and first value words; further words are read from the
// batch when written); each partition's run then takes a range of the output
// with one atomic, and consecutive threads write consecutive places of it.
template <typename K>
__device__ void partition_scatter(const GhCuckooPartitionParams &p) {
    constexpr uint32_t kChunk = kSortThreads * kSortPerThread;
    static_assert(kChunk <= 0x10000, "a pair's place in its chunk takes 16 bits");
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ uint32_t pairs[kParts];  // a partition's pairs in the chunk, then their first place
    __shared__ unsigned long long base[kParts];
    // In partition order: partition << 16 | place in the chunk, key, first value word.
    __shared__ uint32_t sorted[kChunk];
    __shared__ K sorted_keys[kChunk];
    __shared__ uint32_t sorted_heads[kChunk];
    stage_subtables(p.table, subs);
    const uint32_t words = p.table.value_words;
    const K *keys = static_cast<const K *>(p.keys);
    const uint64_t chunks = (p.count + kChunk - 1) / kChunk;
    for (uint64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        const uint64_t start = c * kChunk;
        const uint32_t size = (uint32_t)min((uint64_t)kChunk, p.count - start);
        for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) pairs[t] = 0;
        __syncthreads();
        K key[kSortPerThread];
        uint32_t head[kSortPerThread], part[kSortPerThread], rank[kSortPerThread];
#pragma unroll
        for (uint32_t j = 0; j < kSortPerThread; ++j) {
            const uint32_t q = j * blockDim.x + threadIdx.x;
            if (q < size) {
                key[j] = keys[start + q];
                head[j] = p.values[(start + q) * words];
                part[j] = partition_of(p, subs, key[j]);
                rank[j] = atomicAdd(&pairs[part[j]], 1u);
            }
        }
        __syncthreads();
        for (uint32_t t = threadIdx.x; t < kParts; t += blockDim.x) {
            base[t] = pairs[t] == 0 ? 0 : atomicAdd(reinterpret_cast<unsigned long long *>(p.offsets + t), pairs[t]);
        }
        exclusive_scan(pairs);
#pragma unroll
        for (uint32_t j = 0; j < kSortPerThread; ++j) {
            const uint32_t q = j * blockDim.x + threadIdx.x;
            if (q < size) {
                const uint32_t r = pairs[part[j]] + rank[j];
                sorted[r] = part[j] << 16 | q;
                sorted_keys[r] = key[j];
                sorted_heads[r] = head[j];
            }
        }
        __syncthreads();
        for (uint32_t r = threadIdx.x; r < size; r += blockDim.x) {
            const uint32_t t = sorted[r] >> 16;
            const uint64_t at = base[t] + (r - pairs[t]);
            static_cast<K *>(p.keys_out)[at] = sorted_keys[r];
            p.values_out[at * words] = sorted_heads[r];
            copy_value(p.values_out + at * words, p.values + (start + (sorted[r] & 0xffffu)) * words, words, 1, 1);
        }
        __syncthreads();
    }
}

// -------------------------------------------------------------- remove

// Empties the copies of `key` that `copies` names (GH_CUCKOO_REMOVE_*). Returns
// slots emptied (on rank 0).
template <typename K>
__device__ uint32_t remove_copies(const Tile &t, const GhCuckooSubtable *subs, uint32_t d, K key, uint32_t copies,
                                  BlockCounts &counts) {
    bool seen = false;
    uint32_t removed = 0;
    for (uint32_t s = 0; s < d; ++s) {
        const uint64_t bucket = bucket_of(subs[s], key);
        K slice[Keys<K>::kPerLane];
        load_slice(subs[s], bucket, t.rank, true, slice);
        const uint32_t slot = first_slot<K>(t, match_bits(slice, key));
        if (slot == Keys<K>::kSlots) continue;
        const bool keep = copies == GH_CUCKOO_REMOVE_DUPLICATES && !seen;
        if (!keep && t.rank == 0) {
            K *kslot = static_cast<K *>(subs[s].keys) + slot_index<K>(bucket, slot);
            if (Keys<K>::cas(kslot, key, Keys<K>::kEmpty) == key) {
                // Keys may have gone past this bucket while it was full.
                mark_dirty(subs[s], bucket);
                counts.add(s, -1);
                ++removed;
            }
        }
        seen = true;
        if (copies == GH_CUCKOO_REMOVE_FIRST) break;
    }
    return removed;
}

template <typename K>
__device__ void remove(const GhCuckooRemoveParams &p) {
    __shared__ GhCuckooSubtable subs[kMaxSub];
    __shared__ BlockCounts counts;
    counts.init();
    stage_subtables(p.table, subs);
    const Tile t = Tile::mine();
    const K *keys = static_cast<const K *>(p.keys);
    for (uint64_t i = tile_index(); i < p.count; i += tile_count()) {
        uint32_t removed = 0;  // on rank 0
        const K key = keys[i];
        if (p.skip != nullptr && p.skip[i] != 0) {
            // Not this launch's to remove.
        } else if (key == Keys<K>::kEmpty) {
            // The side slot holds one copy at most.
            if (p.copies != GH_CUCKOO_REMOVE_DUPLICATES && t.rank == 0 &&
                atomicExch(p.table.side + GH_CUCKOO_SIDE_PRESENT, 0u) != 0) {
                removed = 1;
            }
        } else {
            removed = remove_copies(t, subs, p.table.subtables, key, p.copies, counts);
        }
        if (p.removed_out != nullptr && t.rank == 0) p.removed_out[i] = removed != 0 ? 1 : 0;
    }
    counts.flush(p.table.counts, p.table.subtables);
}

// -------------------------------------------------------------- resize

// Moves one pair of old bucket `old_bucket` to slot `slot` of new bucket
// `new_bucket`, or to the residual list when `slot` is kSlots (no room).
template <typename K>
__device__ __forceinline__ void move_pair(const GhCuckooResizeParams &p, uint64_t old_bucket, uint32_t old_slot,
                                          K key, uint64_t new_bucket, uint32_t slot) {
    const uint32_t words = p.value_words;
    const uint32_t *src = p.from.values + slot_index<K>(old_bucket, old_slot) * words;
    if (slot < Keys<K>::kSlots) {
        static_cast<K *>(p.to.keys)[slot_index<K>(new_bucket, slot)] = key;
        uint32_t *dst = p.to.values + slot_index<K>(new_bucket, slot) * words;
        for (uint32_t w = 0; w < words; ++w) dst[w] = src[w];
    } else {
        const uint64_t at = atomicAdd(reinterpret_cast<unsigned long long *>(p.residual_count), 1ull);
        static_cast<K *>(p.residual_keys)[at] = key;
        for (uint32_t w = 0; w < words; ++w) p.residual_values[at * words + w] = src[w];
    }
}

// A tile builds one new bucket (downsizing: from two old ones) or two (upsizing:
// from one) in two rounds over the old keys, so that keys rest in their home
// half wherever inserts would have put them there: first each key goes to its
// home half while that has room, then the keys that found it full go to the
// other half, and what finds no room there either is a residual. Halves are
// numbered target * 2 + half, target 1 being loc + from.buckets when upsizing.
template <typename K>
__device__ void resize(const GhCuckooResizeParams &p) {
    const Tile t = Tile::mine();
    constexpr uint32_t P = Keys<K>::kPerLane;
    constexpr uint32_t HS = Keys<K>::kHalfSlots;
    static_assert(2 * P <= 32, "a lane's overflow bits of two old buckets fit one word");
    const bool up = p.to.buckets > p.from.buckets;
    const uint32_t sources = up ? 1 : 2;
    const uint64_t units = up ? p.from.buckets : p.to.buckets;
    for (uint64_t u = tile_index(); u < units; u += tile_count()) {
        uint32_t used[4] = {0, 0, 0, 0};  // pairs a half was given, room or not
        uint32_t overflow = 0;            // bit src * P + j: the lane's key j went to the other half
        bool passed = false;              // an old bucket keys may have gone past: full or dirty
        for (uint32_t round = 0; round < 2; ++round) {
            if (round == 1) {
                // Most buckets have no key whose home half was full.
                if (t.ballot(overflow != 0) == 0) break;
                // The second round fills what the first left of each half.
#pragma unroll
                for (uint32_t h = 0; h < 4; ++h) used[h] = min(used[h], HS);
            }
            for (uint32_t src = 0; src < sources; ++src) {
                const uint64_t old_bucket = up ? u : u + src * p.to.buckets;
                K slice[P];
                load_slice(p.from, old_bucket, t.rank, false, slice);
                if (round == 0) {
                    const bool full = t.ballot(match_bits(slice, Keys<K>::kEmpty) != 0) == 0;
                    passed = passed || full || is_dirty(p.from, old_bucket, false);
                }
#pragma unroll
                for (uint32_t j = 0; j < P; ++j) {
                    const K key = slice[j];
                    const uint32_t bit = 1u << (src * P + j);
                    const bool mine = key != Keys<K>::kEmpty && (round == 0 || (overflow & bit) != 0);
                    uint32_t half = 0;
                    uint64_t new_bucket = u;
                    if (mine) {
                        if (up) new_bucket = bucket_of(p.to, key);
                        half = (new_bucket != u ? 2 : 0) + ((home_slot(key, p.seed) / HS) ^ round);
                    }
                    uint32_t place = 0;
#pragma unroll
                    for (uint32_t h = 0; h < 4; ++h) {
                        const uint32_t lanes = t.ballot(mine && half == h);
                        if (mine && half == h) place = used[h] + __popc(lanes & t.lanes_below());
                        used[h] += __popc(lanes);
                    }
                    if (!mine) continue;
                    if (place < HS) {
                        move_pair<K>(p, old_bucket, t.rank * P + j, key, new_bucket, (half % 2) * HS + place);
                    } else if (round == 0) {
                        overflow |= bit;
                    } else {
                        move_pair<K>(p, old_bucket, t.rank * P + j, key, new_bucket, Keys<K>::kSlots);
                    }
                }
            }
        }
        if (passed && t.rank == 0) {
            for (uint32_t target = 0; target < (up ? 2u : 1u); ++target) {
                if (used[2 * target] < HS || used[2 * target + 1] < HS) mark_dirty(p.to, u + target * p.from.buckets);
            }
        }
    }
}

// -------------------------------------------------------------- export

template <typename K>
__device__ void export_pairs(const GhCuckooExportParams &p) {
    const Tile t = Tile::mine();
    constexpr uint32_t P = Keys<K>::kPerLane;
    const uint32_t words = p.table.value_words;
    for (uint32_t s = 0; s < p.table.subtables; ++s) {
        const GhCuckooSubtable &sub = p.table.sub[s];
        for (uint64_t b = tile_index(); b < sub.buckets; b += tile_count()) {
            K slice[P];
            load_slice(sub, b, t.rank, false, slice);
            uint32_t mine = 0;
#pragma unroll
            for (uint32_t j = 0; j < P; ++j) mine += slice[j] != Keys<K>::kEmpty ? 1 : 0;
            // Exclusive prefix over the tile's lanes.
            uint32_t prefix = mine;
            for (uint32_t offset = 1; offset < kTile; offset *= 2) {
                const uint32_t up = __shfl_up_sync(t.mask, prefix, offset, kTile);
                if (t.rank >= offset) prefix += up;
            }
            const uint32_t total = t.shfl(prefix, kTile - 1);
            prefix -= mine;
            unsigned long long base = 0;
            if (t.rank == 0 && total != 0) {
                base = atomicAdd(reinterpret_cast<unsigned long long *>(p.written), (unsigned long long)total);
            }
            base = t.shfl(base, 0);
            uint64_t at = base + prefix;
#pragma unroll
            for (uint32_t j = 0; j < P; ++j) {
                if (slice[j] == Keys<K>::kEmpty) continue;
                if (at < p.capacity) {
                    static_cast<K *>(p.keys_out)[at] = slice[j];
                    const uint32_t *src = sub.values + slot_index<K>(b, t.rank * P + j) * words;
                    for (uint32_t w = 0; w < words; ++w) p.values_out[at * words + w] = src[w];
                }
                ++at;
            }
        }
    }
}

}  // namespace
}  // namespace gh_cuckoo

#define GH_CUCKOO_KERNELS(K, suffix)                                                                      \
    extern "C" __global__ void gh_cuckoo_find_##suffix(GhCuckooFindParams p) { gh_cuckoo::find<K>(p); }     \
    extern "C" __global__ void gh_cuckoo_update_##suffix(GhCuckooUpdateParams p) { gh_cuckoo::update<K>(p); } \
    extern "C" __global__ void gh_cuckoo_insert_##suffix(GhCuckooInsertParams p) {                         \
        gh_cuckoo::insert<K, GH_CUCKOO_MAX_VALUE_WORDS>(p);                                               \
    }                                                                                                     \
    extern "C" __global__ void gh_cuckoo_place_##suffix(GhCuckooPlaceParams p) { gh_cuckoo::place<K>(p); }  \
    extern "C" __global__ void gh_cuckoo_insert1_##suffix(GhCuckooInsertParams p) { gh_cuckoo::insert<K, 1>(p); } \
    extern "C" __global__ void gh_cuckoo_remove_##suffix(GhCuckooRemoveParams p) { gh_cuckoo::remove<K>(p); } \
    extern "C" __global__ void gh_cuckoo_resize_##suffix(GhCuckooResizeParams p) { gh_cuckoo::resize<K>(p); } \
    extern "C" __global__ void gh_cuckoo_export_##suffix(GhCuckooExportParams p) { gh_cuckoo::export_pairs<K>(p); } \
    extern "C" __global__ void gh_cuckoo_partition_count_##suffix(GhCuckooPartitionParams p) {             \
        gh_cuckoo::partition_count<K>(p);                                                                 \
    }                                                                                                     \
    extern "C" __global__ void gh_cuckoo_partition_scatter_##suffix(GhCuckooPartitionParams p) {           \
        gh_cuckoo::partition_scatter<K>(p);                                                               \
    }

GH_CUCKOO_KERNELS(uint32_t, u32)
GH_CUCKOO_KERNELS(uint64_t, u64)

extern "C" __global__ void __launch_bounds__(GH_CUCKOO_SORT_THREADS) gh_cuckoo_partition_scan(GhCuckooPartitionParams p) {
    gh_cuckoo::partition_scan(p);
}

extern "C" __global__ void gh_cuckoo_fill(GhCuckooFillParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.words[i] = p.value;
    }
}
