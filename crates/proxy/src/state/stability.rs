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

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use bytes::Bytes;
use context_cascade::format::parse;
use context_cascade::{Conversation, Format, MessageId};

use crate::state::decisions::{self, Origin};
pub(crate) use crate::state::identity::{Edit, LazyHashes, id_at as hash_at};
use crate::state::sticky_memory::{DEFAULT_MEMORY_MB, Entry, Kept, Memory};
use crate::state::store::{StateStore, StoredSession};
use crate::state::writes::Writes;

/// How many bytes the records waiting for a turn to be encoded may hold together (each
/// holds the client's body and the messages sent). Requests come faster than the turns
/// encode their records under load: 200 heavy clients queued ~370 bodies and their
/// messages, 150 MB (docs/benchmarks.md, "Hardening"). Past this a record is not written
/// to the store; memory keeps it (evicted after the entries the store has, see
/// [`crate::state::sticky_memory`]), and the conversation's next request records it again.
const QUEUED_BYTES: u64 = 32 << 20;

/// A conversation found on disk, not yet checked against the request.
struct Stored {
    format: Format,
    originals: Vec<MessageId>,
    decisions: String,
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

    fn originals(&self) -> &[MessageId] {
        match self {
            Found::Memory(e) => &e.originals,
            Found::Disk(s) => &s.originals,
        }
    }
}

/// The sticky prefixes of every conversation.
pub(crate) struct Sticky {
    /// The entries kept in memory (shared with the background writes, which mark them
    /// saved).
    memory: Arc<Mutex<Memory>>,
    store: Arc<dyn StateStore>,
    /// The background writes, which a graceful shutdown flushes.
    writes: Writes,
    /// The turns at the heavy stages: encoding a record parses the client's whole body
    /// again, so it waits for a turn like a request does.
    turns: Arc<Semaphore>,
    /// The bytes the records waiting to be encoded hold, and at most how many.
    queued: Arc<AtomicU64>,
    queue_limit: u64,
}

/// A record's place in the queue: its bytes, counted until it is encoded or dropped.
struct Queued {
    queued: Arc<AtomicU64>,
    bytes: u64,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

impl Sticky {
    /// Sticky prefixes backed by `store`, written in the background through `writes`.
    pub(crate) fn new(store: Arc<dyn StateStore>, writes: Writes) -> Self {
        Sticky {
            memory: Arc::new(Mutex::new(Memory::new(DEFAULT_MEMORY_MB << 20))),
            store,
            writes,
            turns: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
            queued: Arc::new(AtomicU64::new(0)),
            queue_limit: QUEUED_BYTES,
        }
    }

    /// A place in the encoding queue for a record of `bytes`, or `None` when the queue is
    /// full.
    fn enqueue(&self, bytes: u64) -> Option<Queued> {
        let limit = self.queue_limit;
        let taken = self
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held + bytes <= limit).then_some(held + bytes)
            });
        taken.ok().map(|_| Queued {
            queued: self.queued.clone(),
            bytes,
        })
    }

    /// Keeps at most `bytes` of sticky prefixes in memory (`limits.sticky_memory_mb`).
    pub(crate) fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory = Arc::new(Mutex::new(Memory::new(bytes)));
        self
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Encodes records within `turns` (the heavy stages' turns, shared with requests).
    pub(crate) fn with_turns(mut self, turns: Arc<Semaphore>) -> Self {
        self.turns = turns;
        self
    }

    async fn lookup(&self, key: &str) -> Option<Found> {
        let shared = self.store.shared();
        let memory = self.memory().get(key);
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
        let StoredSession {
            format,
            originals,
            decisions,
            ..
        } = stored;
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
            decisions,
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
                let messages = decisions::decode(
                    stored.decisions.as_bytes(),
                    format,
                    &conversation.messages,
                    known,
                )?;
                // Kept in memory from now on (as its bound allows): the next request of the
                // conversation is a map hit, and forgetting it (record) also deletes the
                // stored copy.
                let entry = Entry::new(format, stored.originals, messages.clone(), Kept::Saved);
                self.memory().insert(key, entry);
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
        let Some(originals) = originals else {
            if !self.memory().remove(key) && !shared {
                return;
            }
            // Memory had it, or another replica may have stored it (shared).
            let store = self.store.clone();
            let key = key.to_owned();
            let delete = async move {
                if let Err(e) = store.delete_session(&key).await {
                    tracing::warn!(error = %e, "could not forget a sticky prefix");
                }
            };
            return self.write(shared, delete).await;
        };
        let mut entry = Entry::new(sent.format, originals, sent.messages.clone(), Kept::Writing);
        // Encoded off the request's task: a long history is megabytes of JSON. A shared
        // store's write is awaited (it never queues), a local one waits for a turn.
        let queued = if shared {
            None
        } else {
            let queued = self.enqueue(request.len() as u64 + entry.bytes);
            if queued.is_none() {
                tracing::debug!("sticky record not persisted: the encoding queue is full");
                entry.state = Kept::Unsaved;
                self.memory().insert(key, entry);
                return;
            }
            queued
        };
        self.memory().insert(key, entry.clone());
        let store = self.store.clone();
        let key = key.to_owned();
        let edit = hashes.edit();
        let turns = self.turns.clone();
        let memory = self.memory.clone();
        let save = async move {
            let turn: Option<OwnedSemaphorePermit> = turns.acquire_owned().await.ok();
            let compacted = entry.compacted.clone();
            let encode = move || encode(entry, &request, edit);
            let encoded = tokio::task::spawn_blocking(encode).await;
            drop((turn, queued));
            let saved = match encoded {
                Ok(Some(session)) => match store.save_session(&key, &session).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not persist a sticky prefix");
                        false
                    }
                },
                _ => false,
            };
            let mut memory = memory.lock().unwrap_or_else(|p| p.into_inner());
            memory.written(&key, &compacted, saved);
        };
        self.write(shared, save).await;
    }

    /// Runs a store write: awaited for a shared store (the next request may reach another
    /// replica at once, and must find it), else in the background, tracked so that a
    /// graceful shutdown waits for it.
    async fn write(&self, shared: bool, write: impl Future<Output = ()> + Send + 'static) {
        if shared {
            write.await;
        } else {
            self.writes.spawn(write);
        }
    }
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
    let decisions = String::from_utf8(encoded?).ok()?;
    Some(StoredSession::new(entry.format, entry.originals, decisions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::SqliteStore;
    use context_cascade::Message;
    use context_cascade::format::parse_value;
    use serde_json::{Value, json};
    use std::path::Path;

    #[tokio::test]
    async fn known_prefix_is_replaced_and_new_messages_appended() {
        let store = SqliteStore::open(Path::new(crate::config::IN_MEMORY_DB), Default::default());
        let sticky = Sticky::new(Arc::new(store.unwrap()), Writes::default());
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
    }

    /// A body of `format` with a system prompt and `turns` user/assistant messages.
    fn body(format: Format, turns: usize) -> Value {
        let messages: Vec<Value> = (0..turns)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": format!("message {i}")})
            })
            .collect();
        match format {
            Format::Anthropic => json!({"model": "m", "system": "sys", "messages": messages}),
            Format::Responses => json!({"model": "m", "instructions": "sys", "input": messages}),
            _ => {
                let mut all = vec![json!({"role": "system", "content": "sys"})];
                all.extend(messages);
                json!({"model": "m", "messages": all})
            }
        }
    }

    #[tokio::test]
    async fn a_decision_read_back_from_the_store_stitches_in_every_format() {
        for format in [Format::OpenAi, Format::Anthropic, Format::Responses] {
            let store: Arc<dyn StateStore> = Arc::new(
                SqliteStore::open(Path::new(crate::config::IN_MEMORY_DB), Default::default())
                    .unwrap(),
            );
            let writes = Writes::default();
            let sticky = Sticky::new(store.clone(), writes.clone());
            let first = serde_json::to_vec(&body(format, 5)).unwrap();
            let mut sent = parse(&first, Some(format)).unwrap();
            // Messages 1-3 went upstream as one notice, between two of the client's.
            let notice = Message::text(context_cascade::Role::User, "[3 messages removed]");
            sent.messages.splice(2..4, [notice]);
            let mut hashes = LazyHashes::new(&first, format, None);
            let request = Bytes::from(first.clone());
            sticky.record("k", &mut hashes, &sent, true, request).await;
            assert!(writes.flush(std::time::Duration::from_secs(5)).await);

            // Another proxy (or this one after its memory let the conversation go).
            let fresh = Sticky::new(store, Writes::default());
            let second = serde_json::to_vec(&body(format, 7)).unwrap();
            let mut conversation = parse(&second, Some(format)).unwrap();
            let mut hashes = LazyHashes::new(&second, format, None);
            let stitched = fresh.stitch("k", &mut hashes, &mut conversation).await;
            assert_eq!(stitched, Some(6), "{format:?}");
            let texts = |m: &[Message]| m.iter().map(Message::text_content).collect::<Vec<_>>();
            assert_eq!(
                texts(&conversation.messages[..sent.messages.len()]),
                texts(&sent.messages),
                "{format:?}"
            );
            assert_eq!(conversation.messages.len(), sent.messages.len() + 2);
        }
    }

    #[tokio::test]
    async fn records_waiting_to_be_encoded_hold_at_most_the_queue_limit() {
        let store = SqliteStore::open(Path::new(crate::config::IN_MEMORY_DB), Default::default());
        let writes = Writes::default();
        // No turn is free: every record waits, as under 200 heavy clients.
        let turns = Arc::new(Semaphore::new(0));
        // Memory to spare: the records the queue cannot take stay there.
        let mut sticky = (Sticky::new(Arc::new(store.unwrap()), writes.clone()))
            .with_turns(turns.clone())
            .with_memory_limit(8 << 20);
        let bytes = serde_json::to_vec(&body(Format::OpenAi, 5)).unwrap();
        let mut sent = parse(&bytes, Some(Format::OpenAi)).unwrap();
        sent.messages[1] = Message::text(context_cascade::Role::User, "[compacted]");
        let originals = (LazyHashes::new(&bytes, Format::OpenAi, None).get())
            .map(<[MessageId]>::to_vec)
            .unwrap();
        let entry = Entry::new(
            Format::OpenAi,
            originals,
            sent.messages.clone(),
            Kept::Writing,
        );
        let one = bytes.len() as u64 + entry.bytes;
        sticky.queue_limit = 3 * one;
        for k in 0..10 {
            let mut hashes = LazyHashes::new(&bytes, Format::OpenAi, None);
            let request = Bytes::from(bytes.clone());
            sticky
                .record(&format!("k{k}"), &mut hashes, &sent, true, request)
                .await;
        }
        assert_eq!(writes.pending(), 3, "three records queued, seven not");
        assert_eq!(sticky.queued.load(Ordering::SeqCst), 3 * one);
        // Memory kept every conversation all the same.
        for k in 0..10 {
            let mut hashes = LazyHashes::new(&bytes, Format::OpenAi, None);
            let mut conversation = parse(&bytes, Some(Format::OpenAi)).unwrap();
            let key = format!("k{k}");
            assert_eq!(
                sticky.stitch(&key, &mut hashes, &mut conversation).await,
                Some(6)
            );
        }
        turns.add_permits(1);
        assert!(writes.flush(std::time::Duration::from_secs(5)).await);
        assert_eq!(sticky.queued.load(Ordering::SeqCst), 0, "the queue emptied");
    }
}
