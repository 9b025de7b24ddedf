//! Finding a key that a JSON object repeats.
//!
//! `{"model":"a","model":"b"}` is valid JSON whose meaning parsers disagree on: serde_json
//! keeps the last value, others the first, and a body written back from either holds one
//! key where the caller sent two. The CLI writes bodies back, so it refuses such input
//! rather than guess. The check walks the text once with serde_json's own deserializer (a
//! visitor that keeps each object's keys and nothing else), so it reads JSON exactly as
//! the parser that follows does.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Longest key shown whole in a path or a message; longer ones are cut (keys come from
/// the input and may be any size).
const KEY_SHOWN: usize = 64;

/// A key that an object holds twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DuplicateKey {
    /// The JSON path of the object (`$.messages[3]`).
    pub(crate) path: String,
    /// The repeated key, as shown in a message (quoted, cut when long).
    pub(crate) key: String,
}

/// The first repeated key of `bytes`, in document order; `None` when every object's keys
/// are distinct. On text that is not JSON it reports only a repeat before the first
/// error: call it on input the parser accepted (a leading byte order mark is skipped, as
/// the parser skips it).
pub(crate) fn find(bytes: &[u8]) -> Option<DuplicateKey> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut found = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // The error only stops the walk; `found` says whether it was a repeated key.
    let _ = Walk { found: &mut found }.deserialize(&mut deserializer);
    found.map(|Found { key, mut path }| {
        path.reverse();
        DuplicateKey {
            path: std::iter::once("$".to_owned()).chain(path).collect(),
            key: quoted(&key),
        }
    })
}

/// A repeated key, and the path to its object built on the way out, innermost first.
struct Found {
    key: String,
    path: Vec<String>,
}

/// Walks one JSON value; on a repeated key, records it and stops with an error.
struct Walk<'a> {
    found: &'a mut Option<Found>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            match seq.next_element_seed(Walk {
                found: &mut *self.found,
            }) {
                Ok(Some(())) => index += 1,
                Ok(None) => return Ok(()),
                Err(error) => {
                    if let Some(found) = self.found.as_mut() {
                        found.path.push(format!("[{index}]"));
                    }
                    return Err(error);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if keys.contains(&key) {
                *self.found = Some(Found {
                    key: key.into_owned(),
                    path: Vec::new(),
                });
                return Err(de::Error::custom("duplicate key"));
            }
            let walked = map.next_value_seed(Walk {
                found: &mut *self.found,
            });
            if let Err(error) = walked {
                if let Some(found) = self.found.as_mut() {
                    found.path.push(segment(&key));
                }
                return Err(error);
            }
            keys.insert(key);
        }
        Ok(())
    }
}

/// An object key, borrowed from the input when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
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
        None => serde_json::Value::from(key).to_string(),
        Some((cut, _)) => {
            let quoted = serde_json::Value::from(&key[..cut]).to_string();
            format!("{}…\"", &quoted[..quoted.len() - 1])
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    fn at(json: &str) -> Option<(String, String)> {
        find(json.as_bytes()).map(|d| (d.path, d.key))
    }

    #[test]
    fn finds_the_first_repeated_key_with_the_path_of_its_object() {
        assert_eq!(
            at(r#"{"model":"a","model":"b"}"#),
            Some(("$".into(), r#""model""#.into()))
        );
        let body = r#"{"model":"m","messages":[{"role":"user","content":"x"},
            {"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}"#;
        assert_eq!(
            at(body),
            Some(("$.messages[1].content[0]".into(), r#""text""#.into()))
        );
        assert_eq!(
            at(r#"[{"a b":{"k":1,"k":2}}]"#),
            Some((r#"$[0]["a b"]"#.into(), r#""k""#.into()))
        );
    }

    #[test]
    fn tells_keys_apart_as_the_parser_reads_them() {
        // The same key written with an escape is the same key.
        assert_eq!(
            at(r#"{"model":1,"mod\u0065l":2}"#),
            Some(("$".into(), r#""model""#.into()))
        );
        // The same key in sibling objects, or in an object and its child, is no repeat.
        assert_eq!(at(r#"[{"a":1},{"a":2}]"#), None);
        assert_eq!(
            at(r#"{"a":{"a":{"a":1}}, "b": [1.5, 1e400, null, true]}"#),
            None
        );
    }

    #[test]
    fn skips_a_byte_order_mark_and_cuts_long_keys() {
        assert_eq!(
            at("\u{feff}{\"a\":1,\"a\":2}"),
            Some(("$".into(), r#""a""#.into()))
        );
        assert_eq!(at(""), None);
        let long = "k".repeat(1000);
        let (_, key) = at(&format!(r#"{{"{long}":1,"{long}":2}}"#)).unwrap();
        assert_eq!(key, format!("\"{}…\"", "k".repeat(KEY_SHOWN)));
    }
}
