//! The proxy against a scripted upstream that enforces a context limit.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{OpenAiFlavor, Script, anthropic_body, history, metrics_text, start};
use serde_json::{Value, json};

const LAST: &str = "Now fix the parser and tell me what changed.";

async fn post(h: &common::Harness, path: &str, body: &Value) -> reqwest::Response {
    h.client
        .post(format!("{}{path}", h.proxy))
        .header("authorization", "Bearer sk-test-123")
        .header("x-api-key", "ant-test-456")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn openai_overflow_is_recovered_by_pruning() {
    let h = start(Script::new(3000), |c| c.window = Some(8000)).await;
    let body = json!({"model": "gpt-4o", "messages": history(15, 600, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    let header = response
        .headers()
        .get("x-context-cascade")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(header.contains("prune_history"), "{header}");
    let answer: Value = response.json().await.unwrap();
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.contains(LAST), "{text}");

    let seen = h.script.seen();
    assert_eq!(
        seen.iter().map(|s| s.status).collect::<Vec<_>>(),
        vec![400, 200]
    );
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], LAST);
    assert_eq!(messages[0]["role"], "system");
    assert!(sent.to_string().contains("earlier messages removed"));
    assert!(!String::from_utf8_lossy(&seen[1].body).contains("_pin"));

    let m = h.state.metrics();
    assert_eq!(
        (m.upstream_calls, m.overflow_errors, m.overflow_recoveries),
        (2, 1, 1)
    );
    let text = metrics_text(&h).await;
    assert!(
        text.contains("cascade_overflow_recoveries_total 1"),
        "{text}"
    );
    assert!(
        text.contains("cascade_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1")
    );
    assert!(text.contains("cascade_strategies_applied_total{strategy=\"prune_history\"}"));
    assert!(
        text.contains("cascade_token_scale{model=\"gpt-4o\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn anthropic_streaming_overflow_is_recovered() {
    let h = start(Script::new(3000), |c| c.window = Some(200_000)).await;
    let body = anthropic_body("claude-sonnet-4-5", &history(15, 600, LAST), true);
    let response = post(&h, "/v1/messages", &body).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-context-cascade").is_some());
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    assert!(text.starts_with("event: message_start"), "{text}");
    assert!(text.contains("message_stop"));
    let words: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(words.contains(LAST), "{words}");
    let seen = h.script.seen();
    assert_eq!(
        seen.iter().map(|s| s.status).collect::<Vec<_>>(),
        vec![400, 200]
    );
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(sent["system"], "You are a careful coding agent.");
    // Usage in the stream fed the calibration of the model.
    let scale = h
        .state
        .manager()
        .calibration()
        .get("claude-sonnet-4-5")
        .unwrap();
    assert!(scale.observations >= 2, "{scale:?}");
}

#[tokio::test]
async fn llama_cpp_streaming_overflow_is_recovered() {
    let mut script = Script::new(3000);
    script.flavor = OpenAiFlavor::LlamaCpp;
    let h = start(script, |c| c.window = Some(32_000)).await;
    let body = json!({"model": "local", "stream": true, "stream_options": {"include_usage": true},
                      "messages": history(15, 600, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(text.contains("\"prompt_tokens\""));
    assert_eq!(h.script.seen().len(), 2);
    assert_eq!(h.state.metrics().overflow_recoveries, 1);
}

#[tokio::test]
async fn exhausted_retries_answer_in_the_formats_error_shape() {
    // Nothing fits in 20 tokens: every call overflows until the cascade gives up.
    let h = start(Script::new(20), |c| c.window = Some(8000)).await;
    let body = json!({"model": "gpt-4o", "messages": history(15, 600, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "context_length_exceeded");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("context window")
    );
    let calls = h.script.seen().len();
    assert!((1..=5).contains(&calls), "{calls}");

    let body = anthropic_body("claude-sonnet-4-5", &history(15, 600, LAST), false);
    let response = post(&h, "/v1/messages", &body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(h.state.metrics().overflow_exhausted >= 2);
}

#[tokio::test]
async fn summaries_are_cached_when_the_same_history_is_resent() {
    // No usage reports: the calibration stays put, so the same history gets the same
    // decisions and the summarizer is asked for the same summary.
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = start(script, |c| c.window = Some(4000)).await;
    let body = json!({"model": "gpt-4o", "messages": history(10, 3000, LAST)});
    let send = |session: &'static str| {
        let h = &h;
        let body = &body;
        async move {
            h.client
                .post(format!("{}/v1/chat/completions", h.proxy))
                .header("x-cascade-session", session)
                .json(body)
                .send()
                .await
                .unwrap()
        }
    };
    let first = send("one").await;
    assert_eq!(first.status(), 200);
    let header = first.headers()["x-context-cascade"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(header.contains("summarize"), "{header}");
    let after_first = h.state.metrics();
    assert!(after_first.summary_misses >= 1);
    assert_eq!(after_first.summary_hits, 0);

    // Another conversation with the same history (no sticky prefix to reuse).
    let second = send("two").await;
    assert_eq!(second.status(), 200);
    let after_second = h.state.metrics();
    assert!(after_second.summary_hits >= 1, "{after_second:?}");
    assert_eq!(after_second.summary_misses, after_first.summary_misses);
    let seen = h.script.seen();
    assert_eq!(
        seen[0].body, seen[1].body,
        "same input, same upstream request"
    );
    assert!(
        metrics_text(&h)
            .await
            .contains("cascade_summary_cache_hits_total")
    );
}

#[tokio::test]
async fn remembered_fact_comes_back_after_the_client_drops_it() {
    let h = start(Script::new(1_000_000), |c| c.window = Some(128_000)).await;
    let fact = "Please remember that the staging deploy key is K-42.";
    let mut messages = history(2, 100, fact);
    let first = json!({"model": "gpt-4o", "messages": messages.clone()});
    assert_eq!(post(&h, "/v1/chat/completions", &first).await.status(), 200);
    // The client compacted its own history and lost the request.
    messages.pop();
    messages.push(json!({"role": "user", "content": "Which key do we use for staging?"}));
    let second = json!({"model": "gpt-4o", "messages": messages.clone()});
    assert_eq!(
        post(&h, "/v1/chat/completions", &second).await.status(),
        200
    );
    let seen = h.script.seen();
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(sent["messages"][1]["role"], "system");
    assert!(
        sent["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("K-42"),
        "{sent}"
    );
    // The first request carried the fact itself: nothing injected there.
    assert!(!String::from_utf8_lossy(&seen[0].body).contains("context-cascade memory"));

    // Anthropic: the fact goes into `system`.
    let mut anthropic = history(2, 100, fact);
    let body = anthropic_body("claude-sonnet-4-5", &anthropic, false);
    assert_eq!(post(&h, "/v1/messages", &body).await.status(), 200);
    anthropic.pop();
    anthropic.push(json!({"role": "user", "content": "Which key again?"}));
    let body = anthropic_body("claude-sonnet-4-5", &anthropic, false);
    assert_eq!(post(&h, "/v1/messages", &body).await.status(), 200);
    let seen = h.script.seen();
    let sent: Value = serde_json::from_slice(&seen[3].body).unwrap();
    assert!(sent["system"].as_str().unwrap().contains("K-42"), "{sent}");
    let m = h.state.metrics();
    assert_eq!((m.facts_stored, m.facts_injected), (2, 2));
    assert!(
        metrics_text(&h)
            .await
            .contains("cascade_memory_facts_injected_total 2")
    );
}

#[tokio::test]
async fn client_headers_reach_the_upstream_on_every_route() {
    let h = start(Script::new(1_000_000), |c| c.window = Some(128_000)).await;
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
    let h = start(Script::new(1_000_000), |c| c.window = Some(128_000)).await;
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

#[tokio::test]
async fn bad_requests_get_400_and_413_in_the_formats_shape() {
    let h = start(Script::new(1_000_000), |c| {
        c.window = Some(128_000);
        c.max_request_bytes = 2000;
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
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid JSON"),
        "{error}"
    );
    let (status, error) = send("/v1/messages", b"{not json".to_vec()).await;
    assert_eq!(status, 400);
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let (status, error) = send(
        "/v1/chat/completions",
        br#"{"model": "m", "messages": {"role": "user"}}"#.to_vec(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("$.messages"),
        "{error}"
    );
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
    config.db_path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.discover = false;
    let (proxy, _state) = common::start_proxy(config).await;
    let client = reqwest::Client::new();
    let body = json!({"model": "gpt-4o", "messages": history(1, 50, LAST)});
    let r = client
        .post(format!("{proxy}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
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
async fn window_is_discovered_from_llama_cpp_props() {
    let mut script = Script::new(1_000_000);
    script.n_ctx = Some(4096);
    let h = start(script, |c| c.discover = true).await;
    // 10 × 2 × 1500 chars is far above 4096 tokens: the discovered window forces compaction.
    let body = json!({"model": "local-gguf", "messages": history(10, 1500, LAST)});
    let response = post(&h, "/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-context-cascade").is_some());
    let text = metrics_text(&h).await;
    assert!(
        text.contains("cascade_window_source_total{source=\"upstream\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn calibration_survives_a_restart() {
    let path = std::env::temp_dir().join(format!("cascade-proxy-test-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let db = path.clone();
    let h = start(Script::new(1_000_000), move |c| {
        c.window = Some(128_000);
        c.db_path = db;
    })
    .await;
    let body = json!({"model": "gpt-4o", "messages": history(3, 400, LAST)});
    assert_eq!(post(&h, "/v1/chat/completions", &body).await.status(), 200);
    let before = h.state.manager().calibration().get("gpt-4o").unwrap();
    let mut config = cascade_proxy::ProxyConfig::new(h.upstream.clone());
    config.db_path = path.clone();
    let restarted = cascade_proxy::AppState::new(config).unwrap();
    assert_eq!(
        restarted.manager().calibration().get("gpt-4o"),
        Some(before)
    );
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn llm_summarizer_is_used_when_configured() {
    // The scripted upstream doubles as the summarizer endpoint.
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = start(script, |c| c.window = Some(4000)).await;
    let mut config = cascade_proxy::ProxyConfig::new(h.upstream.clone());
    config.db_path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.discover = false;
    config.window = Some(4000);
    config.summarizer =
        cascade_proxy::SummarizerSpec::parse(&h.upstream, None, Some("summarizer-model".into()));
    let (proxy, state) = common::start_proxy(config).await;
    let body = json!({"model": "gpt-4o", "messages": history(10, 3000, LAST)});
    let response = h
        .client
        .post(format!("{proxy}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = h.script.seen();
    let summarizer_calls: Vec<Value> = seen
        .iter()
        .map(|s| serde_json::from_slice::<Value>(&s.body).unwrap())
        .filter(|b| b["model"] == "summarizer-model")
        .collect();
    assert!(
        !summarizer_calls.is_empty(),
        "the summarizer endpoint was called"
    );
    let last: Value = serde_json::from_slice(&seen.last().unwrap().body).unwrap();
    assert_eq!(last["model"], "gpt-4o");
    let header = response.headers()["x-context-cascade"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(header.contains("summarize"), "{header}");
    let sent = last["messages"].to_string();
    assert!(sent.contains("[context summary]"), "{sent}");
    assert!(sent.contains("scripted summary of the history"), "{sent}");
    assert!(state.metrics().summary_misses >= 1);
}

#[tokio::test]
async fn slow_upstream_gives_504() {
    let mut script = Script::new(1_000_000);
    script.delay = std::time::Duration::from_secs(30);
    let h = start(script, |c| {
        c.window = Some(128_000);
        c.upstream_timeout = std::time::Duration::from_millis(300);
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

    let h = start(Script::new(1_000_000), |c| c.window = Some(128_000)).await;
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
async fn sticky_prefix_survives_a_restart() {
    let path = std::env::temp_dir().join(format!("cascade-proxy-sticky-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let db = path.clone();
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = start(script, move |c| {
        c.window = Some(8000);
        c.db_path = db;
    })
    .await;
    let mut messages = history(12, 1500, LAST);
    let first = json!({"model": "gpt-4o", "messages": messages.clone()});
    let response = post(&h, "/v1/chat/completions", &first).await;
    assert!(
        response.headers().contains_key("x-context-cascade"),
        "compaction needed"
    );
    // Let the background write of the sticky prefix land before the restart.
    let mut config = cascade_proxy::ProxyConfig::new(h.upstream.clone());
    config.db_path = path.clone();
    config.window = Some(8000);
    config.discover = false;
    let store = cascade_proxy::store::Store::open(&path).unwrap();
    for _ in 0..500 {
        if store.session_count().unwrap() > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (proxy, _state) = common::start_proxy(config).await;
    messages.push(json!({"role": "assistant", "content": "Fixed the index."}));
    messages.push(json!({"role": "user", "content": "Thanks, now run the tests."}));
    let second = json!({"model": "gpt-4o", "messages": messages});
    let response = h
        .client
        .post(format!("{proxy}/v1/chat/completions"))
        .json(&second)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(!response.headers().contains_key("x-context-cascade"));
    let seen = h.script.seen();
    let previous: Value = serde_json::from_slice(&seen[0].body).unwrap();
    let current: Value = serde_json::from_slice(&seen[1].body).unwrap();
    let (p, c) = (
        previous["messages"].as_array().unwrap(),
        current["messages"].as_array().unwrap(),
    );
    assert_eq!(c.len(), p.len() + 2);
    assert_eq!(
        &c[..p.len()],
        &p[..],
        "the restarted proxy re-applied the same compaction"
    );
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn other_methods_on_cascade_paths_are_forwarded() {
    let h = start(Script::new(1_000_000), |c| c.window = Some(128_000)).await;
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
    let h = start(Script::new(1_000_000), |c| c.window = Some(128_000)).await;
    // Unusual spacing and key order: kept as the client wrote them.
    let raw = "{ \"messages\":[{\"content\":\"hi\",  \"role\":\"user\"}], \"model\":\"gpt-4o\" }";
    let response = h
        .client
        .post(format!("{}/v1/chat/completions", h.proxy))
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // A pinned message must lose its marker: re-written.
    let pinned = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi","_pin":true}]}"#;
    let response = h
        .client
        .post(format!("{}/v1/chat/completions", h.proxy))
        .header("content-type", "application/json")
        .body(pinned)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = h.script.seen();
    assert_eq!(&seen[0].body[..], raw.as_bytes());
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(
        sent,
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    );
}

#[tokio::test]
async fn summary_cache_survives_a_restart() {
    let path =
        std::env::temp_dir().join(format!("cascade-proxy-summaries-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let db = path.clone();
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = start(script, move |c| {
        c.window = Some(4000);
        c.db_path = db;
    })
    .await;
    let body = json!({"model": "gpt-4o", "messages": history(10, 3000, LAST)});
    let first = post(&h, "/v1/chat/completions", &body).await;
    assert!(
        first.headers()["x-context-cascade"]
            .to_str()
            .unwrap()
            .contains("summarize")
    );
    assert!(h.state.metrics().summary_misses >= 1);

    let mut config = cascade_proxy::ProxyConfig::new(h.upstream.clone());
    config.db_path = path.clone();
    config.window = Some(4000);
    config.discover = false;
    let (proxy, state) = common::start_proxy(config).await;
    // Another conversation name, so that the sticky prefix does not answer instead.
    let second = h
        .client
        .post(format!("{proxy}/v1/chat/completions"))
        .header("x-cascade-session", "after-restart")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let m = state.metrics();
    assert!(m.summary_hits >= 1 && m.summary_misses == 0, "{m:?}");
    let seen = h.script.seen();
    assert_eq!(seen[0].body, seen[1].body);
    let _ = std::fs::remove_file(&path);
}
