//! The fast path's scan of a body: its top-level keys, and its messages borrowed raw (one
//! validating pass, no allocation per string).

use context_cascade::Format;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The body's top-level keys, the messages (a Responses body: its input items) borrowed raw.
pub(super) struct Scan<'a> {
    pub(super) messages: Vec<&'a RawValue>,
    pub(super) rest: Vec<(String, &'a RawValue)>,
    /// How many of `rest` came before the messages (the envelope keeps the key's place).
    pub(super) messages_at: usize,
}

impl<'a> Scan<'a> {
    /// Scans `bytes` as a request of `format`: its messages under `messages`, or for the
    /// Responses API its items under `input` (an `input` string is left to the slow path).
    pub(super) fn read(format: Format, bytes: &'a [u8]) -> Option<Self> {
        let field = match format {
            Format::Responses => "input",
            _ => "messages",
        };
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let scan = ScanSeed { field }.deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        Some(scan)
    }
}

/// Reads a [`Scan`] whose messages are under `field`.
struct ScanSeed {
    field: &'static str,
}

impl<'de> DeserializeSeed<'de> for ScanSeed {
    type Value = Scan<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Scan<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ScanSeed {
    type Value = Scan<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a request object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scan<'de>, A::Error> {
        let mut messages = None;
        let mut rest = Vec::new();
        let mut messages_at = 0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.field && messages.is_none() {
                messages_at = rest.len();
                messages = Some(map.next_value::<Vec<&'de RawValue>>()?);
            } else {
                rest.push((key.into_owned(), map.next_value::<&'de RawValue>()?));
            }
        }
        let messages = messages.ok_or_else(|| serde::de::Error::missing_field(self.field))?;
        Ok(Scan {
            messages,
            rest,
            messages_at,
        })
    }
}
