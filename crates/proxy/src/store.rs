//! The SQLite store: summary cache, EMA calibration per model, remembered facts per
//! conversation, and the sticky prefix of each conversation.
//!
//! One connection behind a mutex: every statement is a single-row read or write, short
//! enough to run on the request's task. A store failure never fails a request (callers log
//! it and carry on without the cache).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use context_cascade::Scale;
use rusqlite::{Connection, OptionalExtension, params};

use crate::config::IN_MEMORY_DB;
use crate::error::ProxyError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS summaries (
    key TEXT PRIMARY KEY,
    max_tokens INTEGER NOT NULL,
    summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS calibration (
    model TEXT PRIMARY KEY,
    scale REAL NOT NULL,
    observations INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS facts (
    conversation TEXT NOT NULL,
    hash TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (conversation, hash)
);
CREATE TABLE IF NOT EXISTS sessions (
    conversation TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    originals TEXT NOT NULL,
    compacted BLOB NOT NULL
);
";

/// A conversation's last upstream request, as [`crate::stability`] keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// `openai` or `anthropic`.
    pub format: String,
    /// Hex hashes of the original incoming messages.
    pub originals: Vec<String>,
    /// The compacted messages sent upstream, as a request body of that format.
    pub compacted: Vec<u8>,
}

/// The SQLite store.
pub struct Store {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path`; `":memory:"` keeps it in memory.
    pub fn open(path: &Path) -> Result<Store, ProxyError> {
        if path != Path::new(IN_MEMORY_DB)
            && let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        let connection = Connection::open(path)?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        connection.execute_batch(SCHEMA)?;
        Ok(Store {
            connection: Mutex::new(connection),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A cached summary and the token limit it was made under.
    pub fn summary(&self, key: &str) -> rusqlite::Result<Option<(String, u64)>> {
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
    }

    /// Caches a summary made under `max_tokens`.
    pub fn put_summary(&self, key: &str, max_tokens: u64, summary: &str) -> rusqlite::Result<()> {
        self.lock().execute(
            "INSERT OR REPLACE INTO summaries (key, max_tokens, summary) VALUES (?1, ?2, ?3)",
            params![key, clamp_i64(max_tokens), summary],
        )?;
        Ok(())
    }

    /// Every persisted calibration scale.
    pub fn calibration(&self) -> rusqlite::Result<Vec<(String, Scale)>> {
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
    }

    /// Persists one model's scale.
    pub fn save_scale(&self, model: &str, scale: Scale) -> rusqlite::Result<()> {
        self.lock().execute(
            "INSERT OR REPLACE INTO calibration (model, scale, observations) VALUES (?1, ?2, ?3)",
            params![model, scale.scale, clamp_i64(scale.observations)],
        )?;
        Ok(())
    }

    /// Stores a remembered fact; returns whether it was new.
    pub fn add_fact(&self, conversation: &str, hash: &str, text: &str) -> rusqlite::Result<bool> {
        let connection = self.lock();
        let seq: i64 = connection.query_row(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM facts WHERE conversation = ?1",
            params![conversation],
            |row| row.get(0),
        )?;
        let inserted = connection.execute(
            "INSERT OR IGNORE INTO facts (conversation, hash, seq, text) VALUES (?1, ?2, ?3, ?4)",
            params![conversation, hash, seq, text],
        )?;
        Ok(inserted > 0)
    }

    /// The facts remembered for a conversation, oldest first.
    pub fn facts(&self, conversation: &str) -> rusqlite::Result<Vec<String>> {
        let connection = self.lock();
        let mut statement =
            connection.prepare("SELECT text FROM facts WHERE conversation = ?1 ORDER BY seq")?;
        let rows = statement.query_map(params![conversation], |row| row.get::<_, String>(0))?;
        rows.collect()
    }

    /// Saves a conversation's last upstream request.
    pub fn save_session(
        &self,
        conversation: &str,
        session: &StoredSession,
    ) -> rusqlite::Result<()> {
        let originals = session.originals.join(",");
        self.lock().execute(
            "INSERT OR REPLACE INTO sessions (conversation, format, originals, compacted)
             VALUES (?1, ?2, ?3, ?4)",
            params![conversation, session.format, originals, session.compacted],
        )?;
        Ok(())
    }

    /// How many conversations have a saved upstream request.
    pub fn session_count(&self) -> rusqlite::Result<u64> {
        self.lock()
            .query_row("SELECT COUNT(*) FROM sessions", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|n| n.max(0) as u64)
    }

    /// Forgets a conversation's last upstream request.
    pub fn delete_session(&self, conversation: &str) -> rusqlite::Result<()> {
        self.lock().execute(
            "DELETE FROM sessions WHERE conversation = ?1",
            params![conversation],
        )?;
        Ok(())
    }

    /// A conversation's last upstream request, if one was saved.
    pub fn session(&self, conversation: &str) -> rusqlite::Result<Option<StoredSession>> {
        self.lock()
            .query_row(
                "SELECT format, originals, compacted FROM sessions WHERE conversation = ?1",
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
                        compacted: row.get(2)?,
                    })
                },
            )
            .optional()
    }
}

fn clamp_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        Store::open(Path::new(IN_MEMORY_DB)).unwrap()
    }

    #[test]
    fn summaries_round_trip() {
        let s = store();
        assert_eq!(s.summary("k").unwrap(), None);
        s.put_summary("k", 500, "sum").unwrap();
        assert_eq!(s.summary("k").unwrap(), Some(("sum".into(), 500)));
    }

    #[test]
    fn facts_are_deduplicated_and_ordered() {
        let s = store();
        assert!(s.add_fact("c", "h1", "first").unwrap());
        assert!(s.add_fact("c", "h2", "second").unwrap());
        assert!(!s.add_fact("c", "h1", "first").unwrap());
        assert_eq!(s.facts("c").unwrap(), vec!["first", "second"]);
        assert!(s.facts("other").unwrap().is_empty());
    }

    #[test]
    fn calibration_and_sessions_persist() {
        let s = store();
        let scale = Scale {
            scale: 1.3,
            observations: 4,
        };
        s.save_scale("m", scale).unwrap();
        assert_eq!(s.calibration().unwrap(), vec![("m".to_string(), scale)]);
        let session = StoredSession {
            format: "openai".into(),
            originals: vec!["aa".into(), "bb".into()],
            compacted: b"{}".to_vec(),
        };
        s.save_session("c", &session).unwrap();
        assert_eq!(s.session("c").unwrap(), Some(session));
    }
}
