//! What the store keeps and how: private files, a time to live, a size cap, and decisions
//! and hashes instead of whole conversations.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cascade_proxy::store::{Retention, SqliteStore, StateStore};
use common::{LAST, Script, history, post, start};
use serde_json::json;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cascade-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn files_are_private_and_sessions_keep_no_whole_conversation() {
    let root = temp_dir("perms");
    let db = root.join("state").join("cascade.db");
    let path = db.clone();
    let h = start(Script::new(1_000_000), move |c| {
        c.window.force = Some(6000);
        c.state.path = path;
    })
    .await;
    let body = json!({"model": "gpt-4o", "messages": history(12, 1500, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-context-cascade").is_some());
    tokio::time::sleep(Duration::from_millis(300)).await; // the session is written off-path
    assert_eq!(mode(db.parent().unwrap()), 0o700);
    for entry in std::fs::read_dir(db.parent().unwrap()).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    let connection = rusqlite::Connection::open(&db).unwrap();
    let stored: i64 = connection
        .query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 1, "the compacted conversation is remembered");
    let dump: String = connection
        .query_row(
            "SELECT group_concat(CAST(session AS TEXT), '') FROM sessions",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // Kept messages are referenced by position, not copied.
    assert!(!dump.contains("careful coding agent"), "{dump}");
    assert!(!dump.contains(LAST), "{dump}");
    let _ = std::fs::remove_dir_all(&root);
}

/// The facts a store holds are found after it is opened again (the store answers "none"
/// from memory for a conversation without facts, and that memory is read from the file at
/// open), and a conversation without facts still has none.
#[tokio::test]
async fn facts_are_found_after_the_store_is_opened_again() {
    let root = temp_dir("facts-reopen");
    let path = root.join("c.db");
    {
        let store = SqliteStore::open(&path, Retention::default()).unwrap();
        assert!(store.add_fact("conv", "h", "a fact").await.unwrap());
        assert_eq!(store.facts("conv").await.unwrap(), ["a fact"]);
    }
    let store = SqliteStore::open(&path, Retention::default()).unwrap();
    assert_eq!(store.facts("conv").await.unwrap(), ["a fact"]);
    assert!(store.facts("other").await.unwrap().is_empty());
    // A fact added after the open is found too.
    assert!(store.add_fact("other", "h", "another").await.unwrap());
    assert_eq!(store.facts("other").await.unwrap(), ["another"]);
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn entries_older_than_the_ttl_are_evicted() {
    let root = temp_dir("ttl");
    let retention = Retention {
        ttl: Duration::from_secs(7 * 24 * 3600),
        max_bytes: 1 << 30,
    };
    let store = SqliteStore::open(&root.join("c.db"), retention).unwrap();
    store.put_summary("k", 100, "a summary").await.unwrap();
    store.add_fact("conv", "h", "a fact").await.unwrap();
    // One pass of the store's eviction timer, as of a day later, then of eight days later.
    store.evict(now() + 24 * 3600).unwrap();
    assert!(store.summary("k").await.unwrap().is_some());
    assert_eq!(store.facts("conv").await.unwrap().len(), 1);
    store.evict(now() + 8 * 24 * 3600).unwrap();
    assert!(store.summary("k").await.unwrap().is_none());
    assert!(store.facts("conv").await.unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn the_size_cap_evicts_the_oldest_entries() {
    let root = temp_dir("cap");
    let retention = Retention {
        ttl: Duration::from_secs(7 * 24 * 3600),
        max_bytes: 20_000,
    };
    let store = SqliteStore::open(&root.join("c.db"), retention).unwrap();
    let text = "s".repeat(1000);
    for i in 0..100 {
        store
            .put_summary(&format!("k{i}"), 100, &text)
            .await
            .unwrap();
    }
    // The writes themselves kept the cap (tests/store_forgets.rs checks every write); the
    // timer's pass finds nothing more to do.
    assert!(store.stored_bytes().unwrap() <= 20_000);
    assert_eq!(store.evict(now()).unwrap(), 0);
    assert!(
        store.summary("k99").await.unwrap().is_some(),
        "the newest stays"
    );
    assert!(
        store.summary("k0").await.unwrap().is_none(),
        "the oldest goes"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Recall's sealed chunks count against the cap like the other tables: each write keeps
/// the cap, the oldest chunks go first, a chunk kept again is not counted twice, and the
/// time to live takes them too.
#[tokio::test]
async fn recall_chunks_are_counted_and_evicted_by_the_cap() {
    let root = temp_dir("recall-cap");
    let retention = Retention {
        ttl: Duration::from_secs(7 * 24 * 3600),
        max_bytes: 20_000,
    };
    let store = SqliteStore::open(&root.join("r.db"), retention).unwrap();
    for i in 0..40 {
        let rows = vec![(format!("tag{i:02}"), vec![b'x'; 1000])];
        store.put_recall("conv", rows).await.unwrap();
        let stored = store.stored_bytes().unwrap();
        assert!(stored <= 20_000, "write {i}: {stored} bytes stored");
    }
    let kept = store.recall_rows("conv").await.unwrap().len();
    assert!((10..40).contains(&kept), "the cap keeps the newest: {kept}");
    // The newest again: only marked used, counted once.
    let before = store.stored_bytes().unwrap();
    let again = vec![("tag39".to_owned(), vec![b'x'; 1000])];
    store.put_recall("conv", again).await.unwrap();
    assert_eq!(store.stored_bytes().unwrap(), before);
    assert_eq!(store.recall_rows("conv").await.unwrap().len(), kept);
    assert!(store.evict(now() + 8 * 24 * 3600).unwrap() >= kept);
    assert_eq!(store.stored_bytes().unwrap(), 0);
    assert!(store.recall_rows("conv").await.unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&root);
}

/// `--state redis://` on a fresh machine (no data directory yet): the folder of the tenancy
/// secret is created 0700 and the proxy starts (Redis is connected lazily); a folder that
/// cannot be made is an error naming the secret's path and what to do.
#[tokio::test]
async fn redis_mode_starts_on_a_fresh_machine_and_names_an_unusable_path() {
    let root = temp_dir("fresh-redis");
    let db = root.join("new").join("cascade.db");
    let mut config = cascade_proxy::ProxyConfig::new("http://127.0.0.1:9");
    config.state.url = Some("redis://127.0.0.1:1".into());
    config.state.path = db.clone();
    config.window.discover = false;
    cascade_proxy::AppState::new(config.clone()).expect("starts without a data directory");
    assert_eq!(mode(db.parent().unwrap()), 0o700);
    assert_eq!(mode(&cascade_proxy::secret_path(&db)), 0o600);

    let file = root.join("a-file");
    std::fs::write(&file, b"not a folder").unwrap();
    config.state.path = file.join("cascade.db");
    let error = cascade_proxy::AppState::new(config)
        .err()
        .expect("no folder can be made");
    let text = error.to_string();
    assert!(text.contains("a-file/cascade.db.secret"), "{text}");
    assert!(text.contains("--db PATH") && !text.contains('\n'), "{text}");
}

/// A database from before the calibration's weight was kept (schema 3 without the column)
/// opens, keeps its scales and reads them with weight 0; new scales keep their weight.
#[tokio::test]
async fn an_older_calibration_table_gains_the_weight_column() {
    let root = temp_dir("old-calibration");
    std::fs::create_dir_all(&root).unwrap();
    let db = root.join("cascade.db");
    let old = rusqlite::Connection::open(&db).unwrap();
    old.execute_batch(
        "CREATE TABLE calibration (model TEXT PRIMARY KEY, scale REAL NOT NULL,
                                   observations INTEGER NOT NULL);
         INSERT INTO calibration VALUES ('gpt-4o', 1.25, 4);
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(old);
    let store = SqliteStore::open(&db, Retention::default()).unwrap();
    let scales = StateStore::calibration(&store).await.unwrap();
    let kept = scales.iter().find(|(m, _)| m == "gpt-4o").unwrap().1;
    assert_eq!((kept.scale, kept.observations, kept.weight), (1.25, 4, 0.0));
    let weighted = context_cascade::Scale {
        scale: 1.1,
        observations: 2,
        weight: 9_000.0,
    };
    store.save_scale("claude", weighted).await.unwrap();
    let scales = StateStore::calibration(&store).await.unwrap();
    assert!(scales.contains(&("claude".to_owned(), weighted)));
}
