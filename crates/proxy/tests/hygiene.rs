//! Small protocol and bounds rules: headers named in `Connection:` stay on this hop,
//! client-chosen model names do not grow the metric label set, passthrough keeps the
//! client's framing, and an upstream that is not an http(s) URL is refused at startup.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, ProxyConfig};
use cascade_test_support::upstream::{self, Upstream};
use serde_json::json;

async fn proxy_for(upstream: &Upstream) -> String {
    let mut config = ProxyConfig::new(upstream.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    common::start_proxy(config).await.0
}

#[tokio::test]
async fn headers_named_in_connection_are_not_forwarded() {
    let up =
        upstream::start(|_, _| upstream::json(200, upstream::openai_completion("ok", 9))).await;
    let proxy = proxy_for(&up).await;
    let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    for path in ["/v1/chat/completions", "/v1/other"] {
        let response = reqwest::Client::new()
            .post(format!("{proxy}{path}"))
            .header("connection", "keep-alive, x-hop-secret")
            .header("x-hop-secret", "do-not-forward")
            .header("x-end-to-end", "kept")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    for seen in up.requests() {
        assert!(seen.headers.get("x-hop-secret").is_none(), "{}", seen.path);
        assert_eq!(seen.headers["x-end-to-end"], "kept");
    }
}

#[tokio::test]
async fn junk_model_names_do_not_become_metric_series() {
    let up =
        upstream::start(|_, _| upstream::json(200, upstream::openai_completion("ok", 40))).await;
    let proxy = proxy_for(&up).await;
    let client = reqwest::Client::new();
    for i in 0..300 {
        let body = json!({"model": format!("junk-{i}-zz"), "messages": [{"role": "user", "content": "hello there"}]});
        let r = common::send_chat(&client, &proxy, &body).await;
        assert_eq!(r.status(), 200);
    }
    let known =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello there"}]});
    let r = common::send_chat(&client, &proxy, &known).await;
    assert_eq!(r.status(), 200);
    let text = client
        .get(format!("{proxy}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = text.lines().filter(|l| l.contains("model=\"")).count();
    assert!(series <= 10, "{series} model series:\n{text}");
    assert!(text.contains("model=\"gpt-4o\""), "{text}");
}

#[tokio::test]
async fn passthrough_keeps_content_length_framing() {
    let up = upstream::start(|_, _| upstream::json(200, json!({"ok": true}))).await;
    let proxy = proxy_for(&up).await;
    let response = reqwest::Client::new()
        .post(format!("{proxy}/v1/embeddings"))
        .header("content-type", "application/json")
        .body(r#"{"input":"abc"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = &up.requests()[0];
    assert_eq!(seen.headers["content-length"], "15");
    assert!(seen.headers.get("transfer-encoding").is_none());
    assert_eq!(&seen.bytes[..], br#"{"input":"abc"}"#);
}

#[test]
fn upstreams_that_are_not_http_urls_are_refused() {
    for bad in ["notaurl", "ftp://example.com", "http://"] {
        let mut config = ProxyConfig::new(bad);
        config.state.path = IN_MEMORY_DB.into();
        let error = AppState::new(config).err().map(|e| e.to_string());
        let error = error.unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(error.contains("upstream"), "{error}");
    }
}
