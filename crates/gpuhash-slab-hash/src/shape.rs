//! What slabs hold: the table kind and the widths of keys and values.

use gpuhash_core::table::Key;
use gpuhash_slab_alloc::layouts::GH_SLAB_WORDS;

use crate::layouts::{GH_SLAB_KEYS, GH_TABLE_MAP, GH_TABLE_MULTIMAP, GH_TABLE_SET};

/// Which table the slabs make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Map,
    Set,
    MultiMap,
}

impl Kind {
    /// The kind as the kernels take it.
    pub(crate) fn code(self) -> u32 {
        match self {
            Kind::Map => GH_TABLE_MAP,
            Kind::Set => GH_TABLE_SET,
            Kind::MultiMap => GH_TABLE_MULTIMAP,
        }
    }

    /// The table's name in its images.
    pub(crate) fn image_name(self) -> &'static str {
        match self {
            Kind::Map => "gpuhash-slab-hash/map",
            Kind::Set => "gpuhash-slab-hash/set",
            Kind::MultiMap => "gpuhash-slab-hash/multimap",
        }
    }
}

/// What a slab holds: the table kind and the widths of keys and values (0 for sets), in
/// 32-bit words, as the kernels are instantiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub kind: Kind,
    pub key_words: u32,
    pub value_words: u32,
}

impl Shape {
    pub(crate) fn of<K: Key, V: Key>(kind: Kind) -> Self {
        let value_words = if kind == Kind::Set { 0 } else { V::WORDS };
        Self {
            kind,
            key_words: K::WORDS,
            value_words,
        }
    }

    /// Lanes an entry takes: 3-word entries are padded to 4, so that 64-bit words stay
    /// 8-byte aligned.
    fn entry_lanes(self) -> u32 {
        match self.key_words + self.value_words {
            3 => 4,
            words => words,
        }
    }

    /// Entries one slab holds.
    pub(crate) fn per_slab(self) -> u64 {
        u64::from(GH_SLAB_KEYS / self.entry_lanes())
    }

    /// Entries in the first half of a slab (its first 64 bytes).
    pub(crate) fn in_first_half(self) -> u64 {
        u64::from(GH_SLAB_WORDS / 2 / self.entry_lanes()).min(self.per_slab())
    }

    /// Bytes of one entry's key and value.
    pub(crate) fn entry_bytes(self) -> u64 {
        4 * u64::from(self.key_words + self.value_words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_half_holds_the_entries_of_its_64_bytes() {
        let half = |kind, key_words, value_words| {
            Shape {
                kind,
                key_words,
                value_words,
            }
            .in_first_half()
        };
        assert_eq!(half(Kind::Map, 1, 1), 8);
        assert_eq!(half(Kind::Map, 1, 2), 4); // 3 words padded to 4
        assert_eq!(half(Kind::Map, 2, 2), 4);
        assert_eq!(half(Kind::Set, 1, 0), 16);
        assert_eq!(half(Kind::Set, 2, 0), 8);
        for (kind, k, v) in [(Kind::Map, 1, 1), (Kind::MultiMap, 2, 1), (Kind::Set, 1, 0)] {
            let shape = Shape {
                kind,
                key_words: k,
                value_words: v,
            };
            assert!(shape.in_first_half() * 2 >= shape.per_slab());
        }
    }
}
