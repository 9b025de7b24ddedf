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
//! entry holds the messages sent; on disk only the decisions ([`crate::state::decisions`]):
//! references to the client's messages and the messages the cascade wrote.
//!
//! With a shared store (Redis, several replicas) another replica may have answered the
//! conversation's last request: the store is then the truth and the in-memory entry only
//! saves decoding when the store agrees with it (or stands in while the store is down), and
//! a replica's write lands before it answers, so that the next request finds it wherever it
//! goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use context_cascade::format::parse;
use context_cascade::{Conversation, Format};
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::state::decisions::{self, Origin};
use crate::state::store::{StateStore, StoredSession};

/// How many conversations are kept in memory (the store keeps them all).
const MEMORY_CAPACITY: usize = 256;

/// A hash of one original message.
pub(crate) type MessageHash = [u8; 32];

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
pub(crate) struct Sticky {
    entries: Mutex<(HashMap<String, Entry>, u64)>,
    store: Arc<dyn StateStore>,
}

/// The hash of one message written as JSON.
pub(crate) fn hash_value(value: &Value) -> MessageHash {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

/// The body's messages as the client wrote them, without building values.
#[derive(serde::Deserialize)]
struct RawBody<'a> {
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
}

/// The hashes of a request body's messages, one per message of the parsed conversation
/// (Anthropic's top-level `system` counts as the first message, as the parser reads it),
/// over the bytes the client sent for each message: no
/// re-serialization, so it costs one scan and one SHA-256 pass over the body. `None` when
/// the body is not an object with a `messages` array.
pub(crate) fn raw_message_hashes(bytes: &[u8], format: Format) -> Option<Vec<MessageHash>> {
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
pub(crate) fn hash_at(body: &Value, format: Format, index: usize) -> Option<MessageHash> {
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
pub(crate) struct Edit {
    /// The index in the parsed conversation's messages.
    pub index: usize,
    /// A new message was inserted there (otherwise the message there changed).
    pub inserted: bool,
    /// The hash of the message now at `index`.
    pub hash: MessageHash,
}

/// The message hashes of a request, computed on first use: a conversation the cascade never
/// changed has nothing to stitch or record, and skips hashing its body.
pub(crate) struct LazyHashes<'a> {
    bytes: &'a [u8],
    format: Format,
    edit: Option<Edit>,
    usable: bool,
    computed: Option<Option<Vec<MessageHash>>>,
}

impl<'a> LazyHashes<'a> {
    /// Hashes of the messages in `bytes`, with `edit` applied.
    pub(crate) fn new(bytes: &'a [u8], format: Format, edit: Option<Edit>) -> Self {
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
    pub(crate) fn unavailable(bytes: &'a [u8], format: Format) -> Self {
        LazyHashes {
            usable: false,
            ..LazyHashes::new(bytes, format, None)
        }
    }

    /// The memory injection applied on top of the client's messages.
    pub(crate) fn edit(&self) -> Option<Edit> {
        self.edit
    }

    /// The hashes, computed now if they were not yet.
    pub(crate) fn get(&mut self) -> Option<&[MessageHash]> {
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
    pub(crate) fn new(store: Arc<dyn StateStore>) -> Self {
        Sticky {
            entries: Mutex::new((HashMap::new(), 0)),
            store,
        }
    }

    async fn lookup(&self, key: &str) -> Option<Found> {
        let shared = self.store.shared();
        let memory = {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let (map, clock) = &mut *guard;
            *clock += 1;
            let now = *clock;
            map.get_mut(key).map(|entry| {
                entry.last_used = now;
                entry.clone()
            })
        };
        if let Some(entry) = memory.clone()
            && !shared
        {
            return Some(Found::Memory(entry));
        }
        let stored = match self.store.session(key).await {
            Ok(stored) => stored?,
            Err(e) => {
                tracing::warn!(error = %e, "sticky prefix store unavailable");
                // A shared store that is down: this replica's own memory is all there is.
                return memory.map(Found::Memory);
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
        if let Some(entry) = memory
            && entry.format == format
            && entry.originals == originals
        {
            // What this replica sent last is still the conversation's last request.
            return Some(Found::Memory(entry));
        }
        Some(Found::Disk(Stored {
            format,
            originals,
            decisions: stored.decisions,
        }))
    }

    /// Replaces the known prefix of `conversation` (whose messages hash to `hashes`) with
    /// what was sent for it last time. Returns how many original messages were replaced.
    pub(crate) async fn stitch(
        &self,
        key: &str,
        hashes: &mut LazyHashes<'_>,
        conversation: &mut Conversation,
    ) -> Option<usize> {
        let found = self.lookup(key).await?;
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
    pub(crate) async fn record(
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
        let shared = self.store.shared();
        let entry = match self.update_memory(key, originals, sent) {
            Ok(entry) => entry,
            // Shared: another replica may have stored the conversation.
            Err(had) if had || shared => {
                let store = self.store.clone();
                let key = key.to_owned();
                let delete = async move {
                    if let Err(e) = store.delete_session(&key).await {
                        tracing::warn!(error = %e, "could not forget a sticky prefix");
                    }
                };
                return write(shared, delete).await;
            }
            Err(_) => return,
        };
        // Encoded off the request's task: a long history is megabytes of JSON.
        let store = self.store.clone();
        let key = key.to_owned();
        let edit = hashes.edit();
        let save = async move {
            let encode = move || encode(entry, &request, edit);
            let Ok(Some(session)) = tokio::task::spawn_blocking(encode).await else {
                return;
            };
            if let Err(e) = store.save_session(&key, &session).await {
                tracing::warn!(error = %e, "could not persist a sticky prefix");
            }
        };
        write(shared, save).await;
    }

    /// Keeps what was sent for a conversation in memory (`originals` is `None` when nothing
    /// changed: the conversation is forgotten). Returns the entry kept, or whether memory
    /// had the conversation it forgot.
    fn update_memory(
        &self,
        key: &str,
        originals: Option<Vec<MessageHash>>,
        sent: &Conversation,
    ) -> Result<Entry, bool> {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (map, clock) = &mut *guard;
        let Some(originals) = originals else {
            return Err(map.remove(key).is_some());
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
        Ok(entry)
    }
}

/// Runs a store write: awaited for a shared store (the next request may reach another
/// replica at once, and must find it), else in the background, the SQLite statement on the
/// blocking pool as always (its future is ready on the first poll).
async fn write(shared: bool, write: impl std::future::Future<Output = ()> + Send + 'static) {
    if shared {
        write.await;
    } else {
        tokio::spawn(async move {
            let _ = tokio::task::spawn_blocking(move || futures::executor::block_on(write)).await;
        });
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

/// A conversation's decisions: the messages sent, as references to the client's messages
/// (`request`, with the memory `edit` applied) where they are the same.
fn encode(entry: Entry, request: &[u8], edit: Option<Edit>) -> Option<StoredSession> {
    let client = parse(request, Some(entry.format)).ok()?;
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
    Some(StoredSession {
        format: entry.format.as_str().to_owned(),
        originals: entry.originals.iter().map(hex::encode).collect(),
        decisions: encoded?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::SqliteStore;
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
        let store = SqliteStore::open(Path::new(crate::config::IN_MEMORY_DB), Default::default());
        let sticky = Sticky::new(Arc::new(store.unwrap()));
        let first = json!({"model": "m", "messages": [
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]});
        let first_bytes = serde_json::to_vec(&first).unwrap();
        let mut sent = parse_value(first.clone(), Some(Format::OpenAi)).unwrap();
        sent.messages[1] = Message::text(context_cascade::Role::Assistant, "B (compacted)");
        let mut hashes = LazyHashes::new(&first_bytes, Format::OpenAi, None);
        let request = Bytes::from(first_bytes.clone());
        sticky.record("k", &mut hashes, &sent, true, request).await;

        let second = json!({"model": "m", "messages": [
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]});
        let second_bytes = serde_json::to_vec(&second).unwrap();
        let mut hashes = LazyHashes::new(&second_bytes, Format::OpenAi, None);
        let mut conversation = parse_value(second, Some(Format::OpenAi)).unwrap();
        assert_eq!(
            sticky.stitch("k", &mut hashes, &mut conversation).await,
            Some(2)
        );
        assert_eq!(conversation.messages[1].text_content(), "B (compacted)");
        assert_eq!(conversation.messages[2].text_content(), "c");

        // A history that changed underneath is not stitched.
        let other = json!({"model": "m", "messages": [{"role": "user", "content": "z"}]});
        let other_bytes = serde_json::to_vec(&other).unwrap();
        let mut conversation = parse_value(other, Some(Format::OpenAi)).unwrap();
        let mut hashes = LazyHashes::new(&other_bytes, Format::OpenAi, None);
        assert_eq!(
            sticky.stitch("k", &mut hashes, &mut conversation).await,
            None
        );
        assert_eq!(
            sticky
                .stitch("unknown", &mut hashes, &mut conversation)
                .await,
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
