//! Operations of a mixed batch and what became of each.

use crate::SlabWord;
use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_DONE};

/// One operation of a mixed batch ([`crate::SlabHashMap::apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<K = u32, V = u32> {
    /// Insert or replace the pair.
    Insert(K, V),
    /// Look the key up.
    Get(K),
    /// Remove the key.
    Remove(K),
}

/// What became of one [`Op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<V = u32> {
    /// The pair is stored.
    Inserted,
    /// The key's value when the lookup ran.
    Found(V),
    /// The key was removed.
    Removed,
    /// The key was not there (a get or a remove).
    Missing,
}

impl<K: SlabWord, V: SlabWord> Op<K, V> {
    /// The operation code the kernels take.
    pub(crate) fn code(&self) -> u32 {
        match self {
            Op::Insert(..) => GH_OP_INSERT,
            Op::Get(_) => GH_OP_GET,
            Op::Remove(_) => GH_OP_REMOVE,
        }
    }

    pub(crate) fn key(&self) -> K {
        match *self {
            Op::Insert(key, _) | Op::Get(key) | Op::Remove(key) => key,
        }
    }

    /// The value to insert; zero for the others.
    pub(crate) fn value(&self) -> V {
        match *self {
            Op::Insert(_, value) => value,
            _ => V::zeroed(),
        }
    }

    /// The outcome of this operation from the kernel's status and result.
    pub(crate) fn outcome(&self, status: u32, result: V) -> Outcome<V> {
        match (self, status == GH_STATUS_DONE) {
            (Op::Insert(..), _) => Outcome::Inserted,
            (Op::Get(_), true) => Outcome::Found(result),
            (Op::Remove(_), true) => Outcome::Removed,
            (_, false) => Outcome::Missing,
        }
    }
}
