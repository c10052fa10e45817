//! Taking back a batch that changed a map or a set, from what its keys held before it ran.
//!
//! A layer that runs a batch in parts (the chunks of a host insert,
//! [`insert_in_chunks`](super::insert_in_chunks); the segments and children of a paged
//! table) looks each part's keys up with the table's own device form before the part runs:
//! a flag a key, and for a map the value it held. Should a later part fail, each part that
//! ran is taken back, the last one first, by an [`UndoPlan`] of its keys and those answers:
//! after an insert, the keys that were not there are removed and those that were get their
//! old values back by an insert (which replaces a value); after a removal, the keys that
//! were there go back in with their old values. Last first makes a key repeated across
//! parts end with what it held before the batch: each part's undo brings back what the
//! part before it left.
//!
//! A part whose own device form failed is taken back as well: a form that fails before it
//! changes anything is undone by a plan that changes nothing, and one that changed part of
//! its keys before failing (a [`NotInserted`](super::ErrorKind::NotInserted) error) is
//! undone whole.

use std::collections::HashSet;

use super::{Key, Value};
use crate::staging::upload;
use crate::{DeviceBuffer, Error, Stream};

/// How one part of a batch is taken back: the keys it added, each once, to remove; the
/// keys it changed or removed, each once, with the values they held before it, to insert
/// again.
#[derive(Debug, PartialEq, Eq)]
pub struct UndoPlan<K, V> {
    added: Vec<K>,
    held_keys: Vec<K>,
    held_values: Vec<V>,
}

impl<K: Key, V: Value> UndoPlan<K, V> {
    /// The plan for a part that inserted (or upserted) `keys`: `found[i]` nonzero where key
    /// `i` was there before the part, holding `held[i]` (`None` for a set: a set's key
    /// that was there is there after the part as before, and nothing is put back).
    pub fn after_insert(keys: &[K], found: &[u8], held: Option<&[V]>) -> Self {
        Self::of(keys, found, held, true)
    }

    /// The plan for a part that removed `keys`: `found[i]` nonzero where key `i` was there
    /// before the part, holding `held[i]` (for a set, a slice of `()`). Keys that were not
    /// there are not there after the part either: nothing to remove.
    pub fn after_remove(keys: &[K], found: &[u8], held: &[V]) -> Self {
        Self::of(keys, found, Some(held), false)
    }

    /// The plan for `keys` and what they held, removing the keys that were not there when
    /// the part `added` them.
    fn of(keys: &[K], found: &[u8], held: Option<&[V]>, added: bool) -> Self {
        let mut seen: HashSet<K> = HashSet::with_capacity(keys.len());
        let mut plan = Self {
            added: Vec::new(),
            held_keys: Vec::new(),
            held_values: Vec::new(),
        };
        for (i, (&key, &flag)) in keys.iter().zip(found).enumerate() {
            if !seen.insert(key) {
                continue;
            }
            match (flag != 0, held) {
                (false, _) if added => plan.added.push(key),
                (true, Some(held)) => {
                    plan.held_keys.push(key);
                    plan.held_values.push(held[i]);
                }
                _ => {}
            }
        }
        plan
    }

    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.held_keys.is_empty()
    }

    /// Queues the plan on `stream` through the table's own verbs: `remove` on the keys to
    /// take out, then `restore` on the keys to put back with their values (each uploaded
    /// through [`crate::staging`]; a verb with no keys is not called). `restore` is the
    /// map's insert; a set, which has no values to put back, inserts the keys of a removal
    /// and does nothing after an insert.
    pub fn apply<E: From<Error>>(
        &self,
        stream: &Stream,
        remove: impl FnOnce(&DeviceBuffer<K>) -> Result<(), E>,
        restore: impl FnOnce(&DeviceBuffer<K>, &DeviceBuffer<V>) -> Result<(), E>,
    ) -> Result<(), E> {
        if !self.added.is_empty() {
            remove(&upload(stream, &self.added)?)?;
        }
        if !self.held_keys.is_empty() {
            let keys = upload(stream, &self.held_keys)?;
            let values = upload(stream, &self.held_values)?;
            restore(&keys, &values)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use quickcheck::quickcheck;

    use super::*;

    #[test]
    fn an_insert_undo_removes_added_keys_and_restores_held_values_once_each() {
        let keys = [5u32, 7, 5, 9, 7, 11];
        let found = [0u8, 1, 0, 1, 1, 0];
        let held = [0u64, 70, 0, 90, 70, 0];
        let plan = UndoPlan::after_insert(&keys, &found, Some(&held));
        assert_eq!(plan.added, vec![5, 11]);
        assert_eq!(plan.held_keys, vec![7, 9]);
        assert_eq!(plan.held_values, vec![70, 90]);
    }

    #[test]
    fn a_set_insert_undo_only_removes() {
        let plan = UndoPlan::<u64, ()>::after_insert(&[1, 2, 1, 3], &[1, 0, 1, 0], None);
        assert_eq!(plan.added, vec![2, 3]);
        assert!(plan.held_keys.is_empty() && plan.held_values.is_empty());
    }

    #[test]
    fn a_remove_undo_puts_back_what_was_there_and_removes_nothing() {
        let keys = [4u64, 6, 4, 8];
        let found = [1u8, 0, 1, 1];
        let held = [40u32, 0, 40, 80];
        let plan = UndoPlan::after_remove(&keys, &found, &held);
        assert!(plan.added.is_empty());
        assert_eq!(plan.held_keys, vec![4, 8]);
        assert_eq!(plan.held_values, vec![40, 80]);
        assert!(UndoPlan::<u64, u32>::after_remove(&[1, 2], &[0, 0], &[0, 0]).is_empty());
        let set = UndoPlan::<u32, ()>::after_remove(&[3, 5], &[1, 0], &[(), ()]);
        assert_eq!((set.held_keys, set.held_values.len()), (vec![3], 1));
    }

    /// Applying a plan to a model of the table after the part gives the model before it.
    fn round_trip(entries: Vec<(u8, u8)>, part: Vec<(u8, u8)>, removes: bool) -> bool {
        use std::collections::HashMap;
        let before: HashMap<u32, u64> = entries
            .iter()
            .map(|&(k, v)| (u32::from(k % 32), u64::from(v)))
            .collect();
        let keys: Vec<u32> = part.iter().map(|&(k, _)| u32::from(k % 32)).collect();
        let found: Vec<u8> = keys
            .iter()
            .map(|k| u8::from(before.contains_key(k)))
            .collect();
        let held: Vec<u64> = keys.iter().map(|k| *before.get(k).unwrap_or(&0)).collect();
        let mut after = before.clone();
        for (&key, &(_, v)) in keys.iter().zip(&part) {
            match removes {
                true => after.remove(&key),
                false => after.insert(key, u64::from(v) + 1000),
            };
        }
        let plan = match removes {
            true => UndoPlan::after_remove(&keys, &found, &held),
            false => UndoPlan::after_insert(&keys, &found, Some(&held)),
        };
        for key in &plan.added {
            after.remove(key);
        }
        after.extend(
            plan.held_keys
                .iter()
                .copied()
                .zip(plan.held_values.iter().copied()),
        );
        after == before
    }

    quickcheck! {
        fn an_insert_undone_leaves_the_map_as_before(entries: Vec<(u8, u8)>, part: Vec<(u8, u8)>) -> bool {
            round_trip(entries, part, false)
        }

        fn a_removal_undone_leaves_the_map_as_before(entries: Vec<(u8, u8)>, part: Vec<(u8, u8)>) -> bool {
            round_trip(entries, part, true)
        }
    }
}
