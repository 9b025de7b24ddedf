//! Digests of the requests a conversation sends, to tell whether one extends the previous
//! one (prefix stability on the status page) without keeping either.
//!
//! A request is its parts: the format and envelope, then each message, as
//! `context_cascade::replay::conversation_extends` compares them. Each part is hashed on
//! its own (a message by its [`MessageId`], the one identity everything that compares
//! messages uses), and the request's digest chains the part hashes. Hashing a message alone
//! is what lets the proxy's fast path, which never parses a request whole, keep one
//! message's identity in its memo and still produce the digest the slow path would have.

use context_cascade::{Conversation, Format, MessageId};
use serde_json::{Map, Value};
use xxhash_rust::xxh3::Xxh3;

/// The hashes of a request's parts: its envelope first, then one per message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestDigest {
    parts: Vec<u128>,
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
        Self::from_parts(envelope, sent.messages.iter().map(MessageId::of))
    }

    /// A digest from hashes computed separately ([`envelope_hash`], [`MessageId::of`]).
    pub(crate) fn from_parts(
        envelope: u128,
        messages: impl IntoIterator<Item = MessageId>,
    ) -> Self {
        let mut parts = vec![envelope];
        parts.extend(messages.into_iter().map(MessageId::as_u128));
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
pub(crate) fn envelope_hash(format: Format, envelope: &Map<String, Value>) -> u128 {
    let mut hasher = Xxh3::new();
    hasher.update(format.as_str().as_bytes());
    hasher.update(&[0xff]);
    // The envelope's JSON text is what goes on the wire, so equal text is an equal part.
    // Writing a map of JSON values into a hasher cannot fail.
    let _ = serde_json::to_writer(HashWriter(&mut hasher), envelope);
    hasher.digest128()
}

/// Feeds written bytes to a hasher without building them.
struct HashWriter<'a>(&'a mut Xxh3);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
