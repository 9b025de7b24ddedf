//! `requests.gauge`: what an answer tells the client its prompt took, plain and streamed.
//! With `client` the upstream's prompt counts are scaled by the request's
//! estimate before and after the cascade; with `upstream` they come as the provider sent
//! them; an answer to a request the cascade left alone is the upstream's either way.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::{Gauge, IN_MEMORY_DB};
use cascade_test_support::upstream::{self, Recorded};
use serde_json::{Value, json};

const REPORTED: u64 = 5_000;

fn answer(r: &Recorded) -> axum::response::Response {
    if r.body["stream"] == true {
        let events = vec![
            format!("event: message_start\ndata: {}\n\n", json!({"type": "message_start", "message": {"id": "m",
                "type": "message", "role": "assistant", "model": "claude-x", "content": [],
                "usage": {"input_tokens": REPORTED, "output_tokens": 1}}})),
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into(),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n".into(),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
        ];
        return upstream::sse(events, std::time::Duration::ZERO);
    }
    upstream::json(200, upstream::anthropic_message("ok", REPORTED))
}

/// A proxy with `gauge` at an 8,000-token window in front of `upstream`; its base URL.
async fn start(upstream: &str, gauge: Gauge) -> String {
    let mut config = ProxyConfig::new(upstream.to_owned());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(8_000);
    config.requests.gauge = gauge;
    common::start_proxy(config).await.0
}

async fn reported(gauge: Gauge, turns: usize, stream: bool) -> (u64, String) {
    let up = upstream::start(|_, r| answer(r)).await;
    let proxy = start(&up.base, gauge).await;
    let mut messages = vec![json!({"role": "user", "content": "Fix the build."})];
    for i in 0..turns {
        messages.push(
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{i}"),
            "name": "Bash", "input": {"command": "make"}}]}),
        );
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{i}"),
            "content": common::prose(i, 6_000)}]}));
    }
    let body =
        json!({"model": "claude-x", "max_tokens": 1000, "stream": stream, "messages": messages});
    let response = reqwest::Client::new()
        .post(format!("{proxy}/v1/messages"))
        .header("x-api-key", "k")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let usage_line = text
        .lines()
        .find(|l| l.contains("input_tokens"))
        .map(|l| l.trim_start_matches("data: ").to_owned())
        .unwrap();
    let value: Value = serde_json::from_str(&usage_line).unwrap();
    let usage = value
        .pointer("/usage")
        .or_else(|| value.pointer("/message/usage"))
        .unwrap();
    (usage["input_tokens"].as_u64().unwrap(), text)
}

#[tokio::test]
async fn the_client_gauge_reports_what_the_client_sent_plain_and_streamed() {
    for stream in [false, true] {
        let (client, _) = reported(Gauge::Client, 12, stream).await;
        assert!(
            client > 2 * REPORTED,
            "scaled up to the client's size: {client}"
        );
        let (upstream, _) = reported(Gauge::Upstream, 12, stream).await;
        assert_eq!(upstream, REPORTED, "the provider's own count");
        // Nothing cut: the upstream's count either way.
        let (small, _) = reported(Gauge::Client, 1, stream).await;
        assert_eq!(small, REPORTED);
    }
}

/// A Responses answer reporting `REPORTED` input tokens.
fn responses_answer() -> axum::response::Response {
    upstream::json(
        200,
        json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-x",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
            "usage": {"input_tokens": REPORTED, "output_tokens": 1, "total_tokens": REPORTED + 1}}),
    )
}

/// What a Responses client is told its prompt took after the cascade compacted it.
async fn reported_responses(gauge: Gauge, turns: usize) -> u64 {
    let up = upstream::start(|_, _| responses_answer()).await;
    let proxy = start(&up.base, gauge).await;
    let mut input = vec![json!({"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "Fix the build."}]})];
    for i in 0..turns {
        input.push(
            json!({"type": "function_call", "call_id": format!("c{i}"), "name": "shell",
            "arguments": "{\"command\":[\"make\"]}"}),
        );
        input.push(
            json!({"type": "function_call_output", "call_id": format!("c{i}"),
            "output": common::prose(i, 6_000)}),
        );
    }
    let body = json!({"model": "gpt-x", "max_output_tokens": 1000, "input": input});
    let response = reqwest::Client::new()
        .post(format!("{proxy}/v1/responses"))
        .bearer_auth("k")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let value: Value = response.json().await.unwrap();
    value["usage"]["input_tokens"].as_u64().unwrap()
}

/// The default (`auto`): a Messages client is told what went upstream, a Responses client
/// (Codex, whose own compaction goes to the provider with its whole history) what it sent.
#[tokio::test]
async fn the_default_gauge_reports_the_client_size_on_the_responses_route_only() {
    assert_eq!(Gauge::default(), Gauge::Auto);
    let (messages, _) = reported(Gauge::Auto, 12, false).await;
    assert_eq!(messages, REPORTED, "Messages: the provider's own count");
    let responses = reported_responses(Gauge::Auto, 12).await;
    assert!(
        responses > 2 * REPORTED,
        "Responses: scaled up to the client's size: {responses}"
    );
    assert_eq!(reported_responses(Gauge::Upstream, 12).await, REPORTED);
    assert_eq!(
        reported_responses(Gauge::Auto, 1).await,
        REPORTED,
        "nothing cut"
    );
}
