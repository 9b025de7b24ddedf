//! Proxy state is per credential: remembered facts, sticky prefixes and summaries learned
//! from one API key never reach a request made with another (SPEC "Proxy state").

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_test_support::upstream::{self, Upstream};
use serde_json::{Value, json};

const FACT: &str = "Please remember that the deploy key is K-42.";

async fn recording_upstream() -> Upstream {
    upstream::start(|_, r| {
        if r.path == "/v1/messages" {
            upstream::json(200, upstream::anthropic_message("ok", 50))
        } else {
            upstream::json(200, upstream::openai_completion("ok", 50))
        }
    })
    .await
}

async fn proxy(upstream: &Upstream) -> String {
    let mut config = ProxyConfig::new(upstream.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    common::start_proxy(config).await.0
}

fn bodies(path: &str, with_fact: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "hi"})];
    if with_fact {
        messages.push(json!({"role": "assistant", "content": "hello"}));
        messages.push(json!({"role": "user", "content": FACT}));
    }
    if path == "/v1/messages" {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "sys", "messages": messages})
    } else {
        messages.insert(0, json!({"role": "system", "content": "sys"}));
        json!({"model": "gpt-4o", "messages": messages})
    }
}

async fn send(proxy: &str, path: &str, credential: (&str, &str), body: &Value) {
    let response = reqwest::Client::new()
        .post(format!("{proxy}{path}"))
        .header(credential.0, credential.1)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

async fn facts_stay_with_their_credential(path: &str, header: &str) {
    let upstream = recording_upstream().await;
    let proxy = proxy(&upstream).await;
    let (a, b) = ((header, "key-A"), (header, "key-B"));
    send(&proxy, path, a, &bodies(path, true)).await;
    // Same conversation (system prompt and first user message), another credential.
    send(&proxy, path, b, &bodies(path, false)).await;
    // Same credential again: the fact comes back.
    send(&proxy, path, a, &bodies(path, false)).await;
    let sent: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
        .collect();
    assert_eq!(sent.len(), 3);
    assert!(
        !sent[1].contains("K-42"),
        "credential B got A's fact: {}",
        sent[1]
    );
    assert!(
        sent[2].contains("K-42"),
        "credential A lost its fact: {}",
        sent[2]
    );
}

#[tokio::test]
async fn openai_facts_do_not_cross_credentials() {
    facts_stay_with_their_credential("/v1/chat/completions", "authorization").await;
}

#[tokio::test]
async fn anthropic_facts_do_not_cross_credentials() {
    facts_stay_with_their_credential("/v1/messages", "x-api-key").await;
}

/// The engine asked to summarize without a request (no tenant) cannot reach the summary
/// cache: not a read, not a write, never a shared default tenant. ④ fails closed and the
/// cascade degrades as for any failed summary; a request of a tenant then finds nothing
/// cached by that call.
#[tokio::test]
async fn without_a_tenant_the_engine_cannot_reach_the_summary_cache() {
    use context_cascade::{Budget, format::parse_value};
    let up = recording_upstream().await;
    let mut config = ProxyConfig::new(up.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    let (_proxy, state) = common::start_proxy(config).await;
    let body = json!({"model": "gpt-4o", "messages": common::history(10, 3000, common::LAST)});
    let mut conversation = parse_value(body, None).unwrap();
    let report = state
        .manager()
        .compact_with_summary(&mut conversation, Budget::new(4000, 0))
        .await;
    let names: Vec<&str> = report.steps.iter().map(|s| s.strategy.as_str()).collect();
    // The same history through a request summarizes (tests/state.rs): here ④ was refused.
    assert!(
        !names.contains(&"summarize") && names.contains(&"degrade"),
        "{names:?}"
    );
    let m = state.metrics();
    assert_eq!(
        (m.summary_hits, m.summary_misses),
        (0, 0),
        "the cache was not reached"
    );
}
