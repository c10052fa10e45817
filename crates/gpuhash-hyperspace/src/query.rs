//! Queries (conjunctions of field equalities) and their answers, as compressed rows.

use std::ops::Range;

use gpuhash_core::DeviceBuffer;

use crate::shape::{Field, FieldSet};
use crate::tuples::{DeviceTuples, Tuple, Tuples};
use crate::{HyperspaceError, Result};

/// A conjunction of equalities, `A1 = x and A3 = y`: the tuples whose every named field
/// holds its value. A query names each field at most once, at least one field, and may
/// name the key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Query {
    predicates: Vec<(Field, u32)>,
}

impl Query {
    /// The tuples whose `field` holds `value`.
    pub fn new(field: Field, value: u32) -> Self {
        Self {
            predicates: vec![(field, value)],
        }
    }

    /// The tuples whose attribute `index` (0-based) holds `value`.
    pub fn attribute(index: u8, value: u32) -> Self {
        Self::new(Field::Attribute(index), value)
    }

    /// This query, and `field` holding `value` too.
    pub fn and(mut self, field: Field, value: u32) -> Self {
        self.predicates.push((field, value));
        self
    }

    /// The equalities, in the order given.
    pub fn predicates(&self) -> &[(Field, u32)] {
        &self.predicates
    }

    /// The fields the query names.
    pub fn fields(&self) -> FieldSet {
        FieldSet::of(self.predicates.iter().map(|&(field, _)| field))
    }

    /// Whether `tuple` meets every equality.
    pub fn matches(&self, tuple: &Tuple) -> bool {
        self.predicates.iter().all(|&(field, value)| match field {
            Field::Key => tuple.key == value,
            Field::Attribute(a) => tuple.attributes.get(usize::from(a)) == Some(&value),
        })
    }
}

/// Checks that every query names at least one field, each once, and only fields of an
/// index of `p` attributes.
pub(crate) fn check_queries(p: usize, queries: &[Query]) -> Result<()> {
    for (index, query) in queries.iter().enumerate() {
        let bad = |field| Err(HyperspaceError::BadQuery { index, field });
        if query.predicates.is_empty() {
            return bad(None);
        }
        if query.fields().len() as usize != query.predicates.len() {
            return bad(None);
        }
        if let Some(&(field, _)) = query
            .predicates
            .iter()
            .find(|(f, _)| matches!(f, Field::Attribute(a) if usize::from(*a) >= p))
        {
            return bad(Some(field));
        }
    }
    Ok(())
}

/// The tuples each query of a batch matched, as compressed rows: query q's matches are
/// tuples `offsets[q]..offsets[q + 1]`, in no particular order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matches {
    /// One more than the queries; the last is the number of matches.
    pub offsets: Vec<u64>,
    /// Every query's matches, laid end to end in query order.
    pub tuples: Tuples,
}

impl Matches {
    /// Where query q's matches lie in `tuples`.
    pub fn range(&self, q: usize) -> Range<usize> {
        self.offsets[q] as usize..self.offsets[q + 1] as usize
    }

    /// Query q's matches.
    pub fn of(&self, q: usize) -> Vec<Tuple> {
        self.range(q).map(|i| self.tuples.tuple(i)).collect()
    }
}

/// [`Matches`] on the device.
#[derive(Debug)]
pub struct DeviceMatches {
    /// One more than the queries; the last is the number of matches.
    pub offsets: DeviceBuffer<u64>,
    /// Every query's matches, laid end to end in query order.
    pub tuples: DeviceTuples,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_conjunctions_of_distinct_known_fields() {
        let ok = Query::attribute(0, 5).and(Field::Attribute(2), 7);
        assert!(check_queries(3, std::slice::from_ref(&ok)).is_ok());
        assert!(check_queries(2, &[ok]).is_err());
        let twice = Query::attribute(1, 5).and(Field::Attribute(1), 6);
        assert!(check_queries(3, &[twice]).is_err());
        assert!(check_queries(3, &[Query::default()]).is_err());
        assert!(check_queries(3, &[Query::new(Field::Key, 9)]).is_ok());
    }

    #[test]
    fn a_query_matches_tuples_meeting_every_equality() {
        let tuple = Tuple {
            key: 1,
            attributes: vec![10, 20],
            value: 3,
        };
        assert!(Query::attribute(1, 20).matches(&tuple));
        assert!(Query::attribute(0, 10).and(Field::Key, 1).matches(&tuple));
        assert!(
            !Query::attribute(0, 10)
                .and(Field::Attribute(1), 21)
                .matches(&tuple)
        );
    }
}
