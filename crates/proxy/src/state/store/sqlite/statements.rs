//! The SQLite store's statements, each over the connection its thread owns.

use std::time::Duration;

use context_cascade::Scale;
use rusqlite::{Connection, OptionalExtension, params};

use super::super::{Retention, StoredSession, clamp_i64, now};

/// The schema version this code writes. Below 2, the conversation tables are dropped (their
/// keys predate per-credential tenancy and can no longer be reached); below 3, the sessions
/// (their records predate typed formats and xxh3 message identities).
const SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS summaries (
    key TEXT PRIMARY KEY,
    max_tokens INTEGER NOT NULL,
    summary TEXT NOT NULL,
    touched INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS calibration (
    model TEXT PRIMARY KEY,
    scale REAL NOT NULL,
    observations INTEGER NOT NULL,
    weight REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS learned_windows (
    model TEXT PRIMARY KEY,
    limit_tokens INTEGER NOT NULL,
    counts_reserve INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS facts (
    conversation TEXT NOT NULL,
    hash TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    touched INTEGER NOT NULL,
    PRIMARY KEY (conversation, hash)
);
CREATE TABLE IF NOT EXISTS recall_chunks (
    conversation TEXT NOT NULL,
    tag TEXT NOT NULL,
    sealed BLOB NOT NULL,
    touched INTEGER NOT NULL,
    PRIMARY KEY (conversation, tag)
);
CREATE TABLE IF NOT EXISTS sessions (
    conversation TEXT PRIMARY KEY,
    session BLOB NOT NULL,
    touched INTEGER NOT NULL
);
";

/// The conversation tables, with the columns whose bytes count against the size cap.
const SIZED: &[(&str, &str)] = &[
    ("summaries", "length(key) + length(summary)"),
    (
        "facts",
        "length(conversation) + length(hash) + length(text)",
    ),
    ("sessions", "length(conversation) + length(session)"),
    (
        "recall_chunks",
        "length(conversation) + length(tag) + length(sealed)",
    ),
];

/// How long a statement waits for another process holding the database (the store's own
/// statements never wait for each other: one thread runs them all).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Configures a fresh connection and brings the schema to [`SCHEMA_VERSION`].
pub(super) fn prepare(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let version: i64 = connection.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < 2 {
        connection.execute_batch(
            "DROP TABLE IF EXISTS summaries; DROP TABLE IF EXISTS facts;
             DROP TABLE IF EXISTS sessions;",
        )?;
    } else if version < SCHEMA_VERSION {
        connection.execute_batch("DROP TABLE IF EXISTS sessions;")?;
    }
    if version < SCHEMA_VERSION {
        connection.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    connection.execute_batch(SCHEMA)?;
    // A calibration table from before the size-weighted rule's weight was kept: its rows
    // read back with weight 0 (they weigh as the starting scale, as they did then).
    let has_weight = connection
        .prepare("SELECT weight FROM calibration LIMIT 0")
        .is_ok();
    if !has_weight {
        connection
            .execute_batch("ALTER TABLE calibration ADD COLUMN weight REAL NOT NULL DEFAULT 0")?;
    }
    Ok(())
}

/// Deletes conversation rows last written before `now - ttl`, then the oldest rows until
/// the stored bytes are within the cap. Returns how many rows went.
pub(super) fn evict(
    connection: &Connection,
    retention: Retention,
    now: u64,
) -> rusqlite::Result<usize> {
    let cutoff = clamp_i64(now.saturating_sub(retention.ttl.as_secs()));
    let mut evicted = 0;
    for (table, _) in SIZED {
        evicted += connection.execute(
            &format!("DELETE FROM {table} WHERE touched < ?1"),
            params![cutoff],
        )?;
    }
    let mut excess = total_bytes(connection)?.saturating_sub(retention.max_bytes);
    if excess == 0 {
        return Ok(evicted);
    }
    let union = (SIZED.iter())
        .map(|(table, size)| format!("SELECT '{table}', rowid, touched, {size} FROM {table}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let oldest: Vec<(String, i64, u64)> = {
        let mut statement = connection.prepare(&format!("{union} ORDER BY 3 ASC, 2 ASC"))?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get::<_, i64>(3)?.max(0) as u64,
            ))
        })?;
        let mut chosen = Vec::new();
        for row in rows {
            let row = row?;
            if excess == 0 {
                break;
            }
            excess = excess.saturating_sub(row.2);
            chosen.push(row);
        }
        chosen
    };
    for (table, rowid, _) in &oldest {
        evicted += connection.execute(
            &format!("DELETE FROM {table} WHERE rowid = ?1"),
            params![rowid],
        )?;
    }
    Ok(evicted)
}

/// The bytes of conversation state stored (what the size cap counts).
pub(super) fn total_bytes(connection: &Connection) -> rusqlite::Result<u64> {
    let mut total = 0u64;
    for (table, size) in SIZED {
        let bytes: i64 = connection.query_row(
            &format!("SELECT COALESCE(SUM({size}), 0) FROM {table}"),
            [],
            |r| r.get(0),
        )?;
        total = total.saturating_add(bytes.max(0) as u64);
    }
    Ok(total)
}

pub(super) fn summary(c: &Connection, key: &str) -> rusqlite::Result<Option<(String, u64)>> {
    c.query_row(
        "SELECT summary, max_tokens FROM summaries WHERE key = ?1",
        params![key],
        |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?.max(0) as u64,
            ))
        },
    )
    .optional()
}

pub(super) fn put_summary(
    c: &Connection,
    key: &str,
    max_tokens: u64,
    summary: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO summaries (key, max_tokens, summary, touched)
         VALUES (?1, ?2, ?3, ?4)",
        params![key, clamp_i64(max_tokens), summary, clamp_i64(now())],
    )?;
    Ok(())
}

pub(super) fn calibration(c: &Connection) -> rusqlite::Result<Vec<(String, Scale)>> {
    let mut statement = c.prepare("SELECT model, scale, observations, weight FROM calibration")?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            Scale {
                scale: row.get(1)?,
                observations: row.get::<_, i64>(2)?.max(0) as u64,
                weight: row.get(3)?,
            },
        ))
    })?;
    rows.collect()
}

pub(super) fn save_scale(c: &Connection, model: &str, scale: Scale) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO calibration (model, scale, observations, weight) \
         VALUES (?1, ?2, ?3, ?4)",
        params![
            model,
            scale.scale,
            clamp_i64(scale.observations),
            scale.weight
        ],
    )?;
    Ok(())
}

pub(super) fn learned_windows(c: &Connection) -> rusqlite::Result<Vec<(String, u64, bool)>> {
    let mut statement =
        c.prepare("SELECT model, limit_tokens, counts_reserve FROM learned_windows")?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?.max(0) as u64,
            row.get::<_, i64>(2)? != 0,
        ))
    })?;
    rows.collect()
}

pub(super) fn save_learned_window(
    c: &Connection,
    model: &str,
    limit: u64,
    counts_reserve: bool,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO learned_windows (model, limit_tokens, counts_reserve) \
         VALUES (?1, ?2, ?3)",
        params![model, clamp_i64(limit), i64::from(counts_reserve)],
    )?;
    Ok(())
}

pub(super) fn add_fact(
    c: &Connection,
    conversation: &str,
    hash: &str,
    text: &str,
) -> rusqlite::Result<bool> {
    let seq: i64 = c.query_row(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM facts WHERE conversation = ?1",
        params![conversation],
        |row| row.get(0),
    )?;
    let inserted = c.execute(
        "INSERT OR IGNORE INTO facts (conversation, hash, seq, text, touched)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![conversation, hash, seq, text, clamp_i64(now())],
    )?;
    Ok(inserted > 0)
}

/// Keeps sealed recall chunks (one transaction); a tag kept before is only marked used.
pub(super) fn put_recall(
    c: &Connection,
    conversation: &str,
    rows: &[(String, Vec<u8>)],
) -> rusqlite::Result<()> {
    let now = clamp_i64(now());
    let transaction = c.unchecked_transaction()?;
    {
        let mut insert = transaction.prepare_cached(
            "INSERT INTO recall_chunks (conversation, tag, sealed, touched) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (conversation, tag) DO UPDATE SET touched = excluded.touched",
        )?;
        for (tag, sealed) in rows {
            insert.execute(params![conversation, tag, sealed, now])?;
        }
    }
    transaction.commit()
}

/// A conversation's sealed recall chunks, oldest first.
pub(super) fn recall_rows(c: &Connection, conversation: &str) -> rusqlite::Result<Vec<Vec<u8>>> {
    let mut statement = c.prepare_cached(
        "SELECT sealed FROM recall_chunks WHERE conversation = ?1 ORDER BY rowid",
    )?;
    let rows = statement.query_map(params![conversation], |row| row.get(0))?;
    rows.collect()
}

/// Marks a conversation's facts as used now (they were put back into a request), so that
/// the time to live counts from their last use.
pub(super) fn touch_facts(c: &Connection, conversation: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE facts SET touched = ?2 WHERE conversation = ?1",
        params![conversation, clamp_i64(now())],
    )?;
    Ok(())
}

pub(super) fn facts(c: &Connection, conversation: &str) -> rusqlite::Result<Vec<String>> {
    let mut statement = c.prepare("SELECT text FROM facts WHERE conversation = ?1 ORDER BY seq")?;
    let rows = statement.query_map(params![conversation], |row| row.get::<_, String>(0))?;
    rows.collect()
}

pub(super) fn save_session(
    c: &Connection,
    conversation: &str,
    record: &[u8],
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO sessions (conversation, session, touched) VALUES (?1, ?2, ?3)",
        params![conversation, record, clamp_i64(now())],
    )?;
    Ok(())
}

pub(super) fn session_count(c: &Connection) -> rusqlite::Result<u64> {
    c.query_row("SELECT COUNT(*) FROM sessions", [], |row| {
        row.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
}

pub(super) fn delete_session(c: &Connection, conversation: &str) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM sessions WHERE conversation = ?1",
        params![conversation],
    )?;
    Ok(())
}

/// A conversation's record; one of another version reads as none.
pub(super) fn session(
    c: &Connection,
    conversation: &str,
) -> rusqlite::Result<Option<StoredSession>> {
    let record: Option<Vec<u8>> = c
        .query_row(
            "SELECT session FROM sessions WHERE conversation = ?1",
            params![conversation],
            |row| row.get(0),
        )
        .optional()?;
    Ok(record.and_then(|bytes| StoredSession::from_bytes(&bytes)))
}
