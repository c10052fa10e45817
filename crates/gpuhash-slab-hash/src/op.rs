//! Operations of a mixed batch and what became of each.

use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_DONE};

/// One operation of a mixed batch ([`crate::SlabHashMap::apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace the pair.
    Insert(u32, u32),
    /// Look the key up.
    Get(u32),
    /// Remove the key.
    Remove(u32),
}

/// What became of one [`Op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The pair is stored.
    Inserted,
    /// The key's value when the lookup ran.
    Found(u32),
    /// The key was removed.
    Removed,
    /// The key was not there (a get or a remove).
    Missing,
}

impl Op {
    /// (operation code, key, value) as the kernels take them.
    pub(crate) fn encode(&self) -> (u32, u32, u32) {
        match *self {
            Op::Insert(key, value) => (GH_OP_INSERT, key, value),
            Op::Get(key) => (GH_OP_GET, key, 0),
            Op::Remove(key) => (GH_OP_REMOVE, key, 0),
        }
    }

    /// The outcome of this operation from the kernel's status and result.
    pub(crate) fn outcome(&self, status: u32, result: u32) -> Outcome {
        match (self, status == GH_STATUS_DONE) {
            (Op::Insert(..), _) => Outcome::Inserted,
            (Op::Get(_), true) => Outcome::Found(result),
            (Op::Remove(_), true) => Outcome::Removed,
            (_, false) => Outcome::Missing,
        }
    }
}
