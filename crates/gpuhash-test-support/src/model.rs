//! The host model every table is held against: each shape is a multiset of pairs whose
//! insert rule differs (a set's value is `()`).

use std::collections::HashMap;

use gpuhash_core::table::{Key, Value};

/// What an insert does to a key the table holds: the one difference between the shapes,
/// as far as the model goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A map: the key keeps one value, the one inserted last.
    Replace,
    /// A set: the key is there once; inserting it again changes nothing.
    Once,
    /// A multimap: every insert adds a value, copies included.
    Append,
}

/// A key that one map insert batch gave different values, and those values: the table
/// keeps one of them, whole, and the model learns which from the table.
pub(crate) type Ambiguous<K, V> = (K, Vec<V>);

/// The expected content of a table.
#[derive(Debug, Clone)]
pub(crate) struct Model<K, V> {
    rule: Rule,
    entries: HashMap<K, Vec<V>>,
}

impl<K: Key, V: Value> Model<K, V> {
    /// An empty table of this rule.
    pub(crate) fn new(rule: Rule) -> Self {
        Self {
            rule,
            entries: HashMap::new(),
        }
    }

    /// Applies an insert batch, and returns the keys it leaves ambiguous (see
    /// [`Ambiguous`]), which the model drops until [`Model::settle`] says what they hold.
    pub(crate) fn insert(&mut self, keys: &[K], values: &[V]) -> Vec<Ambiguous<K, V>> {
        let mut batch: HashMap<K, Vec<V>> = HashMap::new();
        for (&key, &value) in keys.iter().zip(values) {
            batch.entry(key).or_default().push(value);
        }
        let mut ambiguous = Vec::new();
        for (key, copies) in batch {
            let first = copies[0];
            match self.rule {
                Rule::Append => self.entries.entry(key).or_default().extend(copies),
                Rule::Once => {
                    self.entries.entry(key).or_insert_with(|| vec![first]);
                }
                Rule::Replace if copies.iter().all(|&v| v == first) => {
                    self.entries.insert(key, vec![first]);
                }
                Rule::Replace => {
                    self.entries.remove(&key);
                    ambiguous.push((key, copies));
                }
            }
        }
        ambiguous
    }

    /// Records what the table holds for an ambiguous key: one of the batch's copies.
    pub(crate) fn settle(
        &mut self,
        (key, copies): &Ambiguous<K, V>,
        found: &[V],
    ) -> Result<(), String> {
        match found {
            [value] if copies.contains(value) => {
                self.entries.insert(*key, vec![*value]);
                Ok(())
            }
            _ => Err(format!(
                "key {key:?}, given {} different values in one batch, holds {found:?}, not \
                 one of them",
                copies.len()
            )),
        }
    }

    /// Pairs the model holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.values().map(Vec::len).sum()
    }

    /// Every key the model holds.
    pub(crate) fn keys(&self) -> Vec<K> {
        self.entries.keys().copied().collect()
    }

    /// Takes in the entries of a model of other keys.
    pub(crate) fn absorb(&mut self, other: Self) {
        self.entries.extend(other.entries);
    }

    /// Forgets everything.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    fn values_of(&self, key: &K) -> Vec<V> {
        sorted_values(self.entries.get(key).cloned().unwrap_or_default())
    }

    /// Checks the values a lookup found, one list a key, in any order within a key.
    pub(crate) fn check_lookups(&self, keys: &[K], found: Vec<Vec<V>>) -> Result<(), String> {
        one_answer_a_key(keys, found.len())?;
        for (key, found) in keys.iter().zip(found) {
            let (found, expected) = (sorted_values(found), self.values_of(key));
            if found != expected {
                return Err(format!(
                    "lookup of {key:?} found {found:?}, the model holds {expected:?}"
                ));
            }
        }
        Ok(())
    }

    /// Checks how many values each key holds (for maps and sets: whether it is there).
    pub(crate) fn check_counts(&self, keys: &[K], counts: &[u32]) -> Result<(), String> {
        one_answer_a_key(keys, counts.len())?;
        for (key, &count) in keys.iter().zip(counts) {
            let expected = self.entries.get(key).map_or(0, Vec::len);
            if count as usize != expected {
                return Err(format!(
                    "count of {key:?} is {count}, the model holds {expected}"
                ));
            }
        }
        Ok(())
    }

    /// Applies a removal batch and checks what the table said it removed: over the copies
    /// of a key in the batch, the answers add up to what the key held (which copy answers
    /// is the table's to choose).
    pub(crate) fn check_removals(&mut self, keys: &[K], removed: &[u32]) -> Result<(), String> {
        one_answer_a_key(keys, removed.len())?;
        let mut said: HashMap<K, u64> = HashMap::new();
        for (&key, &count) in keys.iter().zip(removed) {
            *said.entry(key).or_default() += u64::from(count);
        }
        for (key, said) in said {
            let held = self.entries.remove(&key).map_or(0, |v| v.len() as u64);
            if said != held {
                return Err(format!(
                    "removal of {key:?} answered {said}, the model held {held}"
                ));
            }
        }
        Ok(())
    }

    /// Checks an export: exactly the model's pairs, in any order.
    pub(crate) fn check_export(&self, pairs: Vec<(K, V)>) -> Result<(), String> {
        let mut expected: Vec<(K, V)> = Vec::with_capacity(self.len());
        for (&key, values) in &self.entries {
            expected.extend(values.iter().map(|&v| (key, v)));
        }
        let (pairs, expected) = (sorted_pairs(pairs), sorted_pairs(expected));
        if let Some(at) =
            (0..pairs.len().max(expected.len())).find(|&i| pairs.get(i) != expected.get(i))
        {
            return Err(format!(
                "export of {} pairs differs from the model's {} at sorted position {at}: \
                 {:?}, the model {:?}",
                pairs.len(),
                expected.len(),
                pairs.get(at),
                expected.get(at)
            ));
        }
        Ok(())
    }

    /// Checks the table's count of live entries.
    pub(crate) fn check_len(&self, len: usize) -> Result<(), String> {
        if len == self.len() {
            Ok(())
        } else {
            Err(format!("len is {len}, the model holds {}", self.len()))
        }
    }
}

fn one_answer_a_key<K>(keys: &[K], answers: usize) -> Result<(), String> {
    if answers == keys.len() {
        Ok(())
    } else {
        Err(format!("{answers} answers for {} keys", keys.len()))
    }
}

/// Values in a fixed order (of their bytes), so that lists compare as multisets.
fn sorted_values<V: Value>(mut values: Vec<V>) -> Vec<V> {
    values.sort_unstable_by(|a, b| bytemuck::bytes_of(a).cmp(bytemuck::bytes_of(b)));
    values
}

fn sorted_pairs<K: Ord, V: Value>(mut pairs: Vec<(K, V)>) -> Vec<(K, V)> {
    pairs.sort_unstable_by(|(ka, va), (kb, vb)| {
        ka.cmp(kb)
            .then_with(|| bytemuck::bytes_of(va).cmp(bytemuck::bytes_of(vb)))
    });
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_keeps_the_last_value_and_settles_duplicates_on_one_copy() {
        let mut map = Model::<u32, u64>::new(Rule::Replace);
        assert!(map.insert(&[1, 2, 2], &[10, 20, 20]).is_empty());
        map.insert(&[1], &[11]);
        map.check_lookups(&[1, 2, 3], vec![vec![11], vec![20], vec![]])
            .unwrap();
        assert!(map.check_lookups(&[1], vec![vec![10]]).is_err());

        let ambiguous = map.insert(&[5, 5, 5], &[50, 51, 52]);
        assert_eq!(ambiguous, vec![(5, vec![50, 51, 52])]);
        assert!(map.clone().settle(&ambiguous[0], &[53]).is_err());
        assert!(map.clone().settle(&ambiguous[0], &[50, 51]).is_err());
        map.settle(&ambiguous[0], &[51]).unwrap();
        map.check_export(vec![(5, 51), (2, 20), (1, 11)]).unwrap();
        map.check_len(3).unwrap();
    }

    #[test]
    fn a_set_holds_a_key_once() {
        let mut set = Model::<u64, ()>::new(Rule::Once);
        set.insert(&[7, 7, u64::MAX], &[(); 3]);
        set.insert(&[7], &[()]);
        set.check_len(2).unwrap();
        set.check_counts(&[7, 8, u64::MAX], &[1, 0, 1]).unwrap();
        assert!(set.check_counts(&[7], &[2]).is_err());
        set.check_export(vec![(u64::MAX, ()), (7, ())]).unwrap();
        assert!(set.check_export(vec![(7, ())]).is_err());
    }

    #[test]
    fn a_multimap_keeps_every_copy_in_any_order() {
        let mut multimap = Model::<u32, u32>::new(Rule::Append);
        multimap.insert(&[1, 1, 2], &[10, 10, 20]);
        multimap.insert(&[1], &[11]);
        multimap
            .check_lookups(&[1, 2], vec![vec![11, 10, 10], vec![20]])
            .unwrap();
        assert!(multimap.check_lookups(&[1], vec![vec![11, 10]]).is_err());
        multimap.check_counts(&[1, 2, 3], &[3, 1, 0]).unwrap();
        assert!(multimap.check_lookups(&[1, 2], vec![vec![]]).is_err());
    }

    #[test]
    fn removals_add_up_over_the_copies_of_a_key() {
        let mut multimap = Model::<u32, u32>::new(Rule::Append);
        multimap.insert(&[1, 1, 2], &[10, 11, 20]);
        assert!(multimap.clone().check_removals(&[1, 1], &[2, 2]).is_err());
        multimap.check_removals(&[1, 3, 1], &[0, 0, 2]).unwrap();
        multimap.check_len(1).unwrap();
        assert!(multimap.check_removals(&[2], &[1, 0]).is_err());
    }
}
