// Hyperspace index kernels on one space: buckets of tuples, insert, get by key, delete
// (by key, or by the slot a lookup found), counting and filling. Operations are served
// by warp-cooperative work sharing: every thread owns one item, the warp takes them one at
// a time, and all 32 lanes read each key node together, ballots finding the key or a
// free slot.
#include "hyperspace/slots.cuh"

using gh::group_reserve;
using gh::kFullWarp;
using gh::lane_id;
using namespace gh::hs;

extern "C" __global__ void gh_hs_buckets(GhHsBucketsParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.tuples.count; i += stride) {
        p.buckets[i] = tuple_bucket(p.space, p.tuples, i);
    }
}

// Inserts the PENDING tuples. The warp walks the source tuple's bucket and claims an
// empty key slot. Without `unique` it claims the first one it meets. With `unique` it
// first reads every key node of the chain, looking for the key and waiting on a busy slot
// (an insert in flight may hold the same key), and only at the tail claims the first
// empty slot it saw: a reclaimed hole (gh_hs_reclaim) may lie before a live copy of the
// key further on. Losing that slot starts the walk again from the head. Two inserts of
// one key cannot both succeed: each claims the first empty slot of its walk, so the later
// one either saw the earlier one's slot busy (and waited for its key) or claims that same
// slot and loses. A full tail gets a new super node.
extern "C" __global__ void gh_hs_insert(GhHsInsertParams p) {
    SuperNodeAllocator allocator(p.space.alloc, chain_count(p.space));
    for_each_item(p.tuples.count, [&](uint64_t i, bool in_range) {
        bool active = in_range && p.status[i] == GH_HS_PENDING;
        const uint32_t key = active ? p.tuples.keys[i] : 0;
        const uint32_t bucket = active ? tuple_bucket(p.space, p.tuples, i) : 0;
        while (true) {
            const uint32_t queue = __ballot_sync(kFullWarp, active);
            if (queue == 0) {
                return;
            }
            const uint32_t src = __ffs(queue) - 1;
            const uint32_t src_key = __shfl_sync(kFullWarp, key, src);
            const uint64_t src_item = __shfl_sync(kFullWarp, (unsigned long long)i, src);
            const SuperNode head = head_of(p.space, __shfl_sync(kFullWarp, bucket, src));
            SuperNode at = head;
            // With `unique`: the first empty slot of this walk, if any yet.
            SuperNode seen = SuperNode{nullptr, GH_INVALID_SLAB};
            uint32_t seen_spot = 32u;
            uint32_t outcome = GH_HS_PENDING;
            while (outcome == GH_HS_PENDING) {
                const uint32_t word = gh::read_slab(at.key_node);
                const bool data = is_data_lane();
                const uint32_t empty = gh::find_first(data && word == GH_SLAB_EMPTY_WORD);
                const SuperNode next = next_of(p.space, word);
                if (p.unique) {
                    if (__ballot_sync(kFullWarp, data && word == src_key) != 0) {
                        outcome = GH_HS_PRESENT;
                        break;
                    }
                    if (__ballot_sync(kFullWarp, data && word == GH_HS_BUSY_KEY) != 0) {
                        continue;  // an insert in flight: read the node again once it lands
                    }
                    if (seen.key_node == nullptr && empty < 32u) {
                        seen = at;
                        seen_spot = empty;
                    }
                    if (next.key_node != nullptr) {
                        at = next;
                        continue;
                    }
                    // The tail: the key is nowhere in the chain.
                    if (seen.key_node != nullptr) {
                        if (claim_slot(seen.key_node, seen_spot)) {
                            publish_tuple(p.space, p.tuples, src_item, seen.key_node, seen_spot);
                            if (lane_id() == 0 && p.slots != nullptr) {
                                p.slots[src_item] = slot_id(p.space, seen, seen_spot);
                            }
                            outcome = GH_HS_INSERTED;
                        } else {
                            at = head;  // lost the slot: walk again
                            seen = SuperNode{nullptr, GH_INVALID_SLAB};
                            seen_spot = 32u;
                        }
                        continue;
                    }
                    if (!extend_bucket(allocator, p.space, at.key_node)) {
                        break;  // no super node: the tuple stays PENDING for a retry after growth
                    }
                    continue;  // read the tail again, then its new successor
                }
                if (empty < 32u) {
                    if (claim_slot(at.key_node, empty)) {
                        publish_tuple(p.space, p.tuples, src_item, at.key_node, empty);
                        if (lane_id() == 0 && p.slots != nullptr) {
                            p.slots[src_item] = slot_id(p.space, at, empty);
                        }
                        outcome = GH_HS_INSERTED;
                    }
                    continue;  // lost the slot: read the node again
                }
                if (next.key_node != nullptr) {
                    at = next;
                } else if (!extend_bucket(allocator, p.space, at.key_node)) {
                    break;  // no super node: the tuple stays PENDING for a retry after growth
                }
            }
            if (lane_id() == src) {
                p.status[i] = (uint8_t)outcome;
                active = false;
            }
        }
    });
}

// Looks keys up, each in the bucket its tuple hashes to: the first live copy of each (a
// modify in flight may hold two; either is right).
extern "C" __global__ void gh_hs_get(GhHsGetParams p) {
    for_each_item(p.tuples.count, [&](uint64_t i, bool in_range) {
        for_each_lane_item(p.space, p.tuples, i, in_range, [&](uint32_t src, uint32_t src_key, uint64_t src_item,
                                                               uint32_t bucket) {
            uint8_t found = 0;
            walk_bucket(p.space, bucket, [&](SuperNode at, uint32_t word) {
                const uint32_t spot = gh::find_first(is_data_lane() && word == src_key && is_live_key(word));
                if (spot == 32u) {
                    return true;
                }
                // Acquire: the fields were written before the key was published.
                __threadfence();
                if (p.out.keys != nullptr) {
                    copy_tuple_out(p.space, at.key_node, spot, p.out, src_item);
                }
                if (lane_id() == 0 && p.slots != nullptr) {
                    p.slots[src_item] = slot_id(p.space, at, spot);
                }
                found = 1;
                return false;
            });
            if (lane_id() == src) {
                p.found[i] = found;
                if (!found && p.slots != nullptr) {
                    p.slots[i] = 0;
                }
                // A reserved key, which no later delete of these tuples can match.
                if (!found && p.out.keys != nullptr) {
                    p.out.keys[i] = GH_SLAB_EMPTY_WORD;
                }
            }
        });
    });
}

// Removes every live copy of each tuple's key from the bucket the tuple hashes to.
extern "C" __global__ void gh_hs_delete(GhHsDeleteParams p) {
    for_each_item(p.tuples.count, [&](uint64_t i, bool in_range) {
        for_each_lane_item(p.space, p.tuples, i, in_range, [&](uint32_t src, uint32_t src_key, uint64_t,
                                                               uint32_t bucket) {
            uint32_t removed = 0;
            walk_bucket(p.space, bucket, [&](SuperNode at, uint32_t word) {
                const bool mine = is_data_lane() && word == src_key && is_live_key(word) &&
                                  atomicCAS(at.key_node + lane_id(), src_key, GH_SLAB_REMOVED_WORD) == src_key;
                removed += __popc(__ballot_sync(kFullWarp, mine));
                return true;
            });
            if (lane_id() == src && p.removed != nullptr) {
                p.removed[i] = removed;
            }
        });
    });
}

// Removes the copies that lookups or inserts found, by their key slot ids: one thread an
// item.
extern "C" __global__ void gh_hs_delete_slots(GhHsSlotDeleteParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        uint8_t removed = 0;
        if (p.slots[i] != 0) {
            uint32_t *slot = slot_pointer(p.space, p.slots[i]);
            removed = atomicCAS(slot, p.keys[i], GH_SLAB_REMOVED_WORD) == p.keys[i];
        }
        if (p.removed != nullptr) {
            p.removed[i] = removed;
        }
    }
}

// Live tuples: one warp a bucket.
extern "C" __global__ void gh_hs_count(GhHsCountParams p) {
    for_each_warp_item(p.space.bucket_count, [&](uint64_t bucket) {
        uint64_t live = 0;
        walk_bucket(p.space, (uint32_t)bucket, [&](SuperNode, uint32_t word) {
            live += __popc(__ballot_sync(kFullWarp, is_data_lane() && is_live_key(word)));
            return true;
        });
        if (lane_id() == 0) {
            if (p.counts != nullptr) {
                p.counts[bucket] = live;
            } else if (live != 0) {
                atomicAdd(p.total, (unsigned long long)live);
            }
        }
    });
}

// Removed key slots made empty again, for later inserts to take (the index's reclaim):
// queued only while no write is in flight and after every search that could have seen
// their tuples live has ended, so no reader holds a removed slot's old words. One warp a
// bucket; *total counts the slots freed.
extern "C" __global__ void gh_hs_reclaim(GhHsCountParams p) {
    for_each_warp_item(p.space.bucket_count, [&](uint64_t bucket) {
        uint64_t freed = 0;
        walk_bucket(p.space, (uint32_t)bucket, [&](SuperNode at, uint32_t word) {
            const bool removed = is_data_lane() && word == GH_SLAB_REMOVED_WORD;
            if (removed) {
                at.key_node[lane_id()] = GH_SLAB_EMPTY_WORD;
            }
            freed += __popc(__ballot_sync(kFullWarp, removed));
            return true;
        });
        if (lane_id() == 0 && freed != 0) {
            atomicAdd(p.total, (unsigned long long)freed);
        }
    });
}

// Every live tuple: one warp a bucket; on each key node the live lanes take places
// with one atomic and each writes its own tuple (lane c's word of every chain).
extern "C" __global__ void gh_hs_export(GhHsExportParams p) {
    const uint32_t chains = chain_count(p.space);
    for_each_warp_item(p.space.bucket_count, [&](uint64_t bucket) {
        walk_bucket(p.space, (uint32_t)bucket, [&](SuperNode super_node, uint32_t word) {
            const bool live = is_data_lane() && is_live_key(word);
            const uint32_t lanes = __ballot_sync(kFullWarp, live);
            if (lanes == 0) {
                return true;
            }
            const uint64_t at = group_reserve(p.cursor, lanes);
            // Acquire: the fields were written before the key was published.
            __threadfence();
            if (live && at < p.out.capacity) {
                p.out.keys[at] = word;
                for (uint32_t c = 1; c < chains; ++c) {
                    const uint32_t field = __ldcg(node(super_node.key_node, c) + lane_id());
                    if (c == value_chain(p.space)) {
                        p.out.values[at] = field;
                    } else {
                        p.out.attributes[(uint64_t)(c - 1u) * p.out.capacity + at] = field;
                    }
                }
            }
            return true;
        });
    });
}

extern "C" __global__ void gh_hs_fill(GhHsFillParams p) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
        p.words[i] = p.value;
    }
}
