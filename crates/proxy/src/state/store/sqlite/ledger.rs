//! The connection the store's thread owns, with a running count of the bytes of
//! conversation state it holds, and the statements that change that count.
//!
//! The cap is kept by the write that would pass it: it evicts the oldest rows first (by an
//! index on their time, a few rows per query), so the stored bytes never exceed the cap, and
//! no write scans the tables to learn the total: it is counted once at open and then kept
//! up to date by every insert, replace and delete, in the same transaction. What is evicted
//! is overwritten on disk (`secure_delete`) and the freed pages given back to the file system
//! by the timer's pass (incremental vacuum), see [`super::statements::prepare`].

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use super::super::{Retention, clamp_i64, now};
use super::fact_index::FactIndex;

/// A conversation table: its name, the column naming a row (summaries and sessions are
/// replaced by key), and the bytes a row counts against the cap.
struct Table {
    name: &'static str,
    key: &'static str,
    size: &'static str,
}

const SUMMARIES: Table = Table {
    name: "summaries",
    key: "key",
    size: "octet_length(key) + octet_length(summary)",
};
const FACTS: Table = Table {
    name: "facts",
    key: "conversation",
    size: "octet_length(conversation) + octet_length(hash) + octet_length(text)",
};
const SESSIONS: Table = Table {
    name: "sessions",
    key: "conversation",
    size: "octet_length(conversation) + octet_length(session)",
};

const RECALL_CHUNKS: Table = Table {
    name: "recall_chunks",
    key: "conversation",
    size: "octet_length(conversation) + octet_length(tag) + octet_length(sealed)",
};

/// Every table whose rows count against the cap and expire.
const SIZED: [&Table; 4] = [&SUMMARIES, &FACTS, &SESSIONS, &RECALL_CHUNKS];

/// How many of the oldest rows one eviction query reads (most writes at the cap need one).
const EVICTION_BATCH: i64 = 16;

/// The store's connection and the bytes of conversation state in it.
pub(in crate::state::store) struct Ledger {
    connection: Connection,
    retention: Retention,
    /// What the cap counts, as of the last committed statement.
    stored: u64,
    /// The conversations with facts, as of the last committed statement.
    facts: Arc<FactIndex>,
}

impl Ledger {
    /// Takes a prepared connection and counts what it holds (one scan, at open).
    pub(super) fn new(connection: Connection, retention: Retention) -> rusqlite::Result<Ledger> {
        let stored = total_bytes(&connection)?;
        let facts = Arc::new(FactIndex::read(&connection)?);
        Ok(Ledger {
            connection,
            retention,
            stored,
            facts,
        })
    }

    /// The index of the conversations with facts, which this ledger keeps up to date.
    pub(super) fn fact_index(&self) -> Arc<FactIndex> {
        self.facts.clone()
    }

    /// The connection, for statements that do not change what the cap counts.
    pub(super) fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The bytes of conversation state stored, as counted.
    pub(super) fn stored(&self) -> u64 {
        self.stored
    }

    /// The timer's pass as of `now`: deletes the rows last written before `now - ttl`, then
    /// the oldest while over the cap (a cap lowered since the last run), then gives the
    /// freed pages back to the file system. Returns how many rows went.
    pub(super) fn sweep(&mut self, now: u64) -> rusqlite::Result<usize> {
        let cutoff = clamp_i64(now.saturating_sub(self.retention.ttl.as_secs()));
        let transaction = self.connection.unchecked_transaction()?;
        let (mut evicted, mut stored) = (0, self.stored);
        for table in SIZED {
            let freed: i64 = transaction
                .prepare_cached(&format!(
                    "SELECT COALESCE(SUM({}), 0) FROM {} WHERE touched < ?1",
                    table.size, table.name
                ))?
                .query_row(params![cutoff], |row| row.get(0))?;
            stored = stored.saturating_sub(freed.max(0) as u64);
            evicted += transaction
                .prepare_cached(&format!("DELETE FROM {} WHERE touched < ?1", table.name))?
                .execute(params![cutoff])?;
        }
        evicted += make_room(&transaction, &mut stored, self.retention.max_bytes, 0)?;
        transaction.commit()?;
        self.stored = stored;
        self.facts.rebuild(&self.connection)?;
        give_back_free_pages(&self.connection)?;
        Ok(evicted)
    }

    /// Caches a summary made under `max_tokens`, replacing the one under the same key.
    pub(super) fn put_summary(
        &mut self,
        key: &str,
        max_tokens: u64,
        summary: &str,
    ) -> rusqlite::Result<()> {
        let bytes = key.len() + summary.len();
        self.replace(&SUMMARIES, key, bytes, |c| {
            c.prepare_cached(
                "INSERT INTO summaries (key, max_tokens, summary, touched) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                key,
                clamp_i64(max_tokens),
                summary,
                clamp_i64(now())
            ])
        })
    }

    /// Saves a conversation's sticky record, replacing the one before.
    pub(super) fn save_session(
        &mut self,
        conversation: &str,
        record: &[u8],
    ) -> rusqlite::Result<()> {
        let bytes = conversation.len() + record.len();
        self.replace(&SESSIONS, conversation, bytes, |c| {
            c.prepare_cached(
                "INSERT INTO sessions (conversation, session, touched) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![conversation, record, clamp_i64(now())])
        })
    }

    /// Forgets a conversation's sticky record.
    pub(super) fn delete_session(&mut self, conversation: &str) -> rusqlite::Result<()> {
        let transaction = self.connection.unchecked_transaction()?;
        let freed = delete_by_key(&transaction, &SESSIONS, conversation)?;
        transaction.commit()?;
        self.stored = self.stored.saturating_sub(freed);
        Ok(())
    }

    /// Stores a fact (already cut to what a store keeps, see [`super::super::fact`]) after
    /// the conversation's others; returns whether it was new.
    pub(super) fn add_fact(
        &mut self,
        conversation: &str,
        hash: &str,
        text: &str,
    ) -> rusqlite::Result<bool> {
        let known = self
            .connection
            .prepare_cached("SELECT 1 FROM facts WHERE conversation = ?1 AND hash = ?2")?
            .query_row(params![conversation, hash], |_| Ok(()))
            .optional()?;
        let bytes = conversation.len() + hash.len() + text.len();
        if known.is_some() {
            self.facts.note(conversation);
            return Ok(false);
        }
        if !self.retention.fits("fact", bytes) {
            return Ok(false);
        }
        let transaction = self.connection.unchecked_transaction()?;
        let mut stored = self.stored;
        make_room(
            &transaction,
            &mut stored,
            self.retention.max_bytes,
            bytes as u64,
        )?;
        let seq: i64 = transaction
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM facts WHERE conversation = ?1")?
            .query_row(params![conversation], |row| row.get(0))?;
        // OR IGNORE: another process may have written the same fact since the check.
        let inserted = transaction
            .prepare_cached(
                "INSERT OR IGNORE INTO facts (conversation, hash, seq, text, touched)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![conversation, hash, seq, text, clamp_i64(now())])?;
        transaction.commit()?;
        self.stored = stored + if inserted > 0 { bytes as u64 } else { 0 };
        // Inserted, or ignored as another process's same fact: the row is there.
        self.facts.note(conversation);
        Ok(inserted > 0)
    }

    /// Keeps sealed recall chunks (one transaction): a tag kept before is only marked
    /// used; a new one is counted, room made for it first. A chunk over the per-entry cap
    /// is not kept.
    pub(super) fn put_recall(
        &mut self,
        conversation: &str,
        rows: &[(String, Vec<u8>)],
    ) -> rusqlite::Result<()> {
        let now = clamp_i64(now());
        let transaction = self.connection.unchecked_transaction()?;
        let mut stored = self.stored;
        for (tag, sealed) in rows {
            let touched = transaction
                .prepare_cached(
                    "UPDATE recall_chunks SET touched = ?3 WHERE conversation = ?1 AND tag = ?2",
                )?
                .execute(params![conversation, tag, now])?;
            let bytes = conversation.len() + tag.len() + sealed.len();
            if touched > 0 || !self.retention.fits(RECALL_CHUNKS.name, bytes) {
                continue;
            }
            make_room(
                &transaction,
                &mut stored,
                self.retention.max_bytes,
                bytes as u64,
            )?;
            // OR IGNORE: another process may have kept the same chunk since the update.
            let inserted = transaction
                .prepare_cached(
                    "INSERT OR IGNORE INTO recall_chunks (conversation, tag, sealed, touched)
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![conversation, tag, sealed, now])?;
            stored += if inserted > 0 { bytes as u64 } else { 0 };
        }
        transaction.commit()?;
        self.stored = stored;
        Ok(())
    }

    /// Writes the row of `table` named `key` (`bytes` long) in place of the one before:
    /// the old row's bytes are freed, room is made for the new ones, then `insert` runs, all
    /// in one transaction. An entry over the per-entry cap is not written.
    fn replace(
        &mut self,
        table: &Table,
        key: &str,
        bytes: usize,
        insert: impl FnOnce(&Connection) -> rusqlite::Result<usize>,
    ) -> rusqlite::Result<()> {
        if !self.retention.fits(table.name, bytes) {
            return Ok(());
        }
        let transaction = self.connection.unchecked_transaction()?;
        let freed = delete_by_key(&transaction, table, key)?;
        let mut stored = self.stored.saturating_sub(freed);
        make_room(
            &transaction,
            &mut stored,
            self.retention.max_bytes,
            bytes as u64,
        )?;
        insert(&transaction)?;
        transaction.commit()?;
        self.stored = stored + bytes as u64;
        Ok(())
    }
}

/// Hands the free pages (zeroed when they were freed: `secure_delete`) back to the file
/// system. The pragma frees one page per step: it is stepped to its end.
fn give_back_free_pages(connection: &Connection) -> rusqlite::Result<()> {
    let mut statement = connection.prepare_cached("PRAGMA incremental_vacuum")?;
    let mut steps = statement.query([])?;
    while steps.next()?.is_some() {}
    Ok(())
}

/// Deletes the row of `table` named `key`; returns the bytes it counted.
fn delete_by_key(connection: &Connection, table: &Table, key: &str) -> rusqlite::Result<u64> {
    let freed: Option<i64> = connection
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE {} = ?1 RETURNING {}",
            table.name, table.key, table.size
        ))?
        .query_row(params![key], |row| row.get(0))
        .optional()?;
    Ok(freed.unwrap_or(0).max(0) as u64)
}

/// Deletes the oldest rows until `incoming` more bytes fit under `cap`; keeps `stored` up to
/// date. Returns how many rows went. Reads the oldest [`EVICTION_BATCH`] rows at a time by
/// the tables' `touched` indexes (the query merges four ordered index scans).
fn make_room(
    connection: &Connection,
    stored: &mut u64,
    cap: u64,
    incoming: u64,
) -> rusqlite::Result<usize> {
    let over = |stored: u64| stored.saturating_add(incoming) > cap;
    let mut evicted = 0;
    if !over(*stored) {
        return Ok(evicted);
    }
    let union = (SIZED.iter().enumerate())
        .map(|(i, t)| format!("SELECT {i}, rowid, touched, {} FROM {}", t.size, t.name))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let oldest = format!("{union} ORDER BY 3, 2 LIMIT {EVICTION_BATCH}");
    while over(*stored) {
        let batch: Vec<(usize, i64, i64)> = {
            let mut statement = connection.prepare_cached(&oldest)?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(3)?)));
            rows?.collect::<rusqlite::Result<_>>()?
        };
        if batch.is_empty() {
            // Nothing left to evict: the count was off (a row written by another process).
            *stored = 0;
            break;
        }
        for (table, rowid, bytes) in batch {
            if !over(*stored) {
                break;
            }
            let Some(Table { name, .. }) = SIZED.get(table) else {
                return Err(rusqlite::Error::IntegralValueOutOfRange(0, table as i64));
            };
            evicted += connection
                .prepare_cached(&format!("DELETE FROM {name} WHERE rowid = ?1"))?
                .execute(params![rowid])?;
            *stored = stored.saturating_sub(bytes.max(0) as u64);
        }
    }
    Ok(evicted)
}

/// The bytes of conversation state stored, counted from the rows (what the cap counts).
pub(super) fn total_bytes(connection: &Connection) -> rusqlite::Result<u64> {
    let mut total = 0u64;
    for table in SIZED {
        let bytes: i64 = connection
            .prepare_cached(&format!(
                "SELECT COALESCE(SUM({}), 0) FROM {}",
                table.size, table.name
            ))?
            .query_row([], |r| r.get(0))?;
        total = total.saturating_add(bytes.max(0) as u64);
    }
    Ok(total)
}
