//! The state store contract (tests/common/store_suite.rs) against a real Redis, and what
//! only Redis does: time to live by EXPIRE, the per-entry size cap, failing fast while Redis
//! is away and recovering by itself. Needs `redis-server` (`--features redis-tests`;
//! scripts/ci-redis.sh installs it).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

#[path = "common/redis_server.rs"]
mod redis_server;
#[path = "common/store_suite.rs"]
mod store_suite;

use std::time::{Duration, Instant};

use cascade_proxy::store::{RedisStore, Retention, StateStore, StoredSession};
use redis_server::RedisServer;

#[tokio::test]
async fn redis_keeps_the_contract() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(0), Retention::default()).unwrap();
    assert!(store.shared());
    store_suite::contract(&store, "redis").await;
    // Another database of the same server is another store.
    let other = RedisStore::connect(&server.url(1), Retention::default()).unwrap();
    assert_eq!(other.summary("k-redis").await.unwrap(), None);
}

#[tokio::test]
async fn conversation_keys_expire_and_model_keys_do_not() {
    let server = RedisServer::start();
    let retention = Retention {
        ttl: Duration::from_secs(3600),
        max_bytes: 16 * 1024,
    };
    let store = RedisStore::connect(&server.url(0), retention).unwrap();
    store.put_summary("s", 10, "a summary").await.unwrap();
    store.add_fact("c", "h", "a fact").await.unwrap();
    let session = StoredSession::new(context_cascade::Format::OpenAi, Vec::new(), "0".into());
    store.save_session("c", &session).await.unwrap();
    let scale = context_cascade::Scale {
        scale: 1.0,
        observations: 1,
        weight: 0.0,
    };
    store.save_scale("m", scale).await.unwrap();
    for key in ["cascade:summary:s", "cascade:facts:c", "cascade:sticky:c"] {
        let ttl: i64 = server.command(&format!("TTL {key}"))[1..].parse().unwrap();
        assert!((3500..=3600).contains(&ttl), "{key}: TTL {ttl}");
    }
    assert_eq!(server.command("TTL cascade:calibration"), ":-1");
    // Beyond the per-entry cap (max_bytes / 16 = 1 KiB): not written, not an error.
    let big = "x".repeat(2048);
    store.put_summary("big", 10, &big).await.unwrap();
    assert_eq!(store.summary("big").await.unwrap(), None);
    assert_eq!(store.failure(), None);
}

#[tokio::test]
async fn unreachable_redis_fails_fast_and_recovers_by_itself() {
    let mut server = RedisServer::start();
    let store = RedisStore::connect(&server.url(0), Retention::default()).unwrap();
    store.put_summary("k", 1, "before").await.unwrap();
    server.stop();
    let started = Instant::now();
    for _ in 0..20 {
        assert!(store.summary("k").await.is_err());
    }
    let took = started.elapsed();
    println!("20 reads with Redis down took {took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    store.check().await;
    let failure = store.failure().expect("degraded while Redis is down");
    println!("failure while down: {failure}");
    server.restart();
    // The connection manager reconnects; health sees it without other traffic.
    let restarted = Instant::now();
    let deadline = restarted + Duration::from_secs(10);
    loop {
        store.check().await;
        if store.failure().is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", store.failure());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("recovered {:?} after the restart", restarted.elapsed());
    // A fresh server holds nothing (no persistence): the store works again, empty.
    assert_eq!(store.summary("k").await.unwrap(), None);
    store.put_summary("k", 1, "after").await.unwrap();
    assert_eq!(store.summary("k").await.unwrap(), Some(("after".into(), 1)));
}

#[test]
fn bad_urls_are_rejected_and_a_runtime_is_required() {
    assert!(RedisStore::connect("redis://127.0.0.1:1/0", Retention::default()).is_err());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert!(RedisStore::connect("not a url", Retention::default()).is_err());
        // Nothing listens there: still a store (connected lazily), degraded on use.
        let store = RedisStore::connect("redis://127.0.0.1:1/0", Retention::default()).unwrap();
        assert!(store.facts("c").await.is_err());
        assert!(store.failure().is_some());
    });
}
