//! Batch sequences: the steps a check drives a table and its model through, their random
//! generation for quickcheck, and the seeded search for a failing sequence.

use gpuhash_core::table::Key;
use quickcheck::{Arbitrary, Gen, empty_shrinker};

use crate::inputs::{key_from_bits, value_in_round};

/// One call of a check, on a batch of keys.
#[derive(Debug, Clone)]
pub(crate) enum Step<K> {
    /// Insert the keys, copy `i` with `value_in_round(key, round + i)`: copies of a key in
    /// one batch carry different values.
    Insert(Vec<K>, u64),
    /// Look every value of each key up (`get`, `contains`, `get_all`).
    Lookup(Vec<K>),
    /// Ask `contains` (maps, sets) or `count` (multimaps).
    Count(Vec<K>),
    /// Remove the keys (`remove`, `remove_all`).
    Remove(Vec<K>),
    /// Ask the number of entries.
    Len,
    /// Export every pair.
    Export,
    /// Remove everything.
    Clear,
}

/// Random steps draw their keys from this many (so batches repeat, hit and collide).
const KEY_RANGE: u16 = 512;

/// The key a random step's raw `u16` stands for: `raw % 512 - 3`, wrapping, so that the
/// range holds zero and the three highest words (a table's reserved words).
pub(crate) fn small_key<K: Key>(raw: &u16) -> K {
    key_from_bits(u64::from(raw % KEY_RANGE).wrapping_sub(3))
}

/// The values an insert step stores: copy `i` gets round `round + i`.
pub(crate) fn batch_values<K: Key, V: bytemuck::Pod>(keys: &[K], round: u64) -> Vec<V> {
    keys.iter()
        .zip(0..)
        .map(|(key, i)| value_in_round(key.widen(), round.wrapping_add(i)))
        .collect()
}

impl<K> Step<K> {
    /// The same step on other keys.
    pub(crate) fn map_keys<L>(&self, key: impl Fn(&K) -> L) -> Step<L> {
        let keys = |keys: &[K]| keys.iter().map(&key).collect();
        match self {
            Step::Insert(k, round) => Step::Insert(keys(k), *round),
            Step::Lookup(k) => Step::Lookup(keys(k)),
            Step::Count(k) => Step::Count(keys(k)),
            Step::Remove(k) => Step::Remove(keys(k)),
            Step::Len => Step::Len,
            Step::Export => Step::Export,
            Step::Clear => Step::Clear,
        }
    }

    /// The step in a few words, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Step::Insert(k, round) => format!("insert of {} keys (round {round})", k.len()),
            Step::Lookup(k) => format!("lookup of {} keys", k.len()),
            Step::Count(k) => format!("count of {} keys", k.len()),
            Step::Remove(k) => format!("removal of {} keys", k.len()),
            Step::Len => "len".into(),
            Step::Export => "export".into(),
            Step::Clear => "clear".into(),
        }
    }
}

impl Arbitrary for Step<u16> {
    fn arbitrary(g: &mut Gen) -> Self {
        // One batch in ten is empty; the others have up to `g.size()` keys.
        let keys = if u8::arbitrary(g) % 10 == 0 {
            Vec::new()
        } else {
            Vec::arbitrary(g)
        };
        match u8::arbitrary(g) % 40 {
            0..=13 => Step::Insert(keys, u64::arbitrary(g)),
            14..=19 => Step::Lookup(keys),
            20..=24 => Step::Count(keys),
            25..=32 => Step::Remove(keys),
            33..=35 => Step::Len,
            36..=38 => Step::Export,
            _ => Step::Clear,
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        match self.clone() {
            Step::Insert(k, round) => Box::new(k.shrink().map(move |k| Step::Insert(k, round))),
            Step::Lookup(k) => Box::new(k.shrink().map(Step::Lookup)),
            Step::Count(k) => Box::new(k.shrink().map(Step::Count)),
            Step::Remove(k) => Box::new(k.shrink().map(Step::Remove)),
            Step::Len | Step::Export | Step::Clear => empty_shrinker(),
        }
    }
}

/// Most runs of a property spent shrinking one failure.
const SHRINK_RUNS: usize = 400;

/// Runs `property` on `cases` random inputs of `size`, made from `seed` (so a failure
/// comes back on the next run); on a failure, shrinks the input while a smaller one still
/// fails, and returns it with its failure.
pub(crate) fn find_failure<A: Arbitrary>(
    seed: u64,
    cases: usize,
    size: usize,
    property: impl Fn(&A) -> Result<(), String>,
) -> Option<(A, String)> {
    let mut g = Gen::from_size_and_seed(size, seed);
    let failing = |input: A| property(&input).err().map(|why| (input, why));
    let (mut input, mut why) = (0..cases).find_map(|_| failing(A::arbitrary(&mut g)))?;
    let mut runs = 0;
    while let Some(smaller) = input
        .shrink()
        .take_while(|_| {
            runs += 1;
            runs <= SHRINK_RUNS
        })
        .find_map(failing)
    {
        (input, why) = smaller;
    }
    Some((input, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_shrinks_to_a_smallest_input() {
        let property = |v: &Vec<u32>| match v.iter().find(|&&x| x >= 100) {
            Some(x) => Err(format!("{x} is too large")),
            None => Ok(()),
        };
        let (input, why) = find_failure(1, 100, 50, property).expect("a failing input");
        assert_eq!(input, vec![100]);
        assert_eq!(why, "100 is too large");
        assert!(find_failure(1, 100, 50, |_: &Vec<u8>| Ok(())).is_none());
    }

    #[test]
    fn random_steps_cover_every_kind_and_empty_batches() {
        let mut g = Gen::from_size_and_seed(50, 2);
        let steps: Vec<Step<u16>> = (0..2000).map(|_| Step::arbitrary(&mut g)).collect();
        for kind in [
            "insert", "lookup", "count", "removal", "len", "export", "clear",
        ] {
            assert!(
                steps.iter().any(|s| s.describe().starts_with(kind)),
                "{kind}"
            );
        }
        assert!(steps.iter().any(|s| s.describe().contains(" 0 keys")));
    }

    #[test]
    fn small_keys_collide_and_reach_the_reserved_words() {
        let keys: Vec<u32> = (0..KEY_RANGE).map(|raw| small_key(&raw)).collect();
        for word in [0, u32::MAX, u32::MAX - 1, u32::MAX - 2] {
            assert!(keys.contains(&word), "{word:#x}");
        }
        assert_eq!(small_key::<u64>(&KEY_RANGE), u64::MAX - 2);
    }

    #[test]
    fn copies_of_a_key_in_one_batch_get_different_values() {
        let values: Vec<u64> = batch_values(&[5u32, 5, 5], 9);
        assert!(values[0] != values[1] && values[1] != values[2] && values[0] != values[2]);
        assert_eq!(values, batch_values(&[5u32, 5, 5], 9));
    }
}
