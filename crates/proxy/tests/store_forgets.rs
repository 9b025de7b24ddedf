//! The SQLite file forgets (issue 23, item 4): what eviction removes is gone from the bytes
//! on disk, the size cap holds at every write, and one huge remembered fact is kept as its
//! head and a note.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cascade_proxy::store::{Retention, SqliteStore, StateStore, StoredSession};
use context_cascade::Format;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cascade-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// How many times `needle` occurs in the database file and in every journal beside it.
fn copies_on_disk(db: &Path, needle: &[u8]) -> usize {
    let mut copies = 0;
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        if let Ok(bytes) = std::fs::read(PathBuf::from(name)) {
            copies += bytes.windows(needle.len()).filter(|w| *w == needle).count();
        }
    }
    copies
}

/// The repro: a 2 s time to live, a 50 kB cap, 300 facts of 2 KB (and summaries and
/// sticky records beside them). Every planted text is readable before eviction and nowhere in
/// the file or its journals after it.
#[tokio::test]
async fn evicted_rows_leave_no_readable_text() {
    let root = temp_dir("forgets");
    let db = root.join("cascade.db");
    let retention = Retention {
        ttl: Duration::from_secs(2),
        max_bytes: 50_000,
    };
    let store = SqliteStore::open(&db, retention).unwrap();
    let marker = "PLANTED-7f3a";
    let filler = "y".repeat(2000);
    for i in 0..300 {
        let text = format!("Please remember {marker} fact {i:03} {filler}");
        store
            .add_fact(&format!("conv-{}", i % 7), &format!("h{i}"), &text)
            .await
            .unwrap();
    }
    store
        .put_summary("summary-key", 100, &format!("a summary {marker}"))
        .await
        .unwrap();
    let decisions = format!("0,-\n{{\"content\": \"{marker} shortened\"}}");
    let session = StoredSession::new(Format::OpenAi, Vec::new(), decisions);
    store.save_session("conv-0", &session).await.unwrap();
    let (stored, copies) = (
        store.stored_bytes().unwrap(),
        copies_on_disk(&db, marker.as_bytes()),
    );
    let file = std::fs::metadata(&db).unwrap().len();
    println!("after the writes: {stored} bytes stored, file {file} bytes, {copies} copies");
    assert!(copies > 0, "the planted text is stored");
    let evicted = store.evict(now() + 3).unwrap();
    let (stored, copies) = (
        store.stored_bytes().unwrap(),
        copies_on_disk(&db, marker.as_bytes()),
    );
    let file = std::fs::metadata(&db).unwrap().len();
    println!(
        "after the TTL ({evicted} rows): {stored} bytes stored, file {file} bytes, {copies} copies"
    );
    assert!(evicted > 0);
    assert_eq!(stored, 0);
    assert_eq!(copies, 0, "no copy remains");
    assert!(file < 100_000, "the freed pages went back: {file} bytes");
    let _ = std::fs::remove_dir_all(&root);
}

/// The cap is enforced by the write that would pass it (the oldest rows go first), not by a
/// later sweep; the running size the store keeps agrees with the rows.
#[tokio::test]
async fn the_cap_holds_after_every_write() {
    let root = temp_dir("cap-writes");
    let db = root.join("cascade.db");
    let retention = Retention {
        ttl: Duration::from_secs(7 * 24 * 3600),
        max_bytes: 50_000,
    };
    let store = SqliteStore::open(&db, retention).unwrap();
    let filler = "é".repeat(1000); // 2 KB of two-byte characters: the cap counts bytes
    for i in 0..300 {
        let text = format!("remember fact {i:03} {filler}");
        store
            .add_fact("conv", &format!("h{i}"), &text)
            .await
            .unwrap();
        if i % 50 == 0 {
            store
                .put_summary(&format!("s{i}"), 10, &"s".repeat(3000))
                .await
                .unwrap();
        }
        let stored = store.stored_bytes().unwrap();
        assert!(stored <= 50_000, "write {i}: {stored} bytes stored");
    }
    let facts = store.facts("conv").await.unwrap();
    assert!(facts.last().unwrap().starts_with("remember fact 299"));
    assert!(
        facts.len() >= 20,
        "the cap keeps the newest: {}",
        facts.len()
    );
    assert!(
        !facts[0].starts_with("remember fact 000"),
        "the oldest went"
    );
    // An entry larger than the whole cap is not stored (and evicts nothing for it).
    let before = store.stored_bytes().unwrap();
    store
        .put_summary("huge", 10, &"h".repeat(60_000))
        .await
        .unwrap();
    assert_eq!(store.summary("huge").await.unwrap(), None);
    assert_eq!(store.stored_bytes().unwrap(), before);
    let file = std::fs::metadata(&db).unwrap().len();
    println!("300 facts of 2 KB under a 50 kB cap: {before} bytes stored, file {file} bytes");
    let _ = std::fs::remove_dir_all(&root);
}

/// One "please remember" of 5 MB: the file stays small (the issue: it grew to 5.3 MB).
#[tokio::test]
async fn a_five_megabyte_fact_does_not_grow_the_file() {
    let root = temp_dir("huge-fact");
    let db = root.join("cascade.db");
    let store = SqliteStore::open(&db, Retention::default()).unwrap();
    let huge = format!("Please remember {}", "z".repeat(5 << 20));
    assert!(store.add_fact("conv", "h", &huge).await.unwrap());
    let kept = store.facts("conv").await.unwrap().remove(0);
    assert!(kept.len() < 8192 + 100, "{} bytes kept", kept.len());
    let file = std::fs::metadata(&db).unwrap().len();
    assert!(file < 200_000, "the file is {file} bytes");
    let _ = std::fs::remove_dir_all(&root);
}

/// A database written before this (no `secure_delete`, no auto-vacuum) still holds deleted
/// text in its free pages: opening it vacuums once, and the text is gone.
#[tokio::test]
async fn an_older_database_is_vacuumed_clean_at_open() {
    let root = temp_dir("old-free-pages");
    std::fs::create_dir_all(&root).unwrap();
    let db = root.join("cascade.db");
    let marker = "OLD-PLANTED-91c2";
    {
        let old = rusqlite::Connection::open(&db).unwrap();
        old.execute_batch(
            "PRAGMA secure_delete = OFF; PRAGMA user_version = 3;
             CREATE TABLE facts (conversation TEXT NOT NULL, hash TEXT NOT NULL,
                 seq INTEGER NOT NULL, text TEXT NOT NULL, touched INTEGER NOT NULL,
                 PRIMARY KEY (conversation, hash));",
        )
        .unwrap();
        for i in 0..50 {
            let text = format!("{marker} {i} {}", "q".repeat(3000));
            old.execute(
                "INSERT INTO facts VALUES ('c', ?1, ?2, ?3, 0)",
                rusqlite::params![format!("h{i}"), i, text],
            )
            .unwrap();
        }
        old.execute("DELETE FROM facts", []).unwrap();
    }
    assert!(
        copies_on_disk(&db, marker.as_bytes()) > 0,
        "left by the old version"
    );
    let store = SqliteStore::open(&db, Retention::default()).unwrap();
    assert_eq!(store.stored_bytes().unwrap(), 0);
    assert_eq!(copies_on_disk(&db, marker.as_bytes()), 0);
    let _ = std::fs::remove_dir_all(&root);
}
