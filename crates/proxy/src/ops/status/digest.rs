//! Digests of the requests a conversation sends, to tell whether one extends the previous
//! one (prefix stability on the status page) without keeping either.
//!
//! A request is its parts: the format and envelope, then each message, as
//! `context_cascade::replay::conversation_extends` compares them. Each part is hashed on
//! its own (xxh3 over its bytes, no string built: formatting blocks with `{:?}` into SipHash
//! cost about 0.3 ms on a 100K-token request), and the request's digest chains the part
//! hashes. Hashing a message alone is what lets the proxy's fast path, which never parses a
//! request whole, keep one message's hash in its memo and still produce the digest the
//! slow path would have.

use std::fmt::Write as _;

use context_cascade::{Block, Conversation, Format, Message, Opaque};
use serde_json::{Map, Value};
use xxhash_rust::xxh3::Xxh3;

/// The hashes of a request's parts: its envelope first, then one per message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestDigest {
    parts: Vec<u64>,
}

/// The digest of a request's first `parts` parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrefixDigest {
    pub(crate) parts: usize,
    pub(crate) hash: u64,
}

impl RequestDigest {
    /// The digest of a conversation as it went upstream.
    pub(crate) fn of(sent: &Conversation) -> Self {
        let envelope = envelope_hash(sent.format, &sent.envelope);
        Self::from_parts(envelope, sent.messages.iter().map(message_hash))
    }

    /// A digest from hashes computed separately ([`envelope_hash`], [`message_hash`]).
    pub(crate) fn from_parts(envelope: u64, messages: impl IntoIterator<Item = u64>) -> Self {
        let mut parts = vec![envelope];
        parts.extend(messages);
        RequestDigest { parts }
    }

    /// The chained digest of the first `previous` parts, when the request has that many,
    /// and of all of them.
    pub(crate) fn chained(&self, previous: Option<usize>) -> (Option<u64>, PrefixDigest) {
        let mut hasher = Xxh3::new();
        let mut at_previous = None;
        for (i, part) in self.parts.iter().enumerate() {
            hasher.update(&part.to_le_bytes());
            if previous == Some(i + 1) {
                at_previous = Some(hasher.digest());
            }
        }
        let whole = PrefixDigest {
            parts: self.parts.len(),
            hash: hasher.digest(),
        };
        (at_previous, whole)
    }
}

/// The hash of a request's format and envelope (everything but its messages).
pub(crate) fn envelope_hash(format: Format, envelope: &Map<String, Value>) -> u64 {
    let mut hasher = Xxh3::new();
    // The envelope's JSON text is what goes on the wire, so equal text is an equal part.
    hash_str(&mut hasher, format.as_str());
    hash_fields(&mut hasher, envelope);
    hasher.digest()
}

/// The hash of one message: everything `Message`'s equality compares (not its cached
/// counts), except a tool result's resolved tool name.
pub(crate) fn message_hash(message: &Message) -> u64 {
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
    hasher.digest()
}

/// Feeds formatted text to a hasher without building the string.
struct HashWriter<'a>(&'a mut Xxh3);

impl std::fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
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
                // Not the tool name: it is resolved from the call, not sent with the result,
                // and a message hashed on its own (the fast path) has none.
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
