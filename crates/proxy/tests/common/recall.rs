//! What the recall tests share: a proxy with recall on at a window small enough for a
//! 1,500-line log to be cut, and a chat request sent under one credential and session.

#![allow(dead_code)]

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::{Gauge, IN_MEMORY_DB};
use serde_json::Value;

/// Recall on, an in-memory store, no discovery, an 8,000-token window; the usage the
/// upstream reported passed on as summed over the rounds (`gauge = "upstream"`: the
/// default rescales a Responses answer to the client's size, `tests/gauge.rs`).
pub fn config(upstream: &str) -> ProxyConfig {
    let mut config = ProxyConfig::new(upstream.to_owned());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(8_000);
    config.requests.recall = true;
    config.requests.gauge = Gauge::Upstream;
    config
}

/// A proxy with [`config`] in front of `upstream`; its base URL.
pub async fn proxy(upstream: &str) -> String {
    super::start_proxy(config(upstream)).await.0
}

/// A chat request under `key`, in the session "one-conversation"; its 200 answer.
pub async fn send_chat(proxy: &str, key: &str, body: &Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{proxy}/v1/chat/completions"))
        .header("authorization", format!("Bearer {key}"))
        .header("x-cascade-session", "one-conversation")
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}
