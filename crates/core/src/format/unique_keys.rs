//! JSON read into a [`Value`], refusing an object that repeats a key.
//!
//! `{"model":"a","model":"b"}` is valid JSON whose meaning parsers disagree on: serde_json
//! keeps the last value, others the first, and a body written back from either holds one
//! key where the caller sent two. A program that writes bodies back (the `cascade` CLI)
//! refuses such input rather than guess. The check is made while the value is built, by
//! serde_json's own parser (a visitor that builds the same [`Value`] serde_json builds and
//! notices when an object already holds a key): one pass over the text, where a separate
//! walk cost as much again as the parse.
//!
//! One difference: where serde_json's feature `raw_value` is on (a program that links the
//! proxy), its own `Value` reads an object whose first key is serde_json's private raw-value
//! token as embedded JSON text; this reads it as the object it is.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// The key under which serde_json (feature `arbitrary_precision`) hands a number to a
/// visitor: a map of one entry whose value is the number as written.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";
/// Longest key shown whole in a path or a message; longer ones are cut (keys come from
/// the input and may be any size).
const KEY_SHOWN: usize = 64;

/// Why [`from_slice`] gave no value.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The text is not JSON (serde_json's error, with its line and column).
    Json(serde_json::Error),
    /// An object repeats a key: the object's JSON path (`$.messages[3]`) and the key as
    /// shown in a message (quoted, cut when long). The first repeat in document order.
    RepeatedKey { path: String, key: String },
}

/// Parses `bytes` as serde_json does ([`serde_json::from_slice`]), refusing an object that
/// repeats a key. Text that is not JSON is reported as such even when a repeat comes
/// before its error.
pub(crate) fn from_slice(bytes: &[u8]) -> Result<Value, Refused> {
    let mut found = None;
    // As `format::read_json`: UTF-8 checked once over the whole text, or bytes for the error.
    let parsed = match super::utf8(bytes) {
        Some(text) => build(serde_json::Deserializer::from_str(text), &mut found),
        None => build(serde_json::Deserializer::from_slice(bytes), &mut found),
    };
    match (parsed, found) {
        (Ok(value), _) => Ok(value),
        (Err(error), None) => Err(Refused::Json(error)),
        // The parse stopped at the repeat: the rest of the text may not be JSON, which is
        // the first thing to say (only bodies with a repeat are read a second time).
        (Err(_), Some(Found { key, mut path })) => {
            if let Err(error) = serde_json::from_slice::<de::IgnoredAny>(bytes) {
                return Err(Refused::Json(error));
            }
            path.reverse();
            Err(Refused::RepeatedKey {
                path: std::iter::once("$".to_owned()).chain(path).collect(),
                key: quoted(&key),
            })
        }
    }
}

/// The value `deserializer` reads, the whole text read.
fn build<'de, R: serde_json::de::Read<'de>>(
    mut deserializer: serde_json::Deserializer<R>,
    found: &mut Option<Found>,
) -> Result<Value, serde_json::Error> {
    let value = Build { found }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// A repeated key, and the path to its object built on the way out, innermost first.
struct Found {
    key: String,
    path: Vec<String>,
}

/// Builds one JSON value; on a repeated key, records it and stops with an error.
struct Build<'a> {
    found: &'a mut Option<Found>,
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }
    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let found = &mut *self.found;
            match seq.next_element_seed(Build { found }) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(error) => {
                    if let Some(found) = self.found.as_mut() {
                        found.path.push(format!("[{}]", items.len()));
                    }
                    return Err(error);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.is_empty() && key == NUMBER_TOKEN {
                // A number, as written: serde_json's own `Value` keeps it so.
                let written: String = map.next_value()?;
                return Number::from_str(&written)
                    .map(Value::Number)
                    .map_err(de::Error::custom);
            }
            match object.entry(key) {
                Entry::Occupied(entry) => {
                    *self.found = Some(Found {
                        key: entry.key().clone(),
                        path: Vec::new(),
                    });
                    return Err(de::Error::custom("repeated key"));
                }
                Entry::Vacant(entry) => {
                    let found = &mut *self.found;
                    match map.next_value_seed(Build { found }) {
                        Ok(value) => {
                            entry.insert(value);
                        }
                        Err(error) => {
                            if let Some(found) = self.found.as_mut() {
                                found.path.push(segment(entry.key()));
                            }
                            return Err(error);
                        }
                    }
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// The path segment of a key: `.name` for a plain identifier, `["any key"]` otherwise.
fn segment(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.len() <= KEY_SHOWN
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!(".{key}")
    } else {
        format!("[{}]", quoted(key))
    }
}

/// A key as a JSON string, cut after [`KEY_SHOWN`] characters (`"abc…"`).
fn quoted(key: &str) -> String {
    match key.char_indices().nth(KEY_SHOWN) {
        None => Value::from(key).to_string(),
        Some((cut, _)) => {
            let quoted = Value::from(&key[..cut]).to_string();
            format!("{}…\"", &quoted[..quoted.len() - 1])
        }
    }
}

#[cfg(test)]
mod tests;
