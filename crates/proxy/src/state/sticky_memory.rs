//! The sticky prefixes kept in memory: a cache in front of the store, bounded in bytes.
//!
//! The store (SQLite, Redis) keeps every conversation's decisions; memory only saves
//! decoding them on the conversation's next request (a store read and a parse of the
//! messages the cascade wrote, docs/benchmarks.md, "Hardening"). The bound counts what the
//! kept messages take on the heap, estimated from their strings and JSON values plus the
//! size of each structure ([`footprint`]): a bound in characters missed the structures
//! (hundreds of bytes per message) and binary blocks, and let 200 heavy conversations hold
//! tens of MB after the load had ended.
//!
//! An entry whose record is on its way to the store (waiting for a turn to be encoded) is
//! not evicted until the write ends: the conversation's next request usually comes before
//! it, and would find the record before it in the store. Those entries are bounded by the
//! write queue (`QUEUED_BYTES` in [`crate::state::stability`]), not by this bound. An entry
//! whose record the store lacks (the queue was full, or the write failed) goes after every
//! entry the store has: memory is then its only copy.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Arc;

pub(crate) use crate::config::DEFAULT_STICKY_MEMORY_MB as DEFAULT_MEMORY_MB;
use context_cascade::{Block, Conversation, Format, Message, MessageId};
use serde_json::{Map, Value};

/// How many conversations are kept at most, whatever their size.
const MEMORY_CAPACITY: usize = 256;

/// One conversation's entry: what was sent upstream for it last.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) format: Format,
    /// The hashes of the client's messages the sent ones stand for.
    pub(crate) originals: Vec<MessageId>,
    /// The messages sent (with an empty envelope), shared by the map, a request stitching
    /// from it and the background write.
    pub(crate) compacted: Arc<Conversation>,
    /// Its estimated bytes on the heap (what the bound counts).
    pub(crate) bytes: u64,
    last_used: u64,
    pub(crate) state: Kept,
}

/// Where an entry's record is besides memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kept {
    /// In the store: evicted first.
    Saved,
    /// Nowhere else: evicted after every saved entry.
    Unsaved,
    /// Being written: not evicted until the write ends.
    Writing,
}

impl Entry {
    /// An entry for `messages` sent for `originals`, whose record is `state`.
    pub(crate) fn new(
        format: Format,
        originals: Vec<MessageId>,
        messages: Vec<Message>,
        state: Kept,
    ) -> Self {
        let bytes = footprint(&messages) + (originals.len() * size_of::<MessageId>()) as u64;
        Entry {
            format,
            originals,
            compacted: Arc::new(Conversation {
                format,
                messages,
                envelope: Default::default(),
            }),
            bytes,
            last_used: 0,
            state,
        }
    }
}

/// The entries, least recently used first out, within a byte bound.
pub(crate) struct Memory {
    entries: HashMap<String, Entry>,
    clock: u64,
    /// The bytes of the entries held (the sum of their `bytes`).
    held: u64,
    limit: u64,
}

impl Memory {
    /// An empty memory holding at most `limit` bytes of entries.
    pub(crate) fn new(limit: u64) -> Self {
        Memory {
            entries: HashMap::new(),
            clock: 0,
            held: 0,
            limit,
        }
    }

    /// The entry of `key`, now the most recently used.
    pub(crate) fn get(&mut self, key: &str) -> Option<Entry> {
        self.clock += 1;
        let now = self.clock;
        self.entries.get_mut(key).map(|entry| {
            entry.last_used = now;
            entry.clone()
        })
    }

    /// Forgets `key`; whether it was kept.
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        let Some(gone) = self.entries.remove(key) else {
            return false;
        };
        self.held -= gone.bytes;
        if self.entries.is_empty() {
            // A burst's map gives its table back once it has emptied.
            self.entries.shrink_to_fit();
        }
        true
    }

    /// Keeps `entry` for `key`, evicting the least recently used entries (those the store
    /// has first) while the map is full or the bytes would pass the bound. An entry that
    /// does not fit is not kept, unless its record is being written.
    pub(crate) fn insert(&mut self, key: &str, mut entry: Entry) {
        self.remove(key);
        let writing = entry.state == Kept::Writing;
        if !writing && entry.bytes > self.limit {
            return;
        }
        let fits = self.evict(entry.bytes);
        if fits || writing {
            self.clock += 1;
            entry.last_used = self.clock;
            self.held += entry.bytes;
            self.entries.insert(key.to_owned(), entry);
        }
    }

    /// Evicts entries until `more` bytes and one more entry fit; whether they do.
    fn evict(&mut self, more: u64) -> bool {
        loop {
            if self.entries.len() < MEMORY_CAPACITY && self.held + more <= self.limit {
                return true;
            }
            let oldest = (self.entries.iter())
                .filter(|(_, e)| e.state != Kept::Writing)
                .min_by_key(|(_, e)| (e.state, e.last_used))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(oldest) => self.remove(&oldest),
                None => return false,
            };
        }
    }

    /// Notes how the write of `key`'s entry made of `compacted` ended (`saved` in the
    /// store, or not), then evicts what the bound no longer holds. A newer entry of the
    /// conversation is left as it is.
    pub(crate) fn written(&mut self, key: &str, compacted: &Arc<Conversation>, saved: bool) {
        if let Some(entry) = self.entries.get_mut(key)
            && Arc::ptr_eq(&entry.compacted, compacted)
        {
            entry.state = if saved { Kept::Saved } else { Kept::Unsaved };
        }
        self.evict(0);
    }

    /// The bytes held.
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.held
    }
}

/// The heap bytes `messages` take, estimated: each structure's size, each string's length,
/// and each map entry's key, value and index. Allocator rounding is not counted.
pub(crate) fn footprint(messages: &[Message]) -> u64 {
    (messages.iter())
        .map(|m| size_of::<Message>() as u64 + fields(m.fields()) + blocks(m.blocks()))
        .sum()
}

fn blocks(blocks: &[Block]) -> u64 {
    blocks.iter().map(block).sum()
}

fn block(block: &Block) -> u64 {
    size_of::<Block>() as u64
        + match block {
            Block::Text(t) => t.text.len() as u64 + fields(&t.fields),
            Block::ToolCall(c) => {
                (c.id.len() + c.name.len()) as u64
                    + value(&c.arguments)
                    + fields(&c.fields)
                    + fields(&c.function_fields)
            }
            Block::ToolResult(r) => {
                (r.call_id.len() + r.tool_name.as_ref().map_or(0, String::len)) as u64
                    + blocks(&r.content)
                    + fields(&r.fields)
            }
            Block::Binary(o) | Block::Thinking(o) | Block::Other(o) => value(&o.raw),
        }
}

/// An object's entries: the key, the value and the index's slot (the map keeps its order).
fn fields(map: &Map<String, Value>) -> u64 {
    const ENTRY: usize = size_of::<String>() + size_of::<Value>() + 2 * size_of::<usize>();
    (map.iter())
        .map(|(k, v)| (ENTRY + k.len()) as u64 + value(v))
        .sum()
}

fn value(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Array(items) => (items.iter())
            .map(|i| size_of::<Value>() as u64 + value(i))
            .sum(),
        Value::Object(map) => fields(map),
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::Role;

    fn entry(text_bytes: usize, state: Kept) -> Entry {
        let messages = vec![
            Message::text(Role::User, "x".repeat(text_bytes)),
            Message::text(Role::Assistant, "ok"),
        ];
        Entry::new(Format::OpenAi, vec![], messages, state)
    }

    #[test]
    fn the_bytes_held_stay_within_the_bound() {
        let one = entry(100_000, Kept::Saved).bytes;
        assert!(one > 100_000, "the text is counted: {one}");
        let mut memory = Memory::new(10 * one);
        for k in 0..100 {
            memory.insert(&format!("k{k}"), entry(100_000, Kept::Saved));
            assert!(
                memory.held() <= 10 * one,
                "{} > {}",
                memory.held(),
                10 * one
            );
        }
        assert_eq!(memory.entries.len(), 10);
        // The most recent ten are the ones kept.
        assert!(memory.get("k99").is_some() && memory.get("k90").is_some());
        assert!(memory.get("k89").is_none());
        // An entry past the bound alone is not kept, and evicts nothing.
        memory.insert("big", entry(11 * 100_000, Kept::Saved));
        assert!(memory.get("big").is_none());
        assert_eq!(memory.entries.len(), 10);
        for k in 90..100 {
            assert!(memory.remove(&format!("k{k}")));
        }
        assert_eq!(memory.held(), 0);
    }

    #[test]
    fn entries_the_store_lacks_are_evicted_last_and_those_being_written_not_at_all() {
        let one = entry(1_000, Kept::Saved).bytes;
        let mut memory = Memory::new(3 * one);
        memory.insert("unsaved", entry(1_000, Kept::Unsaved));
        memory.insert("a", entry(1_000, Kept::Saved));
        memory.insert("b", entry(1_000, Kept::Saved));
        memory.insert("c", entry(1_000, Kept::Saved));
        assert!(memory.get("unsaved").is_some(), "a saved entry went first");
        assert!(memory.get("a").is_none());
        for k in ["w1", "w2", "w3", "w4"] {
            memory.insert(k, entry(1_000, Kept::Writing));
        }
        // Past the bound while written: everything else went, the newest saved entry too.
        assert_eq!(memory.held(), 4 * one);
        assert!(memory.get("unsaved").is_none() && memory.get("c").is_none());
        // A saved entry finds no room among them, and is not kept.
        memory.insert("d", entry(1_000, Kept::Saved));
        assert!(memory.get("d").is_none());
        // Their writes end: the bound holds again, the least recently used out first.
        for k in ["w4", "w3", "w2", "w1"] {
            let compacted = memory.get(k).map(|e| e.compacted).unwrap();
            memory.written(k, &compacted, k != "w2");
        }
        assert_eq!(memory.held(), 3 * one);
        assert!(memory.get("w4").is_none(), "the first one written went");
        assert!(memory.get("w2").is_some(), "the unsaved one stays");
    }

    #[test]
    fn a_bound_of_zero_keeps_only_entries_being_written() {
        let mut memory = Memory::new(0);
        memory.insert("saved", entry(10, Kept::Saved));
        memory.insert("writing", entry(10, Kept::Writing));
        assert!(memory.get("saved").is_none());
        let compacted = memory.get("writing").map(|e| e.compacted).unwrap();
        memory.written("writing", &compacted, true);
        assert!(memory.get("writing").is_none());
        assert_eq!(memory.held(), 0);
    }

    #[test]
    fn structures_and_binary_blocks_are_counted() {
        // 1,000 short messages: their structures weigh far more than their characters.
        let messages: Vec<Message> = (0..1_000)
            .map(|_| Message::text(Role::User, "hi"))
            .collect();
        assert!(footprint(&messages) > 1_000 * size_of::<Message>() as u64);
        let image = serde_json::json!({"type": "image_url", "image_url": {
            "url": format!("data:image/png;base64,{}", "A".repeat(1 << 20))}});
        let opaque = context_cascade::Opaque { raw: image };
        let message = Message::new(
            Role::User,
            vec![Block::Binary(opaque)],
            Default::default(),
            Map::new(),
        );
        assert!(footprint(&[message]) > 1 << 20);
    }
}
