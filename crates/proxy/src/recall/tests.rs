//! The store holds nothing readable, and one credential never recalls another's content.

use std::sync::Arc;

use context_cascade::recall::{Handle, RecallCall, Removal};

use super::*;
use crate::state::sealing::RecallKey;
use crate::state::store::{Retention, SqliteStore};

fn removal(text: &str) -> Removal {
    Removal {
        handle: Handle::of_result("compacted", "call_1", text),
        text: text.to_owned(),
    }
}

#[tokio::test]
async fn the_database_file_holds_no_original_and_one_key_never_reads_another() {
    let dir = std::env::temp_dir().join(format!("cascade-recall-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("state.db");
    let store = SqliteStore::open(&path, Retention::default()).unwrap();
    let recaller = Recaller::new(Arc::new(store));
    let secret = [3u8; 32];
    let alice = RecallKey::derive(&secret, b"authorization\0Bearer sk-alice\0");
    let bob = RecallKey::derive(&secret, b"authorization\0Bearer sk-bob\0");
    let log = "error[E0425]: cannot find value `swordfish_budget` in this scope\n".repeat(3);
    let kept = removal(&log);
    // One conversation body under two keys: the conversation key is the same text.
    let scoped = "conversation-1";
    assert_eq!(recaller.keep(&alice, scoped, &[&kept]).await.unwrap(), 1);
    let call = RecallCall::Query("swordfish_budget".into());
    let found = recaller.answer(&alice, scoped, &call, 500).await.unwrap();
    assert!(
        found.text.contains("cannot find value `swordfish_budget`"),
        "{}",
        found.text
    );
    let theirs = recaller.answer(&bob, scoped, &call, 500).await.unwrap();
    assert!(
        theirs.chunks.is_empty() && !theirs.text.contains("E0425"),
        "{}",
        theirs.text
    );
    let by_handle = RecallCall::Handle(kept.handle.to_string().parse().unwrap());
    let theirs = recaller
        .answer(&bob, scoped, &by_handle, 500)
        .await
        .unwrap();
    assert!(theirs.chunks.is_empty(), "{}", theirs.text);
    drop(recaller);
    // Every file SQLite wrote (the database, its journal): no original, no handle.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for needle in [
            "swordfish_budget",
            "E0425",
            "cannot find value",
            &kept.handle.to_string(),
        ] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{needle:?} is readable in the database"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
