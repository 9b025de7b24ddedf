//! `POST /v1/responses` through the cascade (plain, streaming with a `response.failed`
//! overflow, history held by the provider), and windows learned from overflow errors.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{LAST, Script, anthropic_body, history, metrics_text, post, start};
use serde_json::{Value, json};

/// The test history as a Responses body: `instructions` and `input` message items.
fn responses_body(messages: &[Value], stream: bool) -> Value {
    json!({"model": "gpt-4o", "instructions": messages[0]["content"],
           "input": messages[1..].to_vec(), "stream": stream, "max_output_tokens": 256})
}

fn header(response: &reqwest::Response) -> String {
    (response.headers().get("x-context-cascade"))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_responses_overflow_is_recovered() {
    let h = start(Script::new(3000), |c| c.window.force = Some(8000)).await;
    let response = post(
        &h,
        "/v1/responses",
        &responses_body(&history(15, 600, LAST), false),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(
        header(&response).contains("prune_history"),
        "{}",
        header(&response)
    );
    let answer: Value = response.json().await.unwrap();
    let text = answer["output"][0]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(LAST), "{text}");
    let sent = common::recovered_request(&h);
    assert!(sent["instructions"].is_string());
    assert_eq!(
        sent["input"].as_array().unwrap().last().unwrap()["content"],
        LAST
    );
    // Usage from `usage.input_tokens` calibrates the model.
    assert!(h.state.manager().calibration().get("gpt-4o").is_some());
    let m = h.state.metrics();
    assert_eq!((m.upstream_calls, m.overflow_errors), (2, 1));
}

#[tokio::test]
async fn a_failed_stream_is_retried_before_any_event_reaches_the_client() {
    let h = start(Script::new(3000), |c| c.window.force = Some(8000)).await;
    let response = post(
        &h,
        "/v1/responses",
        &responses_body(&history(15, 600, LAST), true),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(header(&response).contains("prune_history"));
    let text = response.text().await.unwrap();
    // The failed attempt's events never reach the client: one `response.created`, no failure.
    assert_eq!(text.matches("event: response.created").count(), 1, "{text}");
    assert!(!text.contains("response.failed"), "{text}");
    assert!(
        text.contains("response.completed") && text.contains(LAST),
        "{text}"
    );
    // A failed stream quotes no count, so recovery may take more than one attempt.
    let statuses: Vec<u16> = h.script.seen().iter().map(|s| s.status).collect();
    assert_eq!(statuses.last(), Some(&200), "{statuses:?}");
    let overflows = statuses.iter().filter(|s| **s == 400).count();
    assert!((1..5).contains(&overflows), "{statuses:?}");
    assert_eq!(h.state.metrics().overflow_errors, overflows as u64);
    // The usage of `response.completed` calibrates the model once the stream went by.
    assert!(h.state.manager().calibration().get("gpt-4o").is_some());
}

#[tokio::test]
async fn history_held_by_the_provider_is_forwarded_untouched() {
    let h = start(Script::new(3000), |c| c.window.force = Some(8000)).await;
    let mut body = responses_body(&history(2, 100, LAST), false);
    body["previous_response_id"] = json!("resp_0");
    let bytes = serde_json::to_vec_pretty(&body).unwrap();
    let response = (h.client.post(format!("{}/v1/responses", h.proxy)))
        .header("content-type", "application/json")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        header(&response).starts_with("history-upstream"),
        "{}",
        header(&response)
    );
    assert_eq!(h.script.seen()[0].body.as_ref(), bytes.as_slice());
    let text = metrics_text(&h).await;
    assert!(text.contains("cascade_history_upstream_total 1"), "{text}");
    assert!(text.contains("cascade_requests_total{route=\"/v1/responses\",status=\"200\"} 1"));
}

#[tokio::test]
async fn a_limit_stated_by_an_overflow_is_kept_for_the_next_requests() {
    // No --window: the catalog says 200,000 for Claude; the upstream allows 6,000.
    let h = start(Script::new(6000), |_| {}).await;
    let model = "claude-sonnet-4-5";
    let mut messages = history(8, 600, LAST);
    let mut bodies = Vec::new();
    for turn in 0..6 {
        for i in 0..4 {
            messages.insert(
                messages.len() - 1,
                json!({"role": if i % 2 == 0 {"user"} else {"assistant"},
                "content": common::prose(100 * turn + i, 1500)}),
            );
        }
        // Claude Code's reserve: without the learned limit's rule, E would be negative.
        let mut body = anthropic_body(model, &messages, false);
        body["max_tokens"] = json!(32000);
        bodies.push(body);
    }
    for body in &bodies {
        let response = post(&h, "/v1/messages", body).await;
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    }
    let statuses: Vec<u16> = h.script.seen().iter().map(|s| s.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 400).count(),
        1,
        "{statuses:?}"
    );
    let text = metrics_text(&h).await;
    assert!(
        text.contains(&format!(
            "cascade_learned_window_tokens{{model=\"{model}\"}} 6000"
        )),
        "{text}"
    );
    // The first request fits both the catalog's window and the limit; the second teaches it.
    assert!(
        text.contains("cascade_window_source_total{source=\"learned\"} 4"),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_that_cannot_fit_is_sent_as_the_best_request_and_says_so() {
    // The system prompt alone is over the forced window; the upstream accepts it.
    let h = start(Script::new(100_000), |c| c.window.force = Some(2000)).await;
    let mut messages = history(6, 600, LAST);
    messages[0]["content"] = json!(common::prose(999, 12_000));
    let response = post(&h, "/v1/responses", &responses_body(&messages, false)).await;
    assert_eq!(response.status(), 200);
    assert!(
        header(&response).ends_with("cannot fit"),
        "{}",
        header(&response)
    );
    let seen = h.script.seen();
    assert_eq!(seen.len(), 1);
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(sent["instructions"], messages[0]["content"]);
    assert_eq!(
        sent["input"].as_array().unwrap().last().unwrap()["content"],
        LAST
    );
}
