//! The proxy against a scripted upstream that enforces a context limit. What the proxy passes on as it came, and how it answers when it cannot: client headers, upstream errors, bad requests, unreachable or slow upstreams, disconnects, other methods, untouched bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{LAST, Script, anthropic_body, history, metrics_text, post, start};
use serde_json::{Value, json};

#[tokio::test]
async fn client_headers_reach_the_upstream_on_every_route() {
    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
    let body = json!({"model": "gpt-4o", "messages": history(1, 50, LAST)});
    assert_eq!(post(&h, "/v1/chat/completions", &body).await.status(), 200);
    let models = h
        .client
        .get(format!("{}/v1/models", h.proxy))
        .header("authorization", "Bearer sk-test-123")
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    let listed: Value = models.json().await.unwrap();
    assert_eq!(listed["data"][0]["id"], "scripted-model");
    let seen = h.script.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(
            s.headers["authorization"], "Bearer sk-test-123",
            "{}",
            s.path
        );
    }
    assert_eq!(seen[0].headers["x-api-key"], "ant-test-456");
    assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen[1].path, "/v1/models");
}

#[tokio::test]
async fn non_overflow_errors_pass_through_unchanged() {
    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
    let rate_limit = r#"{"error":{"message":"Rate limit reached for gpt-4o: tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","code":"rate_limit_exceeded"}}"#;
    h.script
        .push_error(429, rate_limit, &[("retry-after", "7")]);
    let body = json!({"model": "gpt-4o", "messages": history(1, 50, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.text().await.unwrap(), rate_limit);
    assert_eq!(h.script.seen().len(), 1, "a rate limit is not retried");
    assert_eq!(h.state.metrics().overflow_errors, 0);
}

/// A 400 whose OpenAI-shaped error message names `what` was wrong.
fn assert_refused(status: u16, error: &Value, what: &str) {
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"].as_str().unwrap().contains(what),
        "{error}"
    );
}

#[tokio::test]
async fn bad_requests_get_400_and_413_in_the_formats_shape() {
    let h = start(Script::new(1_000_000), |c| {
        c.window.force = Some(128_000);
        c.limits.max_request_bytes = 2000;
    })
    .await;
    let send = |path: &'static str, body: Vec<u8>| {
        let h = &h;
        async move {
            let r = h
                .client
                .post(format!("{}{path}", h.proxy))
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let (status, error) = send(
        "/v1/chat/completions",
        b"{\"model\": \"m\", \"messages\": [".to_vec(),
    )
    .await;
    assert_refused(status, &error, "invalid JSON");
    let (status, error) = send("/v1/messages", b"{not json".to_vec()).await;
    assert_eq!(status, 400);
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let (status, error) = send(
        "/v1/chat/completions",
        br#"{"model": "m", "messages": {"role": "user"}}"#.to_vec(),
    )
    .await;
    assert_refused(status, &error, "$.messages");
    let big =
        serde_json::to_vec(&json!({"model": "m", "messages": history(2, 1000, LAST)})).unwrap();
    let (status, error) = send("/v1/messages", big).await;
    assert_eq!(status, 413);
    assert_eq!(error["error"]["type"], "request_too_large");
    assert!(
        h.script.seen().is_empty(),
        "nothing bad reaches the upstream"
    );
}

#[tokio::test]
async fn unreachable_upstream_gives_502() {
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let mut config = cascade_proxy::ProxyConfig::new(upstream);
    config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.window.discover = false;
    let (proxy, _state) = common::start_proxy(config).await;
    let client = reqwest::Client::new();
    let body = json!({"model": "gpt-4o", "messages": history(1, 50, LAST)});
    let r = common::send_chat(&client, &proxy, &body).await;
    assert_eq!(r.status(), 502);
    let error: Value = r.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not reach the upstream")
    );
    let r = client
        .get(format!("{proxy}/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let r = client.get(format!("{proxy}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn slow_upstream_gives_504() {
    let mut script = Script::new(1_000_000);
    script.delay = std::time::Duration::from_secs(30);
    let h = start(script, |c| {
        c.window.force = Some(128_000);
        c.limits.upstream_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let body = anthropic_body("claude-sonnet-4-5", &history(1, 50, LAST), false);
    let response = post(&h, "/v1/messages", &body).await;
    assert_eq!(response.status(), 504);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "timeout_error");
}

#[tokio::test]
async fn client_disconnect_cancels_the_upstream_stream() {
    use futures::StreamExt;
    use std::sync::atomic::Ordering;

    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
    let body = json!({"model": "endless", "stream": true, "messages": history(1, 50, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("tick 0"));
    assert!(!h.script.stream_dropped.load(Ordering::SeqCst));
    drop(stream);
    // The proxy notices the closed connection and drops the upstream response; wait for
    // it (bounded, so a broken proxy fails the test instead of hanging it).
    let mut dropped = false;
    for _ in 0..500 {
        if h.script.stream_dropped.load(Ordering::SeqCst) {
            dropped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(dropped, "the upstream stream is still being read");
}

#[tokio::test]
async fn other_methods_on_cascade_paths_are_forwarded() {
    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
    // The scripted upstream has no GET on this path: its 405 comes back as it is.
    let response = h
        .client
        .get(format!("{}/v1/chat/completions", h.proxy))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let text = metrics_text(&h).await;
    assert!(
        text.contains("cascade_requests_total{route=\"other\",status=\"405\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn untouched_requests_go_upstream_byte_for_byte() {
    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
    // Unusual spacing and key order: kept as the client wrote them.
    let raw = "{ \"messages\":[{\"content\":\"hi\",  \"role\":\"user\"}], \"model\":\"gpt-4o\" }";
    let response = common::post_raw(&h, "/v1/chat/completions", raw).await;
    assert_eq!(response.status(), 200);
    // A pinned message must lose its marker: re-written.
    let pinned = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi","_pin":true}]}"#;
    let response = common::post_raw(&h, "/v1/chat/completions", pinned).await;
    assert_eq!(response.status(), 200);
    let seen = h.script.seen();
    assert_eq!(&seen[0].body[..], raw.as_bytes());
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(
        sent,
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    );
}
