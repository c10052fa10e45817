//! Operations of a mixed batch and what became of each.

use bytemuck::{Pod, Zeroable};
use gpuhash_core::table::Key;

use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE};

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

/// The kind of one operation of a mixed batch on the device
/// ([`crate::SlabHashMap::apply_async`]): what [`Op::code`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Pod, Zeroable)]
#[repr(transparent)]
pub struct OpCode(u32);

impl OpCode {
    /// Insert or replace the pair.
    pub const INSERT: Self = Self(GH_OP_INSERT);
    /// Look the key up.
    pub const GET: Self = Self(GH_OP_GET);
    /// Remove the key.
    pub const REMOVE: Self = Self(GH_OP_REMOVE);
}

impl<K: Key, V: Key> Op<K, V> {
    /// The operation's kind, as [`crate::SlabHashMap::apply_async`] takes it.
    pub fn code(&self) -> OpCode {
        match self {
            Op::Insert(..) => OpCode::INSERT,
            Op::Get(_) => OpCode::GET,
            Op::Remove(_) => OpCode::REMOVE,
        }
    }

    /// The key it works on.
    pub fn key(&self) -> K {
        match *self {
            Op::Insert(key, _) | Op::Get(key) | Op::Remove(key) => key,
        }
    }

    /// The value to insert; zero for the others.
    pub fn value(&self) -> V {
        match *self {
            Op::Insert(_, value) => value,
            _ => V::zeroed(),
        }
    }

    /// The outcome of this operation from the byte [`crate::SlabHashMap::apply_async`]
    /// answered (1: took effect, 0: the key was missing) and the value it found.
    pub fn outcome(&self, done: u8, found: V) -> Outcome<V> {
        match (self, done != 0) {
            (Op::Insert(..), _) => Outcome::Inserted,
            (Op::Get(_), true) => Outcome::Found(found),
            (Op::Remove(_), true) => Outcome::Removed,
            (_, false) => Outcome::Missing,
        }
    }
}
