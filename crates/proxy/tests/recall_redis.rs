//! Recall's originals in a real Redis (issue 25): two proxy replicas sharing one Redis
//! recall what the other removed for the same credential, a second credential recalls
//! nothing of it, the chunks live under the store's time to live and size cap, and what
//! Redis holds (every key and its DUMP) reveals no stored original. Needs `redis-server`
//! (`--features redis-tests`; scripts/ci-redis.sh installs it).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
#[path = "common/redis_server.rs"]
mod redis_server;

use std::path::Path;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use cascade_proxy::store::{RedisStore, Retention, StateStore};
use cascade_test_support::upstream::{self, Recorded};
use redis_server::RedisServer;
use serde_json::{Value, json};

const SECRET_LINE: &str = "error[E0425]: cannot find value `swordfish_budget` in this scope";
/// What the last user message says when the client wants the model to recall.
const ASK: &str = "what was the swordfish error again?";

/// A chat body whose one tool result is `lines` lines of `unit` log, then `tail`; the
/// last user message is `question`.
fn body(unit: &str, lines: usize, tail: &str, question: &str) -> Value {
    let log: String = (0..lines).map(|i| format!("{unit} {i} ok\n")).collect();
    json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "build the project"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "b1", "type": "function",
            "function": {"name": "bash", "arguments": "{\"command\":\"cargo build\"}"}}]},
        {"role": "tool", "tool_call_id": "b1", "content": format!("{log}{tail}\n")},
        {"role": "user", "content": question}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]})
}

/// An answer without usage: scripted usage would teach the shared calibration that
/// requests count little, and the later requests would then not be compacted.
fn chat(message: Value, finish: &str) -> Response {
    axum::Json(
        json!({"id": "x", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]}),
    )
    .into_response()
}

/// The model: recalls `swordfish_budget` only when the client asks for it (and the tool
/// is offered), then answers with the line it got; otherwise answers at once.
fn model(_: usize, request: &Recorded) -> Response {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let offered = (request.body["tools"].as_array().into_iter().flatten())
        .any(|t| t["function"]["name"] == "context_recall");
    match messages.last() {
        Some(last) if last["role"] == "tool" && last["tool_call_id"] == "r1" => {
            let found = last["content"].as_str().unwrap_or("");
            let line = (found.lines().find(|l| l.contains("E0425"))).unwrap_or("nothing found");
            chat(json!({"role": "assistant", "content": line}), "stop")
        }
        Some(last) if offered && last["content"] == ASK => {
            let call = json!({"id": "r1", "type": "function", "function": {
                "name": "context_recall", "arguments": "{\"query\":\"swordfish_budget\"}"}});
            let message = json!({"role": "assistant", "content": null, "tool_calls": [call]});
            chat(message, "tool_calls")
        }
        _ => chat(json!({"role": "assistant", "content": "answered"}), "stop"),
    }
}

/// A replica on `upstream` keeping its state in `redis`; replicas share the tenancy
/// secret beside `db` (as deployed), so a credential keys the same on both.
async fn replica(upstream: &str, redis: &str, db: &Path) -> String {
    let mut config = common::recall::config(upstream);
    config.state.path = db.join("shared.db");
    config.state.url = Some(redis.to_owned());
    common::start_proxy(config).await.0
}

use common::recall::send_chat as send;

/// Every key of database 0 and its DUMP (the serialized value, as a copy of Redis holds
/// it), decoded lossily.
async fn everything_in(redis: &str) -> String {
    let client = redis::Client::open(redis).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap();
    let mut all = String::new();
    for key in keys {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        all.push_str(&key);
        all.push('\n');
        all.push_str(&String::from_utf8_lossy(&dump));
        all.push('\n');
    }
    all
}

#[tokio::test]
async fn two_replicas_recall_each_others_removals_and_redis_reveals_none() {
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("cascade-recall-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let upstream = upstream::start(model).await;
    let a = replica(&upstream.base, &server.url(0), &dir).await;
    let b = replica(&upstream.base, &server.url(0), &dir).await;

    // Replica A cuts the log whose tail holds the secret and keeps it; no recall yet.
    let first = body(
        "compiling unit",
        1_500,
        SECRET_LINE,
        "why did the build fail?",
    );
    let answer = send(&a, "sk-alice", &first).await;
    assert_eq!(answer["choices"][0]["message"]["content"], "answered");
    let cut = upstream.requests()[0].body["messages"][2]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    // The head keeps none of the cut part (the trail note after the handle names the
    // error line; the recall below brings back the whole log's tail).
    let (head, _) = cut.split_once("recall handle: ").expect("a handle line");
    assert!(!head.contains("swordfish"), "A's request kept the cut part");

    // Replica B gets a later request with another log (cut too, so the tool is offered;
    // no swordfish in it): the model's recall finds what only A kept.
    let later = body("linking crate", 8_000, "error: linker failed", ASK);
    let alice = send(&b, "sk-alice", &later).await;
    assert_eq!(
        alice["choices"][0]["message"]["content"], SECRET_LINE,
        "{alice}"
    );

    // Another credential, same conversation, same replica: nothing of Alice's.
    let bob = send(&b, "sk-bob", &later).await;
    assert_eq!(
        bob["choices"][0]["message"]["content"], "nothing found",
        "{bob}"
    );
    let seen = upstream.requests();
    let recalled = seen.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(!recalled.contains("cannot find value"), "{recalled}");

    // Redis holds the chunks (under the store's TTL) but none of their text, nor any
    // handle or credential.
    let held = everything_in(&server.url(0)).await;
    let recall_keys: Vec<&str> = (held.lines())
        .filter(|l| l.starts_with("cascade:recall:"))
        .collect();
    assert!(!recall_keys.is_empty(), "no recall key in Redis:\n{held}");
    for key in &recall_keys {
        let ttl: i64 = server.command(&format!("TTL {key}"))[1..].parse().unwrap();
        assert!(ttl > 0, "{key}: TTL {ttl}");
    }
    let handle = cut.split("recall handle: ").nth(1).unwrap();
    let handle = handle.lines().next().unwrap().trim();
    for known in [
        "swordfish",
        "E0425",
        "compiling unit 1400 ok",
        "linking crate 7000 ok",
        "linker failed",
        "sk-alice",
        "sk-bob",
        handle,
    ] {
        assert!(!held.contains(known), "Redis holds {known:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn recall_chunks_take_the_stores_time_to_live_and_size_cap() {
    let server = RedisServer::start();
    let retention = Retention {
        ttl: Duration::from_secs(3600),
        max_bytes: 16 * 1024,
    };
    let store = RedisStore::connect(&server.url(0), retention).unwrap();
    let rows = vec![
        ("t1".to_owned(), vec![1u8; 200]),
        ("t2".into(), vec![2u8; 200]),
    ];
    store.put_recall("c", rows).await.unwrap();
    let ttl: i64 = server.command("TTL cascade:recall:c")[1..].parse().unwrap();
    assert!((3500..=3600).contains(&ttl), "TTL {ttl}");
    // A tag kept before keeps its first value (the same chunk sealed again is not news).
    store
        .put_recall("c", vec![("t1".into(), vec![9u8; 200])])
        .await
        .unwrap();
    let mut kept = store.recall_rows("c").await.unwrap();
    kept.sort();
    assert_eq!(kept, vec![vec![1u8; 200], vec![2u8; 200]]);
    // Beyond the per-entry cap (max_bytes / 16 = 1 KiB): not written, not an error.
    let big = vec![("t3".to_owned(), vec![3u8; 2048])];
    store.put_recall("big", big).await.unwrap();
    assert!(store.recall_rows("big").await.unwrap().is_empty());
    assert_eq!(server.command("EXISTS cascade:recall:big"), ":0");
    assert_eq!(store.failure(), None);
}
