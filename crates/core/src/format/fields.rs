//! The two pieces every wire writer shares: a wire object's keys written in their original
//! order, and a sequence written from an iterator. The Chat/Anthropic writer (ordered.rs)
//! and the Responses writer (responses/write.rs) both use them.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// Writes `fields` in order, asking `known` to write the model's keys (at most 64).
pub(super) fn write_fields<M: SerializeMap>(
    map: &mut M,
    fields: &Map<String, Value>,
    keys: &[&str],
    strip_pins: bool,
    mut known: impl FnMut(&str, &mut M) -> Result<(), M::Error>,
) -> Result<(), M::Error> {
    // Which of `keys` were on the wire, noted while writing: no second lookup (each one
    // would hash the key) for every message, call and part of a long history.
    let mut written = 0u64;
    for (key, value) in fields {
        if let Some(i) = keys.iter().position(|k| *k == key.as_str()) {
            written |= 1 << i;
            known(key, map)?;
        } else if !(strip_pins && key == "_pin") {
            map.serialize_entry(key, value)?;
        }
    }
    for (i, key) in keys.iter().enumerate() {
        if written & (1 << i) == 0 {
            known(key, map)?;
        }
    }
    Ok(())
}

/// A sequence written from an iterator that can be cloned (so `Serialize` takes `&self`).
pub(super) struct Seq<I>(pub I);

impl<I, T> Serialize for Seq<I>
where
    I: Iterator<Item = T> + Clone,
    T: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for item in self.0.clone() {
            seq.serialize_element(&item)?;
        }
        seq.end()
    }
}
