//! The proxy against a scripted upstream that enforces a context limit. Overflow recovery through the proxy: pruning, streaming answers of both formats, llama.cpp, exhausted retries, the LLM summarizer.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{LAST, OpenAiFlavor, Script, anthropic_body, history, metrics_text, post, start};
use serde_json::{Value, json};

#[tokio::test]
async fn openai_overflow_is_recovered_by_pruning() {
    let h = start(Script::new(3000), |c| c.window.force = Some(8000)).await;
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

    let sent = common::recovered_request(&h);
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], LAST);
    assert_eq!(messages[0]["role"], "system");
    assert!(sent.to_string().contains("earlier messages removed"));
    assert!(!String::from_utf8_lossy(&h.script.seen()[1].body).contains("_pin"));

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
    let h = start(Script::new(3000), |c| c.window.force = Some(200_000)).await;
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
    let sent = common::recovered_request(&h);
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
    let h = start(script, |c| c.window.force = Some(32_000)).await;
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
    let h = start(Script::new(20), |c| c.window.force = Some(8000)).await;
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
async fn llm_summarizer_is_used_when_configured() {
    // The scripted upstream doubles as the summarizer endpoint.
    let mut script = Script::new(1_000_000);
    script.report_usage = false;
    let h = start(script, |c| c.window.force = Some(4000)).await;
    let mut config = cascade_proxy::ProxyConfig::new(h.upstream.clone());
    config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(4000);
    config.summarizer.endpoint = h.upstream.clone();
    config.summarizer.model = Some("summarizer-model".into());
    let (proxy, state) = common::start_proxy(config).await;
    let body = json!({"model": "gpt-4o", "messages": history(10, 3000, LAST)});
    let response = common::send_chat(&h.client, &proxy, &body).await;
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
