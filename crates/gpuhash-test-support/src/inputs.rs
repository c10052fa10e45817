//! Inputs every table's tests share: keys that stress tables, the values stored under
//! them, and a seeded random source.

use std::collections::HashSet;

use bytemuck::Pod;
use gpuhash_core::hash::fmix64;
use gpuhash_core::table::Key;

/// The key of type `K` made of the low bits of `bits` (all of them for `u64`).
pub fn key_from_bits<K: Key>(bits: u64) -> K {
    bytemuck::pod_read_unaligned(&bits.to_le_bytes()[..size_of::<K>()])
}

/// Keys that stress tables, distinct and sorted: every word a table reserves (all-ones,
/// all-ones minus 1 and 2 at 32 and 64 bits: the empty, tombstone and busy marks) and its
/// neighbours, zero and its neighbours, the top bit alone, 64-bit keys whose halves are
/// reserved 32-bit words, keys equal in their low bits (20 and 32 of them), keys equal in
/// all but their low 8 bits, and hashed keys.
pub fn adversarial_keys<K: Key>() -> Vec<K> {
    let reserved_32 = [0xffff_ffff, 0xffff_fffe, 0xffff_fffd, 0xffff_fffc, 0];
    let mut bits: Vec<u64> = Vec::new();
    for all_ones in [u64::from(u32::MAX), u64::MAX] {
        bits.extend((0..=4).map(|below| all_ones - below));
    }
    bits.extend([
        0,
        1,
        2,
        1 << 31,
        (1 << 31) - 1,
        1 << 32,
        1 << 63,
        (1 << 63) - 1,
    ]);
    for half in reserved_32 {
        bits.extend([
            half << 32,
            (half << 32) | 0x1234_5678,
            (0x1234_5678 << 32) | half,
        ]);
    }
    for i in 0..256u64 {
        bits.extend([
            (i << 20) | 0x5_5555,
            (i << 32) | 0x5555_5555,
            (u64::MAX << 8) | i,
            fmix64(i),
        ]);
    }
    let mut keys: Vec<K> = bits.into_iter().map(key_from_bits).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The one value the tests store under `key` (see [`value_in_round`]).
pub fn value_of<V: Pod>(key: u64) -> V {
    value_in_round(key, 0)
}

/// [`value_of`] each key.
pub fn values_of<K: Key, V: Pod>(keys: &[K]) -> Vec<V> {
    keys.iter().map(|k| value_of(k.widen())).collect()
}

/// A value for `key` in round `round` of a test: fixed by the two, different for other
/// rounds, of any width. Every byte has its top bit clear and bit 1 set, so neither the
/// value nor any part of it is all zeros or all ones: an unwritten slot, a zeroed buffer
/// or a torn write cannot pass for it.
pub fn value_in_round<V: Pod>(key: u64, round: u64) -> V {
    let seed = fmix64(key ^ fmix64(round.wrapping_add(0x5151)));
    let mut value = V::zeroed();
    for (i, chunk) in bytemuck::bytes_of_mut(&mut value).chunks_mut(4).enumerate() {
        let word = (fmix64(seed.wrapping_add(i as u64)) as u32 & 0x7f7f_7f7f) | 0x0202_0202;
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
    value
}

/// A deterministic random source (a Weyl sequence through MurmurHash3's finalizer), so
/// that a failing batch is made again from its seed.
#[derive(Debug, Clone)]
pub struct SeededRng {
    state: u64,
}

impl SeededRng {
    /// The source for `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: fmix64(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        fmix64(self.state)
    }

    /// `n` distinct random keys.
    pub fn distinct_keys<K: Key>(&mut self, n: usize) -> Vec<K> {
        let mut seen = HashSet::with_capacity(n);
        let mut keys = Vec::with_capacity(n);
        while keys.len() < n {
            let key = key_from_bits(self.next_u64());
            if seen.insert(key) {
                keys.push(key);
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adversarial_keys_are_distinct_and_hold_the_reserved_words<K: Key>() {
        let keys = adversarial_keys::<K>();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        for bits in [u64::MAX, u64::MAX - 1, u64::MAX - 2, 0] {
            assert!(keys.contains(&key_from_bits(bits)), "{bits:#x}");
        }
        let twins = keys.iter().filter(|k| k.widen() & 0xf_ffff == 0x5_5555);
        assert!(twins.count() >= 256, "keys equal in the low 20 bits");
    }

    #[test]
    fn adversarial_keys_of_both_widths() {
        adversarial_keys_are_distinct_and_hold_the_reserved_words::<u32>();
        adversarial_keys_are_distinct_and_hold_the_reserved_words::<u64>();
        let wide = adversarial_keys::<u64>();
        for word in [u32::MAX, u32::MAX - 1, u32::MAX - 2] {
            assert!(wide.contains(&u64::from(word)));
            assert!(wide.contains(&(u64::from(word) << 32)));
        }
        assert!(wide.len() > adversarial_keys::<u32>().len());
    }

    fn never_all_zeros_or_all_ones<V: Pod>() {
        for key in adversarial_keys::<u64>() {
            let value: V = value_of(key);
            let bytes = bytemuck::bytes_of(&value);
            assert!(bytes.iter().all(|&b| b != 0 && b != 0xff), "{key:#x}");
        }
    }

    #[test]
    fn values_are_never_all_zeros_or_all_ones_at_any_width() {
        never_all_zeros_or_all_ones::<u32>();
        never_all_zeros_or_all_ones::<u64>();
        never_all_zeros_or_all_ones::<[u32; 3]>();
        never_all_zeros_or_all_ones::<[u32; 16]>();
        never_all_zeros_or_all_ones::<u16>();
    }

    #[test]
    fn values_are_fixed_by_key_and_round() {
        assert_eq!(value_of::<u64>(7), value_of::<u64>(7));
        assert_ne!(value_of::<u64>(7), value_of::<u64>(8));
        assert_ne!(value_in_round::<u64>(7, 1), value_of::<u64>(7));
        let wide: [u32; 4] = value_of(7);
        assert_ne!(wide[0], wide[1], "words of one value differ");
    }

    #[test]
    fn a_seed_makes_the_same_distinct_keys() {
        let keys = SeededRng::new(3).distinct_keys::<u32>(10_000);
        assert_eq!(keys, SeededRng::new(3).distinct_keys::<u32>(10_000));
        assert_ne!(keys, SeededRng::new(4).distinct_keys::<u32>(10_000));
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len());
    }
}
