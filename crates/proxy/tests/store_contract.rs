//! The state store contract (tests/common/store_suite.rs) against SQLite, the default
//! store: in memory and in a file. The same suite runs against Redis in
//! tests/store_redis.rs (`--features redis-tests`).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

#[path = "common/store_suite.rs"]
mod store_suite;

use std::path::Path;

use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::store::{SqliteStore, StateStore};

#[tokio::test]
async fn sqlite_in_memory_keeps_the_contract() {
    let store = SqliteStore::open(Path::new(IN_MEMORY_DB), Default::default()).unwrap();
    assert!(!store.shared());
    store_suite::contract(&store, "mem").await;
}

#[tokio::test]
async fn sqlite_file_keeps_the_contract_across_reopening() {
    let dir = std::env::temp_dir().join(format!("cascade-contract-{}", std::process::id()));
    let path = dir.join("state.db");
    {
        let store = SqliteStore::open(&path, Default::default()).unwrap();
        store_suite::contract(&store, "file").await;
        store.put_summary("kept", 9, "still here").await.unwrap();
    }
    let store = SqliteStore::open(&path, Default::default()).unwrap();
    let found = StateStore::summary(&store, "kept").await.unwrap();
    assert_eq!(found, Some(("still here".into(), 9)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn sessions_of_an_older_version_read_as_absent_and_the_rest_stays() {
    let dir = std::env::temp_dir().join(format!("cascade-v2-{}", std::process::id()));
    let path = dir.join("state.db");
    std::fs::create_dir_all(&dir).unwrap();
    {
        // What the previous version wrote: a format string and SHA-256 hashes.
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(
            "PRAGMA user_version = 2;
             CREATE TABLE summaries (key TEXT PRIMARY KEY, max_tokens INTEGER NOT NULL,
                 summary TEXT NOT NULL, touched INTEGER NOT NULL);
             INSERT INTO summaries VALUES ('kept', 9, 'still here', strftime('%s','now'));
             CREATE TABLE sessions (conversation TEXT PRIMARY KEY, format TEXT NOT NULL,
                 originals TEXT NOT NULL, decisions BLOB NOT NULL, touched INTEGER NOT NULL);
             INSERT INTO sessions VALUES ('c', 'openai', 'aa', X'30', strftime('%s','now'));",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, Default::default()).unwrap();
    assert_eq!(store.session("c").await.unwrap(), None);
    assert_eq!(store.session_count().unwrap(), 0);
    let found = StateStore::summary(&store, "kept").await.unwrap();
    assert_eq!(found, Some(("still here".into(), 9)));
    assert_eq!(store.failure(), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_state_key_names_redis_or_is_rejected() {
    use cascade_proxy::ProxyConfig;
    let config = ProxyConfig::from_toml_str("[state]\nurl = \"redis://127.0.0.1:6379/2\"").unwrap();
    assert_eq!(
        config.state.url.as_deref(),
        Some("redis://127.0.0.1:6379/2")
    );
    assert_eq!(ProxyConfig::from_toml_str("").unwrap().state.url, None);
    let err = ProxyConfig::from_toml_str("[state]\nurl = \"mysql://x\"").unwrap_err();
    assert!(err.to_string().contains("redis://"), "{err}");
}
