//! Host-side rules of a batch: which elements are valid, and how many slabs an append may
//! link.

use crate::error::{Result, SlabListError};
use crate::layouts::{GH_SLAB_DATA_LANES, GH_SLAB_EMPTY_WORD, GH_SLAB_REMOVED_WORD};

/// Whether a word is one the lists reserve: a never-written word or a removed one.
pub fn is_reserved(word: u32) -> bool {
    word == GH_SLAB_EMPTY_WORD || word == GH_SLAB_REMOVED_WORD
}

/// Checks a batch of `(lists[i], words[i])` elements against `list_count` lists: equal
/// lengths, every list below the count, no reserved word.
pub(crate) fn check(lists: &[u32], words: &[u32], list_count: u32) -> Result<()> {
    if lists.len() != words.len() {
        return Err(gpuhash_core::Error::LengthMismatch {
            what: "lists and words",
            left: lists.len(),
            right: words.len(),
        }
        .into());
    }
    for (index, (&list, &word)) in lists.iter().zip(words).enumerate() {
        if list >= list_count {
            return Err(SlabListError::NoSuchList {
                index,
                list,
                list_count,
            });
        }
        if is_reserved(word) {
            return Err(SlabListError::ReservedWord { index, word });
        }
    }
    Ok(())
}

/// The most slabs an append of `n` words to `list_count` lists may link: a list that takes
/// k words links at most ceil(k / 31) slabs, so the batch at most ceil(n / 31) + min(n, lists).
pub(crate) fn slabs_needed(n: usize, list_count: u32) -> u64 {
    let n = n as u64;
    n.div_ceil(u64::from(GH_SLAB_DATA_LANES)) + n.min(u64::from(list_count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    #[test]
    fn reserved_words_are_the_two_highest() {
        assert!(is_reserved(u32::MAX));
        assert!(is_reserved(u32::MAX - 1));
        assert!(!is_reserved(u32::MAX - 2));
        assert!(!is_reserved(0));
    }

    #[test]
    fn a_batch_is_checked_element_by_element() {
        assert!(check(&[0, 3], &[1, 2], 4).is_ok());
        assert!(check(&[], &[], 0).is_ok());
        assert!(matches!(
            check(&[0, 4], &[1, 2], 4),
            Err(SlabListError::NoSuchList {
                index: 1,
                list: 4,
                list_count: 4
            })
        ));
        assert!(matches!(
            check(&[0], &[u32::MAX - 1], 4),
            Err(SlabListError::ReservedWord { index: 0, .. })
        ));
        assert!(matches!(
            check(&[0], &[1, 2], 4),
            Err(SlabListError::Device(
                gpuhash_core::Error::LengthMismatch { .. }
            ))
        ));
        assert!(matches!(
            check(&[0], &[1], 0),
            Err(SlabListError::NoSuchList { .. })
        ));
    }

    #[test]
    fn slabs_needed_counts_a_slab_per_31_words_and_one_per_list() {
        assert_eq!(slabs_needed(0, 10), 0);
        assert_eq!(slabs_needed(1, 10), 2);
        assert_eq!(slabs_needed(31, 1), 2);
        assert_eq!(slabs_needed(32, 1), 3);
        assert_eq!(slabs_needed(100, 1000), 4 + 100);
    }

    quickcheck! {
        fn slabs_needed_bounds_every_split(sizes: Vec<u8>) -> bool {
            // Appending k words to a list links at most ceil(k / 31) slabs; summed over
            // lists, never more than the bound for the whole batch.
            let lists = sizes.len() as u32;
            let n: usize = sizes.iter().map(|&s| usize::from(s)).sum();
            let linked: u64 = sizes.iter().map(|&s| u64::from(s).div_ceil(31)).sum();
            linked <= slabs_needed(n, lists)
        }
    }
}
