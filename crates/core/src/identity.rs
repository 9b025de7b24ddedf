//! The identity of a message: what everything that compares messages by hash compares.
//!
//! A memo of what a message costs, a record of what was sent last time, a check that a
//! request extends the previous one: each needs a short, stable stand-in for a message.
//! [`MessageId`] is that stand-in, one hash function (xxh3-128) over one canonical form,
//! so that two parts of the project never disagree on whether two messages are the same.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use serde_json::{Map, Value};
use xxhash_rust::xxh3::Xxh3;

use crate::conversation::{Block, Message, Opaque, Shape};

/// THE identity of a message, for comparing messages without keeping them: xxh3-128 over
/// the message's canonical bytes. Two constructors, for the two forms a message comes in;
/// compare only ids made the same way:
///
/// * [`MessageId::of`]: a parsed [`Message`], over everything its equality compares (role,
///   shape, pin, every block and wire field; not the cached counts, nor a tool result's
///   tool name, which is resolved from its call and not sent). Equal messages have equal
///   ids.
/// * [`MessageId::of_bytes`]: a message as its JSON text on the wire (the client's bytes
///   for one message), for a caller that does not parse it.
///
/// Written as 32 lowercase hex digits (`Display`, `FromStr`, serde), for storage.
///
/// ```
/// use context_cascade::{Message, MessageId, Role};
///
/// let a = Message::text(Role::User, "fix the build");
/// assert_eq!(MessageId::of(&a), MessageId::of(&a.clone()));
/// assert_ne!(MessageId::of(&a), MessageId::of(&Message::text(Role::User, "fix the tests")));
/// let id = MessageId::of_bytes(br#"{"role":"user","content":"hi"}"#);
/// assert_eq!(id.to_string().parse::<MessageId>(), Ok(id));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(u128);

impl MessageId {
    /// The identity of a parsed message.
    pub fn of(message: &Message) -> MessageId {
        let mut bytes = Canon::new();
        put_str(&mut bytes, message.role().as_str());
        bytes.extend_from_slice(&[shape_tag(message.shape()), u8::from(message.is_pinned())]);
        put_blocks(&mut bytes, message.blocks());
        put_fields(&mut bytes, message.fields());
        MessageId(bytes.finish())
    }

    /// The identity of a message's wire bytes (its JSON text as sent).
    pub fn of_bytes(bytes: &[u8]) -> MessageId {
        MessageId(xxhash_rust::xxh3::xxh3_128(bytes))
    }

    /// The 128 bits.
    pub fn as_u128(self) -> u128 {
        self.0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Why a text is not a [`MessageId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a message id is 32 hex digits, not {0:?}")]
pub struct BadMessageId(String);

impl FromStr for MessageId {
    type Err = BadMessageId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit());
        (digits.then(|| u128::from_str_radix(text, 16).ok()))
            .flatten()
            .map(MessageId)
            .ok_or_else(|| BadMessageId(text.chars().take(40).collect()))
    }
}

impl serde::Serialize for MessageId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for MessageId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The canonical bytes of a message, hashed as they are written. A message is many short
/// pieces (separators, keys, ids) and a few long ones (texts, outputs): the short ones are
/// gathered before they reach the hasher, whose every update has a fixed cost (fed one by
/// one they took longer than hashing the long ones).
struct Canon {
    hasher: Xxh3,
    short: [u8; 256],
    len: usize,
}

impl Canon {
    fn new() -> Self {
        Canon {
            hasher: Xxh3::new(),
            short: [0; 256],
            len: 0,
        }
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > self.short.len() {
            self.hasher.update(&self.short[..self.len]);
            self.len = 0;
        }
        if bytes.len() > self.short.len() / 2 {
            self.hasher.update(bytes);
        } else {
            self.short[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        }
    }

    fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    fn finish(mut self) -> u128 {
        self.hasher.update(&self.short[..self.len]);
        self.hasher.digest128()
    }
}

/// Feeds formatted text (a JSON value's) to the canonical bytes without building a string.
struct CanonWriter<'a>(&'a mut Canon);

impl fmt::Write for CanonWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// A string, then a separator no JSON text or UTF-8 string contains.
fn put_str(bytes: &mut Canon, s: &str) {
    bytes.extend_from_slice(s.as_bytes());
    bytes.extend_from_slice(&[0xff]);
}

fn put_value(bytes: &mut Canon, value: &Value) {
    match value {
        // Strings (tool arguments, mostly) go in as they are; anything else as its JSON text.
        Value::String(s) => {
            bytes.extend_from_slice(b"s");
            put_str(bytes, s);
        }
        // The placeholders of known keys: their JSON text without a formatter.
        Value::Null => bytes.extend_from_slice(b"null\xff"),
        Value::Bool(true) => bytes.extend_from_slice(b"true\xff"),
        Value::Bool(false) => bytes.extend_from_slice(b"false\xff"),
        other => {
            let _ = write!(CanonWriter(bytes), "{other}");
            bytes.extend_from_slice(&[0xff]);
        }
    }
}

fn put_fields(bytes: &mut Canon, fields: &Map<String, Value>) {
    for (key, value) in fields {
        put_str(bytes, key);
        put_value(bytes, value);
    }
    bytes.extend_from_slice(&[0xfd]);
}

fn put_blocks(bytes: &mut Canon, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Text(text) => {
                bytes.extend_from_slice(&[1]);
                put_str(bytes, &text.text);
                put_fields(bytes, &text.fields);
            }
            Block::ToolCall(call) => {
                bytes.extend_from_slice(&[2, u8::from(call.legacy)]);
                put_str(bytes, &call.id);
                put_str(bytes, &call.name);
                put_value(bytes, &call.arguments);
                put_fields(bytes, &call.fields);
                put_fields(bytes, &call.function_fields);
            }
            Block::ToolResult(result) => {
                bytes.extend_from_slice(&[3]);
                put_str(bytes, &result.call_id);
                put_blocks(bytes, &result.content);
                bytes.push(shape_tag(result.shape));
                put_fields(bytes, &result.fields);
            }
            Block::Binary(opaque) => put_opaque(bytes, 4, opaque),
            Block::Thinking(opaque) => put_opaque(bytes, 5, opaque),
            Block::Other(opaque) => put_opaque(bytes, 6, opaque),
        }
    }
    bytes.extend_from_slice(&[0xfc]);
}

/// How content was written on the wire, as one byte.
fn shape_tag(shape: Shape) -> u8 {
    match shape {
        Shape::String => 1,
        Shape::Parts => 2,
        Shape::Null => 3,
        Shape::Absent => 4,
    }
}

fn put_opaque(bytes: &mut Canon, tag: u8, opaque: &Opaque) {
    bytes.extend_from_slice(&[tag]);
    put_value(bytes, &opaque.raw);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse;

    fn messages(list: Value) -> Vec<Message> {
        let body = serde_json::json!({"model": "m", "messages": list});
        parse(body.to_string().as_bytes(), None)
            .expect("a valid body")
            .messages
    }

    #[test]
    fn equal_messages_have_equal_ids_and_any_difference_shows() {
        let list = serde_json::json!([
            {"role": "user", "content": "read a.rs"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
                "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "fn main() {}"},
            {"role": "tool", "tool_call_id": "2", "content": "fn main() {}"},
            {"role": "user", "content": "read a.rs", "name": "someone"},
            {"role": "system", "content": "read a.rs"},
        ]);
        let a = messages(list.clone());
        let b = messages(list);
        let ids: Vec<MessageId> = a.iter().map(MessageId::of).collect();
        assert_eq!(ids, b.iter().map(MessageId::of).collect::<Vec<_>>());
        for (i, x) in ids.iter().enumerate() {
            for (j, y) in ids.iter().enumerate() {
                assert_eq!(x == y, a[i] == a[j], "messages {i} and {j}");
            }
        }
        let mut pinned = a[0].clone();
        pinned.pin();
        assert_ne!(MessageId::of(&pinned), ids[0]);
    }

    #[test]
    fn an_id_reads_back_from_its_text_and_nothing_else_does() {
        let id = MessageId::of_bytes(b"{}");
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse(), Ok(id));
        let json = serde_json::to_string(&id).expect("serializes");
        assert_eq!(serde_json::from_str::<MessageId>(&json).ok(), Some(id));
        assert!("xyz".parse::<MessageId>().is_err());
        assert!(format!("+{}", &text[1..]).parse::<MessageId>().is_err());
    }
}
