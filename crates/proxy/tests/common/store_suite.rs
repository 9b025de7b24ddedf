//! One contract for every state store: the same test functions run against SQLite
//! (tests/store_contract.rs) and Redis (tests/store_redis.rs). Keys carry a per-run suffix
//! so that runs sharing one Redis do not see each other.

use cascade_proxy::store::fact::{FACT_LIMIT, fact_head};
use cascade_proxy::store::session::SESSION_VERSION;
use cascade_proxy::store::{MessageId, StateStore, StoredSession};
use context_cascade::{Format, Scale};

/// Every check of the contract, in order.
pub async fn contract(store: &dyn StateStore, run: &str) {
    summaries_round_trip(store, run).await;
    facts_are_deduplicated_ordered_and_per_conversation(store, run).await;
    learned_windows_persist(store, run).await;
    calibration_persists(store, run).await;
    sessions_round_trip_and_are_forgotten(store, run).await;
    a_huge_fact_is_kept_as_its_head_and_a_note(store, run).await;
    assert_eq!(store.failure(), None, "every operation succeeded");
}

pub async fn summaries_round_trip(store: &dyn StateStore, run: &str) {
    let key = format!("k-{run}");
    assert_eq!(store.summary(&key).await.unwrap(), None);
    store.put_summary(&key, 500, "sum").await.unwrap();
    assert_eq!(
        store.summary(&key).await.unwrap(),
        Some(("sum".into(), 500))
    );
    // Written again under another limit: the newest stands.
    store.put_summary(&key, 300, "shorter").await.unwrap();
    assert_eq!(
        store.summary(&key).await.unwrap(),
        Some(("shorter".into(), 300))
    );
}

pub async fn facts_are_deduplicated_ordered_and_per_conversation(
    store: &dyn StateStore,
    run: &str,
) {
    let c = format!("tenant-a/conv-{run}");
    assert!(store.add_fact(&c, "h1", "first fact").await.unwrap());
    assert!(
        store
            .add_fact(&c, "h2", "second: with spaces")
            .await
            .unwrap()
    );
    assert!(!store.add_fact(&c, "h1", "first fact").await.unwrap());
    assert!(store.add_fact(&c, "h0", "third").await.unwrap());
    assert_eq!(
        store.facts(&c).await.unwrap(),
        vec!["first fact", "second: with spaces", "third"]
    );
    store.touch_facts(&c).await.unwrap();
    // Another tenant's key for the same conversation sees nothing.
    let other = format!("tenant-b/conv-{run}");
    assert!(store.facts(&other).await.unwrap().is_empty());
}

pub async fn learned_windows_persist(store: &dyn StateStore, run: &str) {
    let model = format!("m-{run}");
    let mine = |all: Vec<(String, u64, bool)>| -> Vec<(String, u64, bool)> {
        all.into_iter().filter(|(m, _, _)| *m == model).collect()
    };
    assert!(mine(store.learned_windows().await.unwrap()).is_empty());
    store
        .save_learned_window(&model, 59_275, false)
        .await
        .unwrap();
    store
        .save_learned_window(&model, 50_000, true)
        .await
        .unwrap();
    assert_eq!(
        mine(store.learned_windows().await.unwrap()),
        vec![(model.clone(), 50_000, true)]
    );
}

pub async fn calibration_persists(store: &dyn StateStore, run: &str) {
    let model = format!("m-{run}");
    // The size-weighted rule's weight goes with the scale (a replica folds on from it).
    let scale = Scale {
        scale: 1.3,
        observations: 4,
        weight: 41_234.5,
    };
    store.save_scale(&model, scale).await.unwrap();
    let odd = Scale {
        scale: 0.1 + 0.2,
        observations: u64::from(u32::MAX) + 7,
        weight: 0.0,
    };
    store.save_scale(&format!("{model}-b"), odd).await.unwrap();
    let all = store.calibration().await.unwrap();
    let find = |m: &str| all.iter().find(|(n, _)| n == m).map(|(_, s)| *s);
    assert_eq!(find(&model), Some(scale));
    assert_eq!(find(&format!("{model}-b")), Some(odd), "exact round trip");
}

pub async fn sessions_round_trip_and_are_forgotten(store: &dyn StateStore, run: &str) {
    let c = format!("tenant-a/conv-{run}");
    assert_eq!(store.session(&c).await.unwrap(), None);
    // Every wire format reads back as itself (Responses too).
    for format in [Format::OpenAi, Format::Anthropic, Format::Responses] {
        let session = StoredSession::new(
            format,
            vec![MessageId::of_bytes(b"a"), MessageId::of_bytes(b"b")],
            "0,-\n{\"messages\": [\"\u{ff}\"]}".into(),
        );
        store.save_session(&c, &session).await.unwrap();
        assert_eq!(store.session(&c).await.unwrap(), Some(session));
    }
    let shorter = StoredSession::new(
        Format::Anthropic,
        vec![MessageId::of_bytes(b"c")],
        "1".into(),
    );
    store.save_session(&c, &shorter).await.unwrap();
    assert_eq!(store.session(&c).await.unwrap(), Some(shorter));
    // A record of another version reads as none: the request runs the cascade afresh.
    let old = StoredSession {
        version: SESSION_VERSION - 1,
        ..StoredSession::new(Format::OpenAi, Vec::new(), "0".into())
    };
    store.save_session(&c, &old).await.unwrap();
    assert_eq!(store.session(&c).await.unwrap(), None);
    store.delete_session(&c).await.unwrap();
    assert_eq!(store.session(&c).await.unwrap(), None);
}

/// A "please remember" of 5 MB is kept as its first 8 KiB (cut on a character boundary)
/// and a note naming how many bytes were dropped; the same text again is the same fact.
pub async fn a_huge_fact_is_kept_as_its_head_and_a_note(store: &dyn StateStore, run: &str) {
    let c = format!("tenant-a/huge-{run}");
    let huge = format!("Please remember this log: {}", "ü".repeat(2_500_000));
    assert!(huge.len() > 5_000_000);
    assert!(store.add_fact(&c, "big", &huge).await.unwrap());
    assert!(!store.add_fact(&c, "big", &huge).await.unwrap());
    let facts = store.facts(&c).await.unwrap();
    assert_eq!(facts.len(), 1);
    let kept = &facts[0];
    assert!(kept.len() <= FACT_LIMIT + 80, "{} bytes kept", kept.len());
    let head = fact_head(kept);
    assert!(huge.starts_with(head) && head.len() > FACT_LIMIT - 2);
    let dropped = huge.len() - head.len();
    assert!(
        kept.contains(&format!(" {dropped} bytes")),
        "{}",
        &kept[head.len()..]
    );
}
