//! The SQLite store's statements, each over the connection its thread owns.

use std::time::Duration;

use context_cascade::Scale;
use rusqlite::{Connection, OptionalExtension, params};

use super::super::{StoredSession, clamp_i64, now};

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
CREATE INDEX IF NOT EXISTS summaries_by_age ON summaries (touched);
CREATE INDEX IF NOT EXISTS facts_by_age ON facts (touched);
CREATE INDEX IF NOT EXISTS sessions_by_age ON sessions (touched);
CREATE INDEX IF NOT EXISTS recall_chunks_by_age ON recall_chunks (touched);
";

/// `PRAGMA auto_vacuum`'s value for INCREMENTAL.
const AUTO_VACUUM_INCREMENTAL: i64 = 2;

/// How long a statement waits for another process holding the database (the store's own
/// statements never wait for each other: one thread runs them all).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Configures a fresh connection and brings the schema to [`SCHEMA_VERSION`].
///
/// What is deleted leaves the file: `secure_delete` overwrites a deleted row's bytes (and
/// every page it frees) with zeros in the same write; the rollback journal, which holds the
/// pages' earlier content while a transaction runs, is deleted at each commit
/// (`journal_mode = DELETE`: a WAL would keep old page images, evicted text included, in
/// the `-wal` file until it is overwritten); and `auto_vacuum = INCREMENTAL` lets the
/// timer's pass give freed pages back, so the file shrinks after eviction. A database made
/// before this is vacuumed once at open, which also drops the free pages in which an older
/// version left deleted text.
pub(super) fn prepare(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.pragma_update(None, "secure_delete", true)?;
    let journal: String =
        connection.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))?;
    // An in-memory database has no journal file to delete ("memory").
    if !journal.eq_ignore_ascii_case("delete") && !journal.eq_ignore_ascii_case("memory") {
        // Another process holds the database in WAL mode: it still works, but what is
        // evicted stays readable in the `-wal` file until that part of it is overwritten.
        tracing::warn!(journal, "the state database keeps its journal mode");
    }
    let auto_vacuum: i64 = connection.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    if auto_vacuum != AUTO_VACUUM_INCREMENTAL {
        connection.pragma_update(None, "auto_vacuum", AUTO_VACUUM_INCREMENTAL)?;
        connection.execute_batch("VACUUM")?;
    }
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

pub(super) fn summary(c: &Connection, key: &str) -> rusqlite::Result<Option<(String, u64)>> {
    c.prepare_cached("SELECT summary, max_tokens FROM summaries WHERE key = ?1")?
        .query_row(params![key], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?.max(0) as u64,
            ))
        })
        .optional()
}

pub(super) fn calibration(c: &Connection) -> rusqlite::Result<Vec<(String, Scale)>> {
    let mut statement =
        c.prepare_cached("SELECT model, scale, observations, weight FROM calibration")?;
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
    c.prepare_cached(
        "INSERT OR REPLACE INTO calibration (model, scale, observations, weight) \
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        model,
        scale.scale,
        clamp_i64(scale.observations),
        scale.weight
    ])?;
    Ok(())
}

pub(super) fn learned_windows(c: &Connection) -> rusqlite::Result<Vec<(String, u64, bool)>> {
    let mut statement =
        c.prepare_cached("SELECT model, limit_tokens, counts_reserve FROM learned_windows")?;
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
    c.prepare_cached(
        "INSERT OR REPLACE INTO learned_windows (model, limit_tokens, counts_reserve) \
         VALUES (?1, ?2, ?3)",
    )?
    .execute(params![model, clamp_i64(limit), i64::from(counts_reserve)])?;
    Ok(())
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
    c.prepare_cached("UPDATE facts SET touched = ?2 WHERE conversation = ?1")?
        .execute(params![conversation, clamp_i64(now())])?;
    Ok(())
}

pub(super) fn facts(c: &Connection, conversation: &str) -> rusqlite::Result<Vec<String>> {
    let mut statement =
        c.prepare_cached("SELECT text FROM facts WHERE conversation = ?1 ORDER BY seq")?;
    let rows = statement.query_map(params![conversation], |row| row.get::<_, String>(0))?;
    rows.collect()
}

pub(super) fn session_count(c: &Connection) -> rusqlite::Result<u64> {
    c.prepare_cached("SELECT COUNT(*) FROM sessions")?
        .query_row([], |row| row.get::<_, i64>(0))
        .map(|n| n.max(0) as u64)
}

/// A conversation's record; one of another version reads as none.
pub(super) fn session(
    c: &Connection,
    conversation: &str,
) -> rusqlite::Result<Option<StoredSession>> {
    let record: Option<Vec<u8>> = c
        .prepare_cached("SELECT session FROM sessions WHERE conversation = ?1")?
        .query_row(params![conversation], |row| row.get(0))
        .optional()?;
    Ok(record.and_then(|bytes| StoredSession::from_bytes(&bytes)))
}
