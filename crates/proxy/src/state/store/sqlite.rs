//! The SQLite store (the embedded default): summary cache, EMA calibration per model,
//! remembered facts per conversation, and the sticky decisions of each conversation.
//!
//! What is kept, and for how long (SPEC "Proxy state"): the database, its journal files and
//! the tenancy secret are created 0600 in a 0700 directory. Conversation state is keyed by a
//! keyed hash of the credential and the conversation, never the credential. A sticky session
//! keeps the hashes of the messages it covers and, per message sent upstream, either "the
//! client's message i" or the text the cascade wrote in its place (a summary, a shortened
//! tool output): never a copy of the messages the client sends again anyway. Every row
//! carries the time it was last written; rows older than the time to live go, and beyond
//! the size cap the oldest go first ([`SqliteStore::evict`], run at open and every
//! [`EVICT_EVERY`] writes). Calibration rows are per model and hold no content.
//!
//! One connection behind a mutex: every statement is a single-row read or write, short
//! enough to run on the request's task. A store failure never fails a request (callers log
//! it and carry on without the cache).

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use context_cascade::{BoxFuture, Scale};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Retention, StateStore, StoreResult, StoredSession, clamp_i64, now};
use crate::config::IN_MEMORY_DB;
use crate::error::ProxyError;

/// The schema version this code writes; older conversation tables are dropped (their keys
/// predate per-credential tenancy and can no longer be reached).
const SCHEMA_VERSION: i64 = 2;
/// Eviction runs after this many writes.
pub const EVICT_EVERY: u64 = 256;

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
    observations INTEGER NOT NULL
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
CREATE TABLE IF NOT EXISTS sessions (
    conversation TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    originals TEXT NOT NULL,
    decisions BLOB NOT NULL,
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
    (
        "sessions",
        "length(conversation) + length(originals) + length(decisions)",
    ),
];

/// The SQLite store.
pub struct SqliteStore {
    connection: Mutex<Connection>,
    retention: Retention,
    writes: AtomicU64,
    /// The last operation's error while the store fails (for `/healthz`).
    failure: Mutex<Option<String>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`; `":memory:"` keeps it in memory.
    /// A directory it creates is 0700, the file 0600 (SQLite gives its journal files the
    /// database's mode). Evicts what `retention` no longer allows.
    pub fn open(path: &Path, retention: Retention) -> Result<SqliteStore, ProxyError> {
        if path != Path::new(IN_MEMORY_DB) {
            prepare_file(path)?;
        }
        let connection = Connection::open(path)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        let version: i64 = connection.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version < SCHEMA_VERSION {
            connection.execute_batch(
                "DROP TABLE IF EXISTS summaries; DROP TABLE IF EXISTS facts;
                 DROP TABLE IF EXISTS sessions;",
            )?;
            connection.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        connection.execute_batch(SCHEMA)?;
        let store = SqliteStore {
            connection: Mutex::new(connection),
            retention,
            writes: AtomicU64::new(0),
            failure: Mutex::new(None),
        };
        store.evict(now())?;
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records whether the last operation failed, for [`SqliteStore::failure`].
    fn track<T>(&self, result: rusqlite::Result<T>) -> rusqlite::Result<T> {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        *failure = result.as_ref().err().map(ToString::to_string);
        result
    }

    /// Why the store is failing, while it is (`None` when its last operation succeeded).
    pub fn failure(&self) -> Option<String> {
        (self.failure.lock().unwrap_or_else(|p| p.into_inner())).clone()
    }

    /// Counts a write; every [`EVICT_EVERY`] writes, evicts.
    fn wrote(&self) {
        if (self.writes.fetch_add(1, Ordering::Relaxed) + 1) % EVICT_EVERY == 0
            && let Err(e) = self.evict(now())
        {
            tracing::warn!(error = %e, "could not evict old proxy state");
        }
    }

    /// Deletes conversation rows last written before `now - ttl`, then the oldest rows until
    /// the stored bytes are within the cap. Returns how many rows went.
    pub fn evict(&self, now: u64) -> rusqlite::Result<usize> {
        let result = (|| {
            let cutoff = clamp_i64(now.saturating_sub(self.retention.ttl.as_secs()));
            let connection = self.lock();
            let mut evicted = 0;
            for (table, _) in SIZED {
                evicted += connection.execute(
                    &format!("DELETE FROM {table} WHERE touched < ?1"),
                    params![cutoff],
                )?;
            }
            let mut excess = total_bytes(&connection)?.saturating_sub(self.retention.max_bytes);
            if excess == 0 {
                return Ok(evicted);
            }
            let union = (SIZED.iter())
                .map(|(table, size)| {
                    format!("SELECT '{table}', rowid, touched, {size} FROM {table}")
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL ");
            let oldest: Vec<(String, i64, u64)> = {
                let mut statement =
                    connection.prepare(&format!("{union} ORDER BY 3 ASC, 2 ASC"))?;
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
        })();
        self.track(result)
    }

    /// The bytes of conversation state stored (what the size cap counts).
    pub fn stored_bytes(&self) -> rusqlite::Result<u64> {
        let result = total_bytes(&self.lock());
        self.track(result)
    }

    /// A cached summary and the token limit it was made under.
    pub fn summary(&self, key: &str) -> rusqlite::Result<Option<(String, u64)>> {
        let result = {
            self.lock()
                .query_row(
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
        };
        self.track(result)
    }

    /// Caches a summary made under `max_tokens`.
    pub fn put_summary(&self, key: &str, max_tokens: u64, summary: &str) -> rusqlite::Result<()> {
        let result = (|| {
            self.lock().execute(
                "INSERT OR REPLACE INTO summaries (key, max_tokens, summary, touched)
                 VALUES (?1, ?2, ?3, ?4)",
                params![key, clamp_i64(max_tokens), summary, clamp_i64(now())],
            )?;
            self.wrote();
            Ok(())
        })();
        self.track(result)
    }

    /// Every persisted calibration scale.
    pub fn calibration(&self) -> rusqlite::Result<Vec<(String, Scale)>> {
        let result = (|| {
            let connection = self.lock();
            let mut statement =
                connection.prepare("SELECT model, scale, observations FROM calibration")?;
            let rows = statement.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    Scale {
                        scale: row.get(1)?,
                        observations: row.get::<_, i64>(2)?.max(0) as u64,
                    },
                ))
            })?;
            rows.collect()
        })();
        self.track(result)
    }

    /// Persists one model's scale.
    pub fn save_scale(&self, model: &str, scale: Scale) -> rusqlite::Result<()> {
        let result = (|| {
            self.lock().execute(
                "INSERT OR REPLACE INTO calibration (model, scale, observations) VALUES (?1, ?2, ?3)",
                params![model, scale.scale, clamp_i64(scale.observations)],
            )?;
            Ok(())
        })();
        self.track(result)
    }

    /// Every window learned from an overflow error: (model, limit, whether the limit counts
    /// the output reserve). Like the calibration it holds no content and is kept.
    pub fn learned_windows(&self) -> rusqlite::Result<Vec<(String, u64, bool)>> {
        let result = (|| {
            let connection = self.lock();
            let mut statement = connection
                .prepare("SELECT model, limit_tokens, counts_reserve FROM learned_windows")?;
            let rows = statement.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, i64>(1)?.max(0) as u64,
                    row.get::<_, i64>(2)? != 0,
                ))
            })?;
            rows.collect()
        })();
        self.track(result)
    }

    /// Persists the window learned for one model.
    pub fn save_learned_window(
        &self,
        model: &str,
        limit: u64,
        counts_reserve: bool,
    ) -> rusqlite::Result<()> {
        let result = (|| {
            self.lock().execute(
                "INSERT OR REPLACE INTO learned_windows (model, limit_tokens, counts_reserve) \
                 VALUES (?1, ?2, ?3)",
                params![model, clamp_i64(limit), i64::from(counts_reserve)],
            )?;
            Ok(())
        })();
        self.track(result)
    }

    /// Stores a remembered fact; returns whether it was new.
    pub fn add_fact(&self, conversation: &str, hash: &str, text: &str) -> rusqlite::Result<bool> {
        let result = (|| {
            let connection = self.lock();
            let seq: i64 = connection.query_row(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM facts WHERE conversation = ?1",
                params![conversation],
                |row| row.get(0),
            )?;
            let inserted = connection.execute(
                "INSERT OR IGNORE INTO facts (conversation, hash, seq, text, touched)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![conversation, hash, seq, text, clamp_i64(now())],
            )?;
            drop(connection);
            self.wrote();
            Ok(inserted > 0)
        })();
        self.track(result)
    }

    /// Marks a conversation's facts as used now (they were put back into a request), so
    /// that the time to live counts from their last use.
    pub fn touch_facts(&self, conversation: &str) -> rusqlite::Result<()> {
        let result = (|| {
            self.lock().execute(
                "UPDATE facts SET touched = ?2 WHERE conversation = ?1",
                params![conversation, clamp_i64(now())],
            )?;
            Ok(())
        })();
        self.track(result)
    }

    /// The facts remembered for a conversation, oldest first.
    pub fn facts(&self, conversation: &str) -> rusqlite::Result<Vec<String>> {
        let result = (|| {
            let connection = self.lock();
            let mut statement = connection
                .prepare("SELECT text FROM facts WHERE conversation = ?1 ORDER BY seq")?;
            let rows = statement.query_map(params![conversation], |row| row.get::<_, String>(0))?;
            rows.collect()
        })();
        self.track(result)
    }

    /// Saves a conversation's last upstream request.
    pub fn save_session(
        &self,
        conversation: &str,
        session: &StoredSession,
    ) -> rusqlite::Result<()> {
        let result = (|| {
            let originals = session.originals.join(",");
            self.lock().execute(
                "INSERT OR REPLACE INTO sessions (conversation, format, originals, decisions, touched)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    conversation,
                    session.format,
                    originals,
                    session.decisions,
                    clamp_i64(now())
                ],
            )?;
            self.wrote();
            Ok(())
        })();
        self.track(result)
    }

    /// How many conversations have a saved upstream request.
    pub fn session_count(&self) -> rusqlite::Result<u64> {
        let result = {
            self.lock()
                .query_row("SELECT COUNT(*) FROM sessions", [], |row| {
                    row.get::<_, i64>(0)
                })
                .map(|n| n.max(0) as u64)
        };
        self.track(result)
    }

    /// Forgets a conversation's last upstream request.
    pub fn delete_session(&self, conversation: &str) -> rusqlite::Result<()> {
        let result = (|| {
            self.lock().execute(
                "DELETE FROM sessions WHERE conversation = ?1",
                params![conversation],
            )?;
            Ok(())
        })();
        self.track(result)
    }

    /// A conversation's last upstream request, if one was saved.
    pub fn session(&self, conversation: &str) -> rusqlite::Result<Option<StoredSession>> {
        let result = {
            self.lock()
                .query_row(
                    "SELECT format, originals, decisions FROM sessions WHERE conversation = ?1",
                    params![conversation],
                    |row| {
                        let originals: String = row.get(1)?;
                        Ok(StoredSession {
                            format: row.get(0)?,
                            originals: originals
                                .split(',')
                                .filter(|s| !s.is_empty())
                                .map(str::to_owned)
                                .collect(),
                            decisions: row.get(2)?,
                        })
                    },
                )
                .optional()
        };
        self.track(result)
    }
}

fn total_bytes(connection: &Connection) -> rusqlite::Result<u64> {
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

/// Creates the database's directory 0700 (when it does not exist) and the file 0600
/// (tightening an existing file's mode: it holds conversation state).
fn prepare_file(path: &Path) -> Result<(), ProxyError> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    if path.is_dir() {
        // Not a database: SQLite says so in its own words (a store error).
        return Ok(());
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// The trait over the methods above: each future is ready on its first poll (a statement
/// on the caller's task, as before the trait existed). Callers that wrote off the request
/// path through `spawn_blocking` still do ([`crate::state::stability`]).
impl StateStore for SqliteStore {
    fn summary<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<(String, u64)>>> {
        ready(SqliteStore::summary(self, key))
    }

    fn put_summary<'a>(
        &'a self,
        key: &'a str,
        max_tokens: u64,
        summary: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>> {
        ready(SqliteStore::put_summary(self, key, max_tokens, summary))
    }

    fn calibration(&self) -> BoxFuture<'_, StoreResult<Vec<(String, Scale)>>> {
        ready(SqliteStore::calibration(self))
    }

    fn save_scale<'a>(&'a self, model: &'a str, scale: Scale) -> BoxFuture<'a, StoreResult<()>> {
        ready(SqliteStore::save_scale(self, model, scale))
    }

    fn learned_windows(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64, bool)>>> {
        ready(SqliteStore::learned_windows(self))
    }

    fn save_learned_window<'a>(
        &'a self,
        model: &'a str,
        limit: u64,
        counts_reserve: bool,
    ) -> BoxFuture<'a, StoreResult<()>> {
        ready(SqliteStore::save_learned_window(
            self,
            model,
            limit,
            counts_reserve,
        ))
    }

    fn add_fact<'a>(
        &'a self,
        conversation: &'a str,
        hash: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        ready(SqliteStore::add_fact(self, conversation, hash, text))
    }

    fn touch_facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        ready(SqliteStore::touch_facts(self, conversation))
    }

    fn facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        ready(SqliteStore::facts(self, conversation))
    }

    fn save_session<'a>(
        &'a self,
        conversation: &'a str,
        session: &'a StoredSession,
    ) -> BoxFuture<'a, StoreResult<()>> {
        ready(SqliteStore::save_session(self, conversation, session))
    }

    fn session<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, StoreResult<Option<StoredSession>>> {
        ready(SqliteStore::session(self, conversation))
    }

    fn delete_session<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        ready(SqliteStore::delete_session(self, conversation))
    }

    fn check(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    fn failure(&self) -> Option<String> {
        SqliteStore::failure(self)
    }

    fn shared(&self) -> bool {
        false
    }
}

/// A finished statement's result as a store future.
fn ready<'a, T: Send + 'a>(result: rusqlite::Result<T>) -> BoxFuture<'a, StoreResult<T>> {
    Box::pin(std::future::ready(result.map_err(Into::into)))
}
