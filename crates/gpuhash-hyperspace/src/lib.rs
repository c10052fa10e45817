//! # gpuhash-hyperspace
//!
//! GHSH hyperspace hashing on the GPU (docs/papers.md): tuples `(key, A1..Ap, value)`
//! searched by key or by any attribute. This crate is under construction; [`shape`] holds the
//! geometry its parts share.
//!
//! ## Options
#![doc = document_features::document_features!()]

pub mod cost;
pub mod history;
pub mod regroup;
pub mod shape;
