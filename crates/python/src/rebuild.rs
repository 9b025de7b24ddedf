//! The compacted body as Python objects, without decoding all of it: every top-level field
//! and every message whose JSON text the engine wrote back unchanged is the caller's own
//! object (what a shallow copy shares); only what the cascade wrote anew (shortened
//! messages, summaries, notices, a changed `system`) is decoded, by one `json.loads` call
//! over all of it. The new top-level dict and message list are the caller's to change.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::errors::{NativeError, json_error};
use crate::walk::{Part, Walked};

/// Where a value of the answer comes from.
enum Source<'a, 'py> {
    /// The caller's object (its JSON text is unchanged).
    Caller(&'a Bound<'py, PyAny>),
    /// The n-th value of the batch given to `json.loads`.
    Decoded(usize),
}

/// The values to decode, as one JSON array.
struct Batch {
    json: Vec<u8>,
    count: usize,
}

impl Batch {
    fn add<'a, 'py>(&mut self, raw: &RawValue) -> Source<'a, 'py> {
        self.json.push(if self.count == 0 { b'[' } else { b',' });
        self.json.extend_from_slice(raw.get().as_bytes());
        self.count += 1;
        Source::Decoded(self.count - 1)
    }

    fn decode<'py>(mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        self.json.push(b']');
        let loads = py.import("json")?.getattr("loads")?;
        let list = loads.call1((pyo3::types::PyBytes::new(py, &self.json),))?;
        list.cast_into::<PyList>()?.iter().map(Ok).collect()
    }
}

/// The answer `out` (the engine's JSON text for `walked`'s body) as Python objects.
pub(crate) fn rebuild<'py>(
    py: Python<'py>,
    walked: &Walked<'py>,
    out: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let mut batch = Batch {
        json: Vec::with_capacity(out.len() / 2),
        count: 0,
    };
    if !walked.object {
        // A bare array stays one.
        let items: Vec<&RawValue> = serde_json::from_slice(out).map_err(json_error)?;
        let sources = match_items(walked, &items, &mut batch);
        let decoded = batch.decode(py)?;
        let values = sources.iter().map(|s| pick(s, &decoded));
        return Ok(PyList::new(py, values.collect::<PyResult<Vec<_>>>()?)?.into_any());
    }
    let (fields, items) = top_level(out, walked.items_key.as_deref())?;
    let item_sources = match_items(walked, &items, &mut batch);
    let mut sources = Vec::with_capacity(fields.len());
    for (name, raw) in &fields {
        let Some(raw) = raw else {
            sources.push(None);
            continue;
        };
        let before = walked
            .fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, p)| p);
        sources.push(Some(match before {
            Some(part) if text(walked, part) == raw.get().as_bytes() => Source::Caller(&part.value),
            _ => batch.add(raw),
        }));
    }
    let decoded = batch.decode(py)?;
    let dict = PyDict::new(py);
    for ((name, _), source) in fields.iter().zip(&sources) {
        match source {
            Some(source) => dict.set_item(name, pick(source, &decoded)?)?,
            None => {
                let values = item_sources.iter().map(|s| pick(s, &decoded));
                dict.set_item(
                    name,
                    PyList::new(py, values.collect::<PyResult<Vec<_>>>()?)?,
                )?;
            }
        }
    }
    Ok(dict.into_any())
}

fn pick<'py>(
    source: &Source<'_, 'py>,
    decoded: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    match source {
        Source::Caller(value) => Ok((*value).clone()),
        Source::Decoded(n) => decoded.get(*n).cloned().ok_or_else(|| {
            NativeError::new_err((
                "usage",
                "$".to_owned(),
                "the answer lost a value".to_owned(),
            ))
        }),
    }
}

fn text<'a>(walked: &'a Walked<'_>, part: &Part<'_>) -> &'a [u8] {
    &walked.json[part.span.clone()]
}

/// Each message of the answer: the caller's message with the same JSON text, taken in order
/// (the cascade drops, shortens and inserts messages but never reorders them), else decoded.
fn match_items<'a, 'py>(
    walked: &'a Walked<'py>,
    items: &[&RawValue],
    batch: &mut Batch,
) -> Vec<Source<'a, 'py>> {
    // Keyed by length, not by text: hashing every message costs more than comparing the
    // few of one length.
    let mut by_length: HashMap<usize, Vec<usize>> = HashMap::with_capacity(walked.items.len());
    for (n, part) in walked.items.iter().enumerate() {
        by_length.entry(part.span.len()).or_default().push(n);
    }
    let mut next = 0;
    items
        .iter()
        .map(|raw| {
            let raw_text = raw.get().as_bytes();
            let found = by_length.get(&raw_text.len()).and_then(|same| {
                same.iter()
                    .copied()
                    .find(|&n| n >= next && text(walked, &walked.items[n]) == raw_text)
            });
            match found {
                Some(n) => {
                    next = n + 1;
                    Source::Caller(&walked.items[n].value)
                }
                None => batch.add(raw),
            }
        })
        .collect()
}

/// An answer's top-level fields in order, each as its JSON text, except the message array
/// (`None` there), whose elements come second.
type TopLevel<'a> = (Vec<(String, Option<&'a RawValue>)>, Vec<&'a RawValue>);

/// Reads the answer's top level, the message array `items_key` element by element.
fn top_level<'a>(out: &'a [u8], items_key: Option<&str>) -> PyResult<TopLevel<'a>> {
    let mut de = serde_json::Deserializer::from_slice(out);
    let top = (&mut de)
        .deserialize_map(Fields { items_key })
        .map_err(json_error)?;
    de.end().map_err(json_error)?;
    Ok(top)
}

struct Fields<'k> {
    items_key: Option<&'k str>,
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = TopLevel<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::new();
        let mut items = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if self.items_key == Some(name.as_str()) {
                items = map.next_value::<Vec<&'de RawValue>>()?;
                fields.push((name, None));
            } else {
                fields.push((name, Some(map.next_value::<&'de RawValue>()?)));
            }
        }
        Ok((fields, items))
    }
}
