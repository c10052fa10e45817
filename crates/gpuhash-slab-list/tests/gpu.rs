//! Slab lists on a real GPU, held against a host model: one `Vec<u32>` per list.
//! Run on a GPU machine with `--include-ignored` (see docs/gpu-testing.md).

use gpuhash_core::Stream;
use gpuhash_slab_alloc::SlabAllocOptions;
use gpuhash_slab_list::{SlabListError, SlabLists, SlabListsOptions, is_reserved};
use gpuhash_test_support::{SeededRng, adversarial_keys, device, shared_memory, stream};

/// What the lists must hold: each list's words, an earlier batch's before a later one's.
/// Words carry their batch in bits 24..30, so that the order of batches can be checked.
#[derive(Debug, Clone)]
struct Model {
    lists: Vec<Vec<u32>>,
}

impl Model {
    fn new(list_count: u32) -> Self {
        Self {
            lists: vec![Vec::new(); list_count as usize],
        }
    }

    fn append(&mut self, lists: &[u32], words: &[u32]) {
        for (&l, &w) in lists.iter().zip(words) {
            self.lists[l as usize].push(w);
        }
    }

    /// Removes every copy of each (list, word); returns the copies per (list, word).
    fn remove(&mut self, lists: &[u32], words: &[u32]) -> Vec<(u32, u32, u32)> {
        let mut gone = Vec::new();
        for (&l, &w) in lists.iter().zip(words) {
            let list = &mut self.lists[l as usize];
            let before = list.len();
            list.retain(|&x| x != w);
            gone.push((l, w, (before - list.len()) as u32));
        }
        gone
    }

    fn len(&self) -> u64 {
        self.lists.iter().map(|l| l.len() as u64).sum()
    }
}

fn lists_of(count: u32, options: SlabListsOptions) -> SlabLists {
    SlabLists::new(device(), count, options).expect("slab lists")
}

fn small_alloc() -> SlabListsOptions {
    SlabListsOptions {
        alloc: SlabAllocOptions {
            initial_slabs: 1024,
            ..Default::default()
        },
        max_slabs: None,
    }
}

/// A random word that is not reserved, tagged with `batch` in bits 24..30.
fn word(rng: &mut SeededRng, batch: u32) -> u32 {
    let w = (rng.next_u64() as u32 & 0x00ff_ffff) | (batch << 24);
    assert!(!is_reserved(w));
    w
}

fn batch_of(w: u32) -> u32 {
    (w >> 24) & 0x7f
}

/// Collects the lists and checks them against the model: each list the same words (as a
/// multiset), batches in order; and the counts, the length and the memory's entry bytes.
fn check(lists: &SlabLists, model: &Model, stream: &Stream, ordered_batches: bool) {
    let rows = lists.collect(stream).expect("collect");
    let offsets = rows.offsets.to_host(stream).expect("offsets");
    let values = rows.values.to_host(stream).expect("values");
    assert_eq!(offsets.len(), model.lists.len() + 1);
    assert_eq!(*offsets.last().unwrap(), model.len());
    assert_eq!(values.len() as u64, model.len());
    for (l, expected) in model.lists.iter().enumerate() {
        let got = &values[offsets[l] as usize..offsets[l + 1] as usize];
        if ordered_batches {
            assert!(
                got.windows(2).all(|w| batch_of(w[0]) <= batch_of(w[1])),
                "list {l}: a later batch's word before an earlier one's"
            );
        }
        let (mut got, mut expected) = (got.to_vec(), expected.clone());
        got.sort_unstable();
        expected.sort_unstable();
        assert_eq!(got, expected, "list {l}");
    }
    let counts = lists.counts(stream).expect("counts");
    let expected: Vec<u64> = model.lists.iter().map(|l| l.len() as u64).collect();
    assert_eq!(counts, expected);
    assert_eq!(lists.len(stream).expect("len"), model.len());
    let memory = lists.memory_on(stream).expect("memory");
    assert_eq!(memory.entry_bytes, model.len() * 4);
    assert!(memory.bytes_in_use <= memory.bytes_reserved);
}

#[test]
#[ignore = "needs a CUDA device"]
fn random_batches_match_the_model() {
    let _memory = shared_memory();
    let stream = stream();
    let mut rng = SeededRng::new(17);
    let count = 1000;
    let lists = lists_of(count, small_alloc());
    let mut model = Model::new(count);
    for batch in 0..6 {
        let n = 1 << (8 + 2 * batch);
        let l: Vec<u32> = (0..n)
            .map(|_| (rng.next_u64() % u64::from(count)) as u32)
            .collect();
        let w: Vec<u32> = (0..n).map(|_| word(&mut rng, batch)).collect();
        lists.append(stream, &l, &w).expect("append");
        model.append(&l, &w);
        check(&lists, &model, stream, true);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn every_word_to_one_list_and_the_others_empty() {
    let _memory = shared_memory();
    let stream = stream();
    let mut rng = SeededRng::new(18);
    let count = 64;
    let lists = lists_of(count, small_alloc());
    let mut model = Model::new(count);
    for batch in 0..3 {
        let n = 50_000;
        let l = vec![count - 1; n];
        let w: Vec<u32> = (0..n).map(|_| word(&mut rng, batch)).collect();
        lists.append(stream, &l, &w).expect("append");
        model.append(&l, &w);
        check(&lists, &model, stream, true);
    }
    // 150000 words in slabs of 31: the allocator grew from 1024 slabs.
    assert!(lists.slabs_in_use(stream).expect("in use") >= 150_000 / 31 - 1);
}

#[test]
#[ignore = "needs a CUDA device"]
fn many_lists_mostly_empty() {
    let _memory = shared_memory();
    let stream = stream();
    let mut rng = SeededRng::new(19);
    let count = 1 << 20;
    let lists = lists_of(count, SlabListsOptions::default());
    let mut model = Model::new(count);
    let n = 1 << 16;
    let l: Vec<u32> = (0..n)
        .map(|_| (rng.next_u64() % u64::from(count)) as u32)
        .collect();
    let w: Vec<u32> = (0..n).map(|_| word(&mut rng, 0)).collect();
    lists.append(stream, &l, &w).expect("append");
    model.append(&l, &w);
    check(&lists, &model, stream, true);
    // Few lists outgrow their head: few slabs from the allocator.
    assert!(lists.slabs_in_use(stream).expect("in use") < 1000);
}

#[test]
#[ignore = "needs a CUDA device"]
fn adversarial_words_go_in_and_out() {
    let _memory = shared_memory();
    let stream = stream();
    let count = 3;
    let lists = lists_of(count, small_alloc());
    let mut model = Model::new(count);
    // Every non-reserved adversarial word, three times, to every list (duplicates kept).
    let words: Vec<u32> = adversarial_keys::<u32>()
        .into_iter()
        .filter(|&w| !is_reserved(w))
        .collect();
    let mut l = Vec::new();
    let mut w = Vec::new();
    for list in 0..count {
        for _ in 0..3 {
            l.extend(std::iter::repeat_n(list, words.len()));
            w.extend(&words);
        }
    }
    lists.append(stream, &l, &w).expect("append");
    model.append(&l, &w);
    check(&lists, &model, stream, false);
    // Remove every other word from list 1, each named twice, and some absent words.
    let mut rl = Vec::new();
    let mut rw = Vec::new();
    for &x in words.iter().step_by(2) {
        rl.extend([1, 1]);
        rw.extend([x, x]);
    }
    rl.extend([0, 2]);
    rw.extend([0x0012_3456, u32::MAX - 2]);
    let removed = lists.remove(stream, &rl, &rw).expect("remove");
    let mut expected_model = model.clone();
    let gone = expected_model.remove(&rl, &rw);
    // An element named twice removes its copies once between the two elements.
    let mut by_pair = std::collections::HashMap::<(u32, u32), (u32, u32)>::new();
    for (i, &(l, w, copies)) in gone.iter().enumerate() {
        let entry = by_pair.entry((l, w)).or_insert((0, 0));
        entry.0 += removed[i];
        entry.1 = entry.1.max(copies);
    }
    for ((l, w), (got, copies)) in by_pair {
        assert_eq!(got, copies, "list {l} word {w:#x}");
    }
    check(&lists, &expected_model, stream, false);
}

#[test]
#[ignore = "needs a CUDA device"]
fn removals_leave_holes_that_appends_do_not_fill() {
    let _memory = shared_memory();
    let stream = stream();
    let lists = lists_of(2, small_alloc());
    let mut model = Model::new(2);
    let first: Vec<u32> = (0..100).collect();
    lists.append(stream, &[0; 100], &first).expect("append");
    model.append(&[0; 100], &first);
    let gone: Vec<u32> = (0..100).step_by(3).collect();
    let l = vec![0; gone.len()];
    assert!(
        lists
            .remove(stream, &l, &gone)
            .expect("remove")
            .iter()
            .all(|&r| r == 1)
    );
    model.remove(&l, &gone);
    let second: Vec<u32> = (1 << 24..(1 << 24) + 50).collect();
    lists.append(stream, &[0; 50], &second).expect("append");
    model.append(&[0; 50], &second);
    check(&lists, &model, stream, true);
}

#[test]
#[ignore = "needs a CUDA device"]
fn bad_batches_are_refused_and_change_nothing() {
    let _memory = shared_memory();
    let stream = stream();
    let lists = lists_of(8, small_alloc());
    let mut model = Model::new(8);
    lists.append(stream, &[1, 2], &[5, 6]).expect("append");
    model.append(&[1, 2], &[5, 6]);
    let bad = [
        lists.append(stream, &[0, 8], &[1, 2]),
        lists.append(stream, &[0, 1], &[1, u32::MAX]),
        lists.append(stream, &[0, 1], &[u32::MAX - 1, 2]),
        lists.append(stream, &[0], &[1, 2]),
    ];
    assert!(matches!(
        bad[0],
        Err(SlabListError::NoSuchList {
            index: 1,
            list: 8,
            ..
        })
    ));
    assert!(matches!(
        bad[1],
        Err(SlabListError::ReservedWord { index: 1, .. })
    ));
    assert!(matches!(
        bad[2],
        Err(SlabListError::ReservedWord { index: 0, .. })
    ));
    assert!(matches!(bad[3], Err(SlabListError::Device(_))));
    assert!(matches!(
        lists.remove(stream, &[9], &[5]),
        Err(SlabListError::NoSuchList { .. })
    ));
    assert!(SlabLists::new(device(), 0, small_alloc()).is_err());
    check(&lists, &model, stream, true);
}

#[test]
#[ignore = "needs a CUDA device"]
fn an_allocator_at_its_limit_refuses_the_batch_and_changes_nothing() {
    let _memory = shared_memory();
    let stream = stream();
    let options = SlabListsOptions {
        max_slabs: Some(1024),
        ..small_alloc()
    };
    let lists = lists_of(4, options);
    let mut model = Model::new(4);
    let mut rng = SeededRng::new(20);
    let w: Vec<u32> = (0..3000).map(|_| word(&mut rng, 0)).collect();
    lists
        .append(stream, &[2; 3000], &w)
        .expect("fits in 1024 slabs");
    model.append(&[2; 3000], &w);
    let in_use = lists.slabs_in_use(stream).expect("in use");
    let big: Vec<u32> = (0..40_000).map(|_| word(&mut rng, 1)).collect();
    let refused = lists.append(stream, &[3; 40_000], &big);
    assert!(
        matches!(
            refused,
            Err(SlabListError::OutOfSlabs {
                max_slabs: 1024,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(lists.slabs_in_use(stream).expect("in use"), in_use);
    check(&lists, &model, stream, true);
    // The lists still work within the limit.
    lists.append(stream, &[0, 3], &[7, 8]).expect("append");
    model.append(&[0, 3], &[7, 8]);
    check(&lists, &model, stream, false);
}

#[test]
#[ignore = "needs a CUDA device"]
fn clear_gives_every_slab_back() {
    let _memory = shared_memory();
    let stream = stream();
    let lists = lists_of(16, small_alloc());
    let mut rng = SeededRng::new(21);
    let l: Vec<u32> = (0..20_000).map(|i| i % 16).collect();
    let w: Vec<u32> = (0..20_000).map(|_| word(&mut rng, 0)).collect();
    lists.append(stream, &l, &w).expect("append");
    assert!(lists.slabs_in_use(stream).expect("in use") > 0);
    lists.clear(stream).expect("clear");
    assert_eq!(lists.slabs_in_use(stream).expect("in use"), 0);
    check(&lists, &Model::new(16), stream, true);
    let mut model = Model::new(16);
    lists.append(stream, &l, &w).expect("append after clear");
    model.append(&l, &w);
    check(&lists, &model, stream, true);
}

#[test]
#[ignore = "needs a CUDA device"]
fn threads_on_their_own_streams_append_to_the_same_lists() {
    let _memory = shared_memory();
    let count = 16;
    let threads = 4u32;
    let batches = 8u32;
    let lists = lists_of(count, small_alloc());
    std::thread::scope(|scope| {
        for t in 0..threads {
            let lists = &lists;
            scope.spawn(move || {
                let stream = device().new_stream().expect("stream");
                let mut rng = SeededRng::new(100 + u64::from(t));
                for b in 0..batches {
                    let n = 5000;
                    let l: Vec<u32> = (0..n)
                        .map(|_| (rng.next_u64() % u64::from(count)) as u32)
                        .collect();
                    // Thread in bits 28..30, batch in 24..28: every word is this thread's.
                    let w: Vec<u32> = (0..n)
                        .map(|_| (rng.next_u64() as u32 & 0x00ff_ffff) | (t << 28) | (b << 24))
                        .collect();
                    lists.append(&stream, &l, &w).expect("append");
                }
            });
        }
    });
    // The same batches again, on the host.
    let mut model = Model::new(count);
    for t in 0..threads {
        let mut rng = SeededRng::new(100 + u64::from(t));
        for b in 0..batches {
            let n = 5000;
            let l: Vec<u32> = (0..n)
                .map(|_| (rng.next_u64() % u64::from(count)) as u32)
                .collect();
            let w: Vec<u32> = (0..n)
                .map(|_| (rng.next_u64() as u32 & 0x00ff_ffff) | (t << 28) | (b << 24))
                .collect();
            model.append(&l, &w);
        }
    }
    let stream = stream();
    check(&lists, &model, stream, false);
    // Each thread's batches stay in order within every list.
    let rows = lists.collect(stream).expect("collect");
    let offsets = rows.offsets.to_host(stream).expect("offsets");
    let values = rows.values.to_host(stream).expect("values");
    for l in 0..count as usize {
        let list = &values[offsets[l] as usize..offsets[l + 1] as usize];
        for t in 0..threads {
            let own: Vec<u32> = list
                .iter()
                .filter(|&&w| w >> 28 == t)
                .map(|&w| (w >> 24) & 0xf)
                .collect();
            assert!(own.windows(2).all(|p| p[0] <= p[1]), "list {l} thread {t}");
        }
    }
}
