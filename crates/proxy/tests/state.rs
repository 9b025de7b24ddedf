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
    let h = start(script, |c| c.window.force = Some(4000)).await;
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
    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
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

/// A remembered fact over the store's limit is kept as its head and a note: a request that
/// still carries the whole message gets nothing injected, one that dropped it gets the head
/// and the note (never the 200 kB).
#[tokio::test]
async fn a_long_remembered_fact_comes_back_as_its_head_and_a_note() {
    let h = start(Script::new(1_000_000), |c| c.window.force = Some(128_000)).await;
    let fact = format!(
        "Please remember this config: {}",
        "key=value; ".repeat(20_000)
    );
    let mut messages = history(2, 100, &fact);
    let carried = json!({"model": "gpt-4o", "messages": messages.clone()});
    for _ in 0..2 {
        assert_eq!(
            post(&h, "/v1/chat/completions", &carried).await.status(),
            200
        );
    }
    messages.pop();
    messages.push(json!({"role": "user", "content": "Which config again?"}));
    let dropped = json!({"model": "gpt-4o", "messages": messages});
    assert_eq!(
        post(&h, "/v1/chat/completions", &dropped).await.status(),
        200
    );
    let seen = h.script.seen();
    for carried in &seen[..2] {
        assert!(!String::from_utf8_lossy(&carried.body).contains("context-cascade memory"));
    }
    let sent: Value = serde_json::from_slice(&seen[2].body).unwrap();
    let memory = sent["messages"][1]["content"].as_str().unwrap();
    assert!(
        memory.contains("Please remember this config: key=value;"),
        "{memory}"
    );
    assert!(memory.len() < 8192 + 300, "{} bytes injected", memory.len());
    assert!(
        memory.ends_with("bytes of this fact were not kept]"),
        "{memory}"
    );
    assert_eq!(h.state.metrics().facts_injected, 1);
}

#[tokio::test]
async fn window_is_discovered_from_llama_cpp_props() {
    let mut script = Script::new(1_000_000);
    script.n_ctx = Some(4096);
    let h = start(script, |c| c.window.discover = true).await;
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
    let db = common::TempDb::new("test");
    let h = common::start_on_disk(Script::new(1_000_000), &db, 128_000).await;
    let body = json!({"model": "gpt-4o", "messages": history(3, 400, LAST)});
    assert_eq!(post(&h, "/v1/chat/completions", &body).await.status(), 200);
    // Persisted in the background: what a graceful shutdown waits for.
    assert!(h.state.flush(std::time::Duration::from_secs(5)).await);
    let before = h.state.manager().calibration().get("gpt-4o").unwrap();
    let mut config = cascade_proxy::ProxyConfig::new(h.upstream.clone());
    config.state.path = db.path.clone();
    let restarted = cascade_proxy::AppState::new(config).unwrap();
    assert_eq!(
        restarted.manager().calibration().get("gpt-4o"),
        Some(before)
    );
}

#[tokio::test]
async fn sticky_prefix_survives_a_restart() {
    let db = common::TempDb::new("sticky");
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = common::start_on_disk(script, &db, 8000).await;
    let mut messages = history(12, 1500, LAST);
    let first = json!({"model": "gpt-4o", "messages": messages.clone()});
    let response = post(&h, "/v1/chat/completions", &first).await;
    assert!(
        response.headers().contains_key("x-context-cascade"),
        "compaction needed"
    );
    // Let the background write of the sticky prefix land before the restart.
    let config = common::restart_config(&h, &db, 8000);
    let store = cascade_proxy::store::SqliteStore::open(&db.path, Default::default()).unwrap();
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
    // The same credential as the first request: the state is the credential's own.
    let response = common::keyed_post(&h.client, format!("{proxy}/v1/chat/completions"))
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
}

#[tokio::test]
async fn summary_cache_survives_a_restart() {
    let db = common::TempDb::new("summaries");
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = common::start_on_disk(script, &db, 4000).await;
    let body = json!({"model": "gpt-4o", "messages": history(10, 3000, LAST)});
    let first = post(&h, "/v1/chat/completions", &body).await;
    assert!(
        first.headers()["x-context-cascade"]
            .to_str()
            .unwrap()
            .contains("summarize")
    );
    assert!(h.state.metrics().summary_misses >= 1);

    let config = common::restart_config(&h, &db, 4000);
    let (proxy, state) = common::start_proxy(config).await;
    // Another conversation name, so that the sticky prefix does not answer instead.
    // The same credential as the first request: summaries are the credential's own.
    let second = common::keyed_post(&h.client, format!("{proxy}/v1/chat/completions"))
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
}
