//! What the examples' CPU versions share: grouping rows by a u64 key on every core.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

/// A std map with a fast hash of one u64 (the default, SipHash, is built for untrusted
/// keys and is several times slower).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Mix64>>;

/// The multiply-xorshift hash behind [`FastMap`].
#[derive(Default)]
pub struct Mix64(u64);

impl Hasher for Mix64 {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = mix64(value ^ self.0);
    }
}

/// The 64-bit finalizer of MurmurHash3.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    x = (x ^ (x >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The cores this program may use.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `make(part, parts)` for every part 1..=parts of the data (tpchgen's numbering), one
/// thread a part, one part a core; the parts in order.
pub fn in_parts<T: Send>(make: impl Fn(i32, i32) -> T + Sync) -> Vec<T> {
    let parts = threads() as i32;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (1..=parts)
            .map(|part| {
                let make = &make;
                scope.spawn(move || make(part, parts))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a generator thread"))
            .collect()
    })
}

/// Milliseconds since `started`.
pub fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

/// Groups rows `0..keys.len()` by `keys[row]` on every core, folding each row into its
/// key's accumulator with `fold(accumulator, row)`. Each thread first cuts its share of
/// the rows into one part per thread (by the key's hash); then each thread folds one part
/// alone, so no map is shared or merged. Returns one map a thread (their keys disjoint)
/// and the time taken in ms.
pub fn group_by<A, F>(keys: &[u64], fold: F) -> (Vec<FastMap<u64, A>>, f64)
where
    A: Default + Send,
    F: Fn(&mut A, usize) + Sync,
{
    let started = Instant::now();
    let n = threads();
    let chunk = keys.len().div_ceil(n).max(1);
    let parts: Vec<Vec<Vec<usize>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..keys.len())
            .step_by(chunk)
            .map(|first| {
                scope.spawn(move || {
                    let rows = first..keys.len().min(first + chunk);
                    // Each part its own reserve (`vec![v; n]` would clone the capacity away).
                    let mut parts: Vec<Vec<usize>> = (0..n)
                        .map(|_| Vec::with_capacity(rows.len() / n + 16))
                        .collect();
                    for row in rows {
                        parts[part_of(keys[row], n)].push(row);
                    }
                    parts
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let fold = &fold;
    let maps = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..n)
            .map(|p| {
                let parts = &parts;
                scope.spawn(move || {
                    let size: usize = parts.iter().map(|shares| shares[p].len()).sum();
                    let mut groups =
                        FastMap::with_capacity_and_hasher(size / 2, Default::default());
                    for shares in parts {
                        for &row in &shares[p] {
                            fold(groups.entry(keys[row]).or_default(), row);
                        }
                    }
                    groups
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    (maps, ms(started))
}

fn part_of(key: u64, parts: usize) -> usize {
    (((mix64(key ^ 0x5bd1_e995) >> 32) * parts as u64) >> 32) as usize
}
