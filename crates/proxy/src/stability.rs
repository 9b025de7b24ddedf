//! Sticky compaction decisions, so that the provider's prompt cache keeps hitting.
//!
//! An agent behind the proxy resends its whole, uncompacted history on every call. Running
//! the cascade afresh each time would rewrite early messages differently as the history
//! grows, and every rewrite throws the provider's cached prefix away. So per conversation
//! the proxy remembers what it sent upstream last time: the hashes of the original incoming
//! messages and the compacted messages they became. When the next request's messages start
//! with the same originals, the compacted messages stand in for that prefix and only the
//! new messages are appended; the cascade then sees a request that is under its thresholds
//! (and leaves it alone, so the upstream request extends the previous one byte for byte)
//! until the budget is crossed again.
//!
//! Only conversations the cascade actually changed are remembered: for the others the
//! original messages are what went upstream, and nothing needs re-applying. In memory an
//! entry holds the messages sent; on disk only the decisions ([`crate::decisions`]):
//! references to the client's messages and the messages the cascade wrote.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use context_cascade::format::parse;
use context_cascade::{Conversation, Format};
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::decisions::{self, Origin};
use crate::store::{Store, StoredSession};

/// How many conversations are kept in memory (the store keeps them all).
const MEMORY_CAPACITY: usize = 256;

/// A hash of one original message.
pub type MessageHash = [u8; 32];

/// A conversation found on disk, not yet checked against the request.
struct Stored {
    format: Format,
    originals: Vec<MessageHash>,
    decisions: Vec<u8>,
}

/// Where a conversation's entry was found.
enum Found {
    Memory(Entry),
    Disk(Stored),
}

impl Found {
    fn format(&self) -> Format {
        match self {
            Found::Memory(e) => e.format,
            Found::Disk(s) => s.format,
        }
    }

    fn originals(&self) -> &[MessageHash] {
        match self {
            Found::Memory(e) => &e.originals,
            Found::Disk(s) => &s.originals,
        }
    }
}

#[derive(Clone)]
struct Entry {
    format: Format,
    originals: Vec<MessageHash>,
    /// The messages sent (with an empty envelope), shared by the map, a request stitching
    /// from it and the background write.
    compacted: Arc<Conversation>,
    last_used: u64,
}

/// The sticky prefixes of every conversation.
pub struct Sticky {
    entries: Mutex<(HashMap<String, Entry>, u64)>,
    store: Arc<Store>,
}

/// The hash of one message written as JSON.
pub fn hash_value(value: &Value) -> MessageHash {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

/// The hashes of a request body's messages, one per message of the parsed conversation
/// (Anthropic's top-level `system` counts as the first message, as the parser reads it).
pub fn message_hashes(body: &Value, format: Format) -> Vec<MessageHash> {
    let mut out = Vec::new();
    if format == Format::Anthropic
        && let Some(system) = body.get("system")
    {
        out.push(hash_value(system));
    }
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        out.extend(messages.iter().map(hash_value));
    }
    out
}

/// The body's messages as the client wrote them, without building values.
#[derive(serde::Deserialize)]
struct RawBody<'a> {
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
}

/// Like [`message_hashes`], but over the bytes the client sent for each message: no
/// re-serialization, so it costs one scan and one SHA-256 pass over the body. `None` when
/// the body is not an object with a `messages` array.
pub fn raw_message_hashes(bytes: &[u8], format: Format) -> Option<Vec<MessageHash>> {
    let body: RawBody<'_> = serde_json::from_slice(bytes).ok()?;
    let digest = |raw: &RawValue| -> MessageHash { Sha256::digest(raw.get().as_bytes()).into() };
    let mut out = Vec::new();
    if format == Format::Anthropic
        && let Some(system) = body.system
    {
        out.push(digest(system));
    }
    out.extend(body.messages?.into_iter().map(digest));
    Some(out)
}

/// The hash of the parsed conversation's message `index`, read from the body (Anthropic's
/// `system` is message 0 when present).
pub fn hash_at(body: &Value, format: Format, index: usize) -> Option<MessageHash> {
    let system = (format == Format::Anthropic)
        .then(|| body.get("system"))
        .flatten();
    match (system, index) {
        (Some(system), 0) => Some(hash_value(system)),
        (Some(_), i) => body.get("messages")?.get(i - 1).map(hash_value),
        (None, i) => body.get("messages")?.get(i).map(hash_value),
    }
}

/// A change the memory injection made to a request's messages, already hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit {
    /// The index in the parsed conversation's messages.
    pub index: usize,
    /// A new message was inserted there (otherwise the message there changed).
    pub inserted: bool,
    /// The hash of the message now at `index`.
    pub hash: MessageHash,
}

/// The message hashes of a request, computed on first use: a conversation the cascade never
/// changed has nothing to stitch or record, and skips hashing its body.
pub struct LazyHashes<'a> {
    bytes: &'a [u8],
    format: Format,
    edit: Option<Edit>,
    usable: bool,
    computed: Option<Option<Vec<MessageHash>>>,
}

impl<'a> LazyHashes<'a> {
    /// Hashes of the messages in `bytes`, with `edit` applied.
    pub fn new(bytes: &'a [u8], format: Format, edit: Option<Edit>) -> Self {
        LazyHashes {
            bytes,
            format,
            edit,
            usable: true,
            computed: None,
        }
    }

    /// No hashes: the request cannot be matched (its messages were changed in a way the
    /// hashes cannot follow).
    pub fn unavailable(bytes: &'a [u8], format: Format) -> Self {
        LazyHashes {
            usable: false,
            ..LazyHashes::new(bytes, format, None)
        }
    }

    /// The memory injection applied on top of the client's messages.
    pub fn edit(&self) -> Option<Edit> {
        self.edit
    }

    /// The hashes, computed now if they were not yet.
    pub fn get(&mut self) -> Option<&[MessageHash]> {
        if self.computed.is_none() {
            self.computed = Some(self.compute());
        }
        self.computed.as_ref().and_then(|h| h.as_deref())
    }

    fn compute(&self) -> Option<Vec<MessageHash>> {
        if !self.usable {
            return None;
        }
        let mut hashes = raw_message_hashes(self.bytes, self.format)?;
        if let Some(edit) = self.edit {
            if edit.inserted {
                if edit.index > hashes.len() {
                    return None;
                }
                hashes.insert(edit.index, edit.hash);
            } else {
                *hashes.get_mut(edit.index)? = edit.hash;
            }
        }
        Some(hashes)
    }
}

impl Sticky {
    /// Sticky prefixes backed by `store`.
    pub fn new(store: Arc<Store>) -> Self {
        Sticky {
            entries: Mutex::new((HashMap::new(), 0)),
            store,
        }
    }

    fn lookup(&self, key: &str) -> Option<Found> {
        {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let (map, clock) = &mut *guard;
            *clock += 1;
            let now = *clock;
            if let Some(entry) = map.get_mut(key) {
                entry.last_used = now;
                return Some(Found::Memory(entry.clone()));
            }
        }
        let stored = match self.store.session(key) {
            Ok(stored) => stored?,
            Err(e) => {
                tracing::warn!(error = %e, "sticky prefix store unavailable");
                return None;
            }
        };
        let format = match stored.format.as_str() {
            "anthropic" => Format::Anthropic,
            "openai" => Format::OpenAi,
            _ => return None,
        };
        let originals = stored
            .originals
            .iter()
            .map(|h| hex::decode(h).ok()?.try_into().ok())
            .collect::<Option<Vec<MessageHash>>>()?;
        Some(Found::Disk(Stored {
            format,
            originals,
            decisions: stored.decisions,
        }))
    }

    /// Replaces the known prefix of `conversation` (whose messages hash to `hashes`) with
    /// what was sent for it last time. Returns how many original messages were replaced.
    pub fn stitch(
        &self,
        key: &str,
        hashes: &mut LazyHashes<'_>,
        conversation: &mut Conversation,
    ) -> Option<usize> {
        let found = self.lookup(key)?;
        let hashes = hashes.get()?;
        if hashes.len() != conversation.messages.len() {
            return None;
        }
        let known = found.originals().len();
        if found.format() != conversation.format
            || known == 0
            || known > hashes.len()
            || hashes[..known] != found.originals()[..]
        {
            return None;
        }
        let prefix = match found {
            Found::Memory(entry) => entry.compacted.messages.clone(),
            Found::Disk(stored) => {
                let format = stored.format;
                let messages =
                    decisions::decode(&stored.decisions, format, &conversation.messages, known)?;
                // Kept in memory from now on: the next request of the conversation is a map
                // hit, and forgetting it (record) also deletes the stored copy.
                let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
                let (map, clock) = &mut *guard;
                *clock += 1;
                let entry = Entry {
                    format,
                    originals: stored.originals,
                    compacted: Arc::new(Conversation {
                        format,
                        messages: messages.clone(),
                        envelope: Default::default(),
                    }),
                    last_used: *clock,
                };
                insert(map, key, entry);
                messages
            }
        };
        let tail = conversation.messages.split_off(known);
        conversation.messages = prefix;
        conversation.messages.extend(tail);
        Some(known)
    }

    /// Remembers what went upstream for a conversation. `changed` says whether what was sent
    /// differs from the originals (a strategy applied now, or an earlier prefix was reused);
    /// when it does not, the conversation is forgotten: there is nothing to re-apply.
    /// `request` is the client's body, which the stored decisions refer to.
    pub fn record(
        &self,
        key: &str,
        hashes: &mut LazyHashes<'_>,
        sent: &Conversation,
        changed: bool,
        request: Bytes,
    ) {
        let originals = if changed {
            match hashes.get() {
                Some(h) => Some(h.to_vec()),
                None => return,
            }
        } else {
            None
        };
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (map, clock) = &mut *guard;
        let Some(originals) = originals else {
            if map.remove(key).is_some() {
                let store = self.store.clone();
                let key = key.to_owned();
                tokio::task::spawn_blocking(move || store.delete_session(&key));
            }
            return;
        };
        *clock += 1;
        let entry = Entry {
            format: sent.format,
            originals,
            compacted: Arc::new(Conversation {
                format: sent.format,
                messages: sent.messages.clone(),
                envelope: Default::default(),
            }),
            last_used: *clock,
        };
        insert(map, key, entry.clone());
        drop(guard);
        // Written off the request path: a long history is megabytes of JSON.
        let store = self.store.clone();
        let key = key.to_owned();
        let edit = hashes.edit();
        tokio::task::spawn_blocking(move || persist(&store, &key, entry, &request, edit));
    }
}

/// Inserts an entry, evicting the least recently used one when the map is full.
fn insert(map: &mut HashMap<String, Entry>, key: &str, entry: Entry) {
    if map.len() >= MEMORY_CAPACITY
        && !map.contains_key(key)
        && let Some(oldest) = map
            .iter()
            .min_by_key(|(_, e)| e.last_used)
            .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
    map.insert(key.to_owned(), entry);
}

/// Writes a conversation's decisions: the messages sent, as references to the client's
/// messages (`request`, with the memory `edit` applied) where they are the same.
fn persist(store: &Store, key: &str, entry: Entry, request: &[u8], edit: Option<Edit>) {
    let Ok(client) = parse(request, Some(entry.format)) else {
        return;
    };
    // The client's message i sits at this index of the request the cascade saw.
    let index = |i: usize| match edit {
        Some(e) if e.inserted && i >= e.index => Some(i + 1),
        Some(e) if !e.inserted && i == e.index => None,
        _ => Some(i),
    };
    let sent = &entry.compacted.messages;
    let origins = decisions::origins(sent, &client.messages, index);
    let encoded = decisions::encode(entry.format, sent, &origins).or_else(|| {
        // Messages that do not read back alone: every one referred to or written whole.
        let all = vec![Origin::Written; sent.len()];
        decisions::encode(entry.format, sent, &all)
    });
    let Some(decisions) = encoded else {
        return;
    };
    let session = StoredSession {
        format: entry.format.as_str().to_owned(),
        originals: entry.originals.iter().map(hex::encode).collect(),
        decisions,
    };
    if let Err(e) = store.save_session(key, &session) {
        tracing::warn!(error = %e, "could not persist a sticky prefix");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::Message;
    use context_cascade::format::parse_value;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn raw_hashes_align_with_parsed_messages() {
        let text =
            br#"{"model": "m", "system": "s", "messages": [{"role": "user", "content": "a"}]}"#;
        let raw = raw_message_hashes(text, Format::Anthropic).unwrap();
        let body: Value = serde_json::from_slice(text).unwrap();
        let conversation = parse_value(body.clone(), Some(Format::Anthropic)).unwrap();
        assert_eq!(raw.len(), conversation.messages.len());
        assert_eq!(
            hash_at(&body, Format::Anthropic, 0),
            Some(hash_value(&json!("s")))
        );
        assert!(hash_at(&body, Format::Anthropic, 2).is_none());
        assert_eq!(raw_message_hashes(b"[1]", Format::OpenAi), None);
    }

    #[tokio::test]
    async fn known_prefix_is_replaced_and_new_messages_appended() {
        let store = Arc::new(
            Store::open(Path::new(crate::config::IN_MEMORY_DB), Default::default()).unwrap(),
        );
        let sticky = Sticky::new(store);
        let first = json!({"model": "m", "messages": [
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]});
        let first_bytes = serde_json::to_vec(&first).unwrap();
        let mut sent = parse_value(first.clone(), Some(Format::OpenAi)).unwrap();
        sent.messages[1] = Message::text(context_cascade::Role::Assistant, "B (compacted)");
        let mut hashes = LazyHashes::new(&first_bytes, Format::OpenAi, None);
        sticky.record(
            "k",
            &mut hashes,
            &sent,
            true,
            Bytes::from(first_bytes.clone()),
        );

        let second = json!({"model": "m", "messages": [
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]});
        let second_bytes = serde_json::to_vec(&second).unwrap();
        let mut hashes = LazyHashes::new(&second_bytes, Format::OpenAi, None);
        let mut conversation = parse_value(second, Some(Format::OpenAi)).unwrap();
        assert_eq!(sticky.stitch("k", &mut hashes, &mut conversation), Some(2));
        assert_eq!(conversation.messages[1].text_content(), "B (compacted)");
        assert_eq!(conversation.messages[2].text_content(), "c");

        // A history that changed underneath is not stitched.
        let other = json!({"model": "m", "messages": [{"role": "user", "content": "z"}]});
        let other_bytes = serde_json::to_vec(&other).unwrap();
        let mut conversation = parse_value(other, Some(Format::OpenAi)).unwrap();
        let mut hashes = LazyHashes::new(&other_bytes, Format::OpenAi, None);
        assert_eq!(sticky.stitch("k", &mut hashes, &mut conversation), None);
        assert_eq!(
            sticky.stitch("unknown", &mut hashes, &mut conversation),
            None
        );
        let mut none = LazyHashes::unavailable(&other_bytes, Format::OpenAi);
        assert!(none.get().is_none());
    }

    #[test]
    fn edits_follow_the_memory_injection() {
        let bytes = br#"{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}"#;
        let hash = [7u8; 32];
        let edit = Edit {
            index: 1,
            inserted: true,
            hash,
        };
        let mut hashes = LazyHashes::new(bytes, Format::OpenAi, Some(edit));
        let got = hashes.get().unwrap().to_vec();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], hash);
        let edit = Edit {
            index: 9,
            inserted: false,
            hash,
        };
        assert!(
            LazyHashes::new(bytes, Format::OpenAi, Some(edit))
                .get()
                .is_none()
        );
    }
}
