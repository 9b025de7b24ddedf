//! The proxy against a scripted upstream that enforces a context limit. What the proxy keeps between requests and restarts: the summary cache, remembered facts, the discovered window, the calibration, sticky prefixes.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{LAST, Script, anthropic_body, history, metrics_text, post, start};
use serde_json::{Value, json};

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
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
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
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
}

#[tokio::test]
async fn sticky_prefix_survives_a_restart() {
    let path = std::env::temp_dir().join(format!("cascade-proxy-sticky-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
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
    let store = cascade_proxy::store::SqliteStore::open(&path, Default::default()).unwrap();
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
        // The same credential as the first request: the state is the credential's own.
        .header("authorization", "Bearer sk-test-123")
        .header("x-api-key", "ant-test-456")
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
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
}

#[tokio::test]
async fn summary_cache_survives_a_restart() {
    let path =
        std::env::temp_dir().join(format!("cascade-proxy-summaries-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
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
        // The same credential as the first request: summaries are the credential's own.
        .header("authorization", "Bearer sk-test-123")
        .header("x-api-key", "ant-test-456")
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
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
}
