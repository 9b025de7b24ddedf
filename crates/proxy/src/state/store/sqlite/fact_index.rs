//! Which conversations have stored facts, kept beside the store's connection.
//!
//! The fast path asks for the facts of every request's conversation (a stored fact missing
//! from the request must be put back), and nearly every conversation has none: a round
//! trip to the store's thread and a read transaction for an empty answer was 0.1–0.2 ms of
//! the 0.6–1.0 ms the proxy added per request (issue 27). The index answers "none" at once
//! for a conversation it does not hold; one it holds is read from the file as before.
//!
//! It is written only on the store's thread, in the order of the statements: built at
//! open, a conversation added whenever one of its facts is in the table after a write, and
//! built again after each eviction pass (which only deletes). So it never says "none" of a
//! conversation whose facts this process's statements can read, and an entry left by an
//! eviction costs only a read. Like the rest of the SQLite store's memory (calibration,
//! sticky prefixes), it is this process's: facts another process writes into the same file
//! are not seen (several replicas share state through Redis, whose store has no index).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

use rusqlite::Connection;

/// At most this many conversations are indexed (8 bytes each); past that the index is set
/// aside and every conversation is read from the file until an eviction pass finds fewer.
const INDEXED: usize = 1 << 16;

/// The conversations with facts, each by a keyed hash of its key (two that collide only
/// cost a read), or `None` when there are too many to keep.
pub(in crate::state::store) struct FactIndex {
    keys: RandomState,
    held: Mutex<Option<HashSet<u64>>>,
}

impl FactIndex {
    /// The index of what `connection` holds.
    pub(super) fn read(connection: &Connection) -> rusqlite::Result<FactIndex> {
        let index = FactIndex {
            keys: RandomState::new(),
            held: Mutex::new(None),
        };
        index.rebuild(connection)?;
        Ok(index)
    }

    /// Reads the index again from the table (after rows were deleted).
    pub(super) fn rebuild(&self, connection: &Connection) -> rusqlite::Result<()> {
        let mut statement =
            connection.prepare_cached("SELECT DISTINCT conversation FROM facts LIMIT ?1")?;
        let rows = statement.query_map([INDEXED as i64 + 1], |row| row.get::<_, String>(0))?;
        let mut held = HashSet::new();
        for conversation in rows {
            held.insert(self.key(&conversation?));
        }
        *self.lock() = (held.len() <= INDEXED).then_some(held);
        Ok(())
    }

    /// Notes that `conversation` has a fact in the table.
    pub(super) fn note(&self, conversation: &str) {
        let key = self.key(conversation);
        let mut held = self.lock();
        if let Some(keys) = held.as_mut() {
            keys.insert(key);
            if keys.len() > INDEXED {
                *held = None;
            }
        }
    }

    /// Whether `conversation` may have facts (false: it has none).
    pub(super) fn may_hold(&self, conversation: &str) -> bool {
        let key = self.key(conversation);
        self.lock().as_ref().is_none_or(|keys| keys.contains(&key))
    }

    fn key(&self, conversation: &str) -> u64 {
        self.keys.hash_one(conversation)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashSet<u64>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    fn table() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE facts (conversation TEXT, hash TEXT)")
            .unwrap();
        c
    }

    /// What the table holds at open or after a rebuild, and what is noted, may hold facts;
    /// any other conversation has none.
    #[test]
    fn the_index_holds_the_conversations_with_facts() {
        let c = table();
        c.execute_batch("INSERT INTO facts VALUES ('a', 'h1'), ('a', 'h2'), ('b', 'h')")
            .unwrap();
        let index = FactIndex::read(&c).unwrap();
        assert!(index.may_hold("a") && index.may_hold("b"));
        assert!(!index.may_hold("c"));
        index.note("c");
        assert!(index.may_hold("c"));
        c.execute_batch("DELETE FROM facts WHERE conversation = 'a'")
            .unwrap();
        index.rebuild(&c).unwrap();
        assert!(!index.may_hold("a") && index.may_hold("b"));
        assert!(!index.may_hold("c"), "rebuilt from the table alone");
    }

    /// Past its size the index is set aside: every conversation may hold facts.
    #[test]
    fn too_many_conversations_are_read_from_the_file() {
        let c = table();
        let index = FactIndex::read(&c).unwrap();
        for i in 0..=INDEXED {
            index.note(&i.to_string());
        }
        assert!(index.may_hold("never written"));
        index.rebuild(&c).unwrap();
        assert!(!index.may_hold("never written"));
    }
}
