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

use crate::conversation::{Block, Message, Opaque};

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
        let mut hasher = Xxh3::new();
        let _ = write!(
            HashWriter(&mut hasher),
            "{:?}{:?}{}",
            message.role(),
            message.shape(),
            message.is_pinned()
        );
        hash_blocks(&mut hasher, message.blocks());
        hash_fields(&mut hasher, message.fields());
        MessageId(hasher.digest128())
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

/// Feeds formatted text to the hasher without building the string.
struct HashWriter<'a>(&'a mut Xxh3);

impl fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

/// A string, then a separator no JSON text or UTF-8 string contains.
fn hash_str(hasher: &mut Xxh3, s: &str) {
    hasher.update(s.as_bytes());
    hasher.update(&[0xff]);
}

fn hash_value(hasher: &mut Xxh3, value: &Value) {
    match value {
        // Strings (tool arguments, mostly) go in as they are; anything else as its JSON text.
        Value::String(s) => {
            hasher.update(b"s");
            hash_str(hasher, s);
        }
        other => {
            let _ = write!(HashWriter(hasher), "{other}");
            hasher.update(&[0xff]);
        }
    }
}

fn hash_fields(hasher: &mut Xxh3, fields: &Map<String, Value>) {
    for (key, value) in fields {
        hash_str(hasher, key);
        hash_value(hasher, value);
    }
    hasher.update(&[0xfd]);
}

fn hash_blocks(hasher: &mut Xxh3, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Text(text) => {
                hasher.update(&[1]);
                hash_str(hasher, &text.text);
                hash_fields(hasher, &text.fields);
            }
            Block::ToolCall(call) => {
                hasher.update(&[2, u8::from(call.legacy)]);
                hash_str(hasher, &call.id);
                hash_str(hasher, &call.name);
                hash_value(hasher, &call.arguments);
                hash_fields(hasher, &call.fields);
                hash_fields(hasher, &call.function_fields);
            }
            Block::ToolResult(result) => {
                hasher.update(&[3]);
                hash_str(hasher, &result.call_id);
                hash_blocks(hasher, &result.content);
                let _ = write!(HashWriter(hasher), "{:?}", result.shape);
                hash_fields(hasher, &result.fields);
            }
            Block::Binary(opaque) => hash_opaque(hasher, 4, opaque),
            Block::Thinking(opaque) => hash_opaque(hasher, 5, opaque),
            Block::Other(opaque) => hash_opaque(hasher, 6, opaque),
        }
    }
    hasher.update(&[0xfc]);
}

fn hash_opaque(hasher: &mut Xxh3, tag: u8, opaque: &Opaque) {
    hasher.update(&[tag]);
    hash_value(hasher, &opaque.raw);
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
