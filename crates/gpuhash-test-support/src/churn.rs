//! Exports beside batches that change the table: two threads remove and reinsert their own
//! keys in a loop, each on its own stream, while the caller's thread exports again and
//! again, through every export form. An export may or may not hold a key that comes and
//! goes, but never a pair nobody inserted, a value nobody wrote (an unwritten slot of the
//! answer), or a key twice.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use gpuhash_core::table::{Key, Pairs};

use crate::inputs::{SeededRng, adversarial_keys, value_of};
use crate::shape::{Shape, Via};

/// Threads that remove and reinsert keys while the exports run.
const CHURNERS: usize = 2;

/// Runs `rounds` rounds of exports (`export`, `export_into` and their device forms) on
/// `table`, empty at first, while two threads remove and reinsert their share of
/// `random` random keys and the adversarial ones; the other half of the keys stays put.
/// Every pair exported must be one the test inserted (its key among the keys, its value
/// the one written under it), no key twice, and the count at least the keys that stay and
/// at most all of them. The churning threads check that each removal finds every key.
pub fn exports_under_churn<T: Shape<Tag> + Sync, Tag>(
    table: &T,
    random: usize,
    rounds: usize,
) -> Result<(), String> {
    let mut keys: Vec<T::Key> = SeededRng::new(0xc4).distinct_keys(random);
    keys.extend(adversarial_keys::<T::Key>());
    keys.sort_unstable();
    keys.dedup();
    let values: Vec<T::Value> = keys.iter().map(|k| value_of(k.widen())).collect();
    table
        .insert_via(Via::Host, &keys, &values)
        .map_err(|e| format!("inserting the keys: {e}"))?;
    // Key i churns in thread i % 4 when that is below CHURNERS; the others stay.
    let share = |t: usize| -> Vec<T::Key> {
        keys.iter()
            .enumerate()
            .filter(|&(i, _)| i % 4 == t)
            .map(|(_, &k)| k)
            .collect()
    };
    let stay = (CHURNERS..4).map(|t| share(t).len()).sum::<usize>();
    let all: HashSet<T::Key> = keys.iter().copied().collect();
    let bounds = (stay, all.len());
    let churning = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let churners: Vec<_> = (0..CHURNERS)
            .map(|t| {
                let (mine, churning) = (share(t), &churning);
                scope.spawn(move || churn(table, &mine, churning))
            })
            .collect();
        let exported = export_rounds(table, rounds, &all, bounds);
        churning.store(false, Ordering::Relaxed);
        for churner in churners {
            churner
                .join()
                .map_err(|_| "a churning thread panicked".to_string())??;
        }
        exported
    })?;
    let after = table
        .export_via(Via::Host)
        .map_err(|e| format!("export after the churn: {e}"))?;
    check_pairs(&after, &all, (all.len(), all.len()))
        .map_err(|why| format!("after the churn: {why}"))
}

/// Removes `keys` and inserts them again, on a stream of this thread's, until `churning`
/// falls; every removal must find every key (no other thread touches them).
fn churn<T: Shape<Tag>, Tag>(
    table: &T,
    keys: &[T::Key],
    churning: &AtomicBool,
) -> Result<(), String> {
    let stream = table
        .device()
        .new_stream()
        .map_err(|e| format!("a churning stream: {e}"))?;
    let via = Via::Device(&stream);
    let values: Vec<T::Value> = keys.iter().map(|k| value_of(k.widen())).collect();
    while churning.load(Ordering::Relaxed) {
        let removed = table
            .remove_via(via, keys)
            .map_err(|e| format!("churning removal: {e}"))?;
        if let Some(i) = removed.iter().position(|&r| r != 1) {
            return Err(format!(
                "churning removal of {:?} answered {}, not 1",
                keys[i], removed[i]
            ));
        }
        table
            .insert_via(via, keys, &values)
            .map_err(|e| format!("churning insert: {e}"))?;
    }
    Ok(())
}

/// `rounds` rounds of every export form, each answer checked by [`check_pairs`].
fn export_rounds<T: Shape<Tag>, Tag>(
    table: &T,
    rounds: usize,
    all: &HashSet<T::Key>,
    bounds: (usize, usize),
) -> Result<(), String> {
    let stream = table
        .device()
        .new_stream()
        .map_err(|e| format!("an exporting stream: {e}"))?;
    let rooms = (all.len() + 8, all.len() + 8);
    for round in 0..rounds {
        for via in [Via::Host, Via::Device(&stream)] {
            let exported = table
                .export_via(via)
                .map_err(|e| format!("round {round}, export through {via}: {e}"))?;
            check_pairs(&exported, all, bounds)
                .map_err(|why| format!("round {round}, export through {via}: {why}"))?;
            // Slots past the count may hold pairs of a try the export ran again (real
            // pairs, but not the junk put there): only the count's front is checked.
            let into = table.export_into_via(via, rooms, false);
            let written = into
                .written
                .map_err(|e| format!("round {round}, export_into through {via}: {e}"))?;
            if written != into.pairs.len() {
                return Err(format!(
                    "round {round}, export_into through {via}: said {written}, gave {}",
                    into.pairs.len()
                ));
            }
            check_pairs(&into.pairs, all, bounds)
                .map_err(|why| format!("round {round}, export_into through {via}: {why}"))?;
        }
    }
    Ok(())
}

/// Every pair one the test inserted (key in `all`, value [`value_of`] its key), no key
/// twice, and between `bounds.0` and `bounds.1` of them.
fn check_pairs<K: Key, V: PartialEq + std::fmt::Debug + bytemuck::Pod>(
    pairs: &Pairs<K, V>,
    all: &HashSet<K>,
    (least, most): (usize, usize),
) -> Result<(), String> {
    if pairs.len() < least || pairs.len() > most {
        return Err(format!(
            "{} pairs, not between {least} and {most}",
            pairs.len()
        ));
    }
    let mut seen = HashSet::with_capacity(pairs.len());
    for &(key, value) in pairs {
        if !all.contains(&key) {
            return Err(format!("key {key:?}, never inserted"));
        }
        if value != value_of::<V>(key.widen()) {
            return Err(format!("key {key:?} with value {value:?}, never written"));
        }
        if !seen.insert(key) {
            return Err(format!("key {key:?} twice"));
        }
    }
    Ok(())
}
