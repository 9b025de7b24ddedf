//! The fast path (issue 15): a request the cascade would leave as it is goes upstream as it
//! came, without being parsed whole. It must be invisible: the same bytes upstream, the same
//! report, the same answer as the slow path, request for request.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
#[path = "../../core/tests/responses_common/mod.rs"]
mod responses_common;
#[path = "../../core/tests/common/to_anthropic.rs"]
mod to_anthropic;

use cascade_test_support::{OverflowKind, overflow_body_sized};
use common::{Harness, Script, call_points, fixture_messages, history, start};
use serde_json::json;

/// The report header the proxy adds when a strategy ran or the request does not fit.
const REPORT: &str = "x-context-cascade";

async fn proxy(window: u64, fast_path: bool) -> Harness {
    let mut script = Script::new(u64::MAX);
    script.bytes_per_token = 4.0;
    start(script, |c| {
        c.window.force = Some(window);
        c.requests.fast_path = fast_path;
    })
    .await
}

/// What a client and the upstream saw of one call.
#[derive(Debug, PartialEq)]
struct Exchange {
    status: u16,
    report: Option<String>,
    answer: Vec<u8>,
}

async fn send(h: &Harness, body: &[u8]) -> Exchange {
    send_to(h, "/v1/chat/completions", body).await
}

async fn send_to(h: &Harness, route: &str, body: &[u8]) -> Exchange {
    let response = (h.client)
        .post(format!("{}{route}", h.proxy))
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let report = (response.headers().get(REPORT)).map(|v| v.to_str().unwrap().to_owned());
    let answer = response.bytes().await.unwrap().to_vec();
    Exchange {
        status,
        report,
        answer,
    }
}

/// Replays `fixture` as its agent sent it through a proxy with the fast path and one
/// without, and checks every call is the same on both; returns the fast path's count.
async fn same_on_both(fixture: &str, model: &str, window: u64) -> u64 {
    same_on_both_in(fixture, model, window, false).await
}

/// [`same_on_both`], as OpenAI Chat requests or (`anthropic`) as Anthropic Messages ones.
async fn same_on_both_in(fixture: &str, model: &str, window: u64, anthropic: bool) -> u64 {
    let messages = fixture_messages(fixture);
    let bodies = call_points(&messages).into_iter().map(|end| {
        let (route, body) = if anthropic {
            let mut body = to_anthropic::to_anthropic(&messages[..end]);
            body["model"] = json!(model);
            ("/v1/messages", body)
        } else {
            let body = json!({"model": model, "max_tokens": 4096, "messages": &messages[..end]});
            ("/v1/chat/completions", body)
        };
        (route, serde_json::to_vec(&body).unwrap(), end)
    });
    let label = format!("{fixture} at {window}, {model}");
    same_on_both_bodies(&label, window, bodies.collect()).await
}

/// Sends each (route, body, call) through a proxy with the fast path and one without, and
/// checks every call is the same on both; returns the fast path's count.
async fn same_on_both_bodies(label: &str, window: u64, bodies: Vec<(&str, Vec<u8>, usize)>) -> u64 {
    let (fast, slow) = (proxy(window, true).await, proxy(window, false).await);
    for (route, bytes, end) in &bodies {
        let (a, b) = (
            send_to(&fast, route, bytes).await,
            send_to(&slow, route, bytes).await,
        );
        assert_eq!(a, b, "{label}: call ending at {end}");
    }
    let (seen_fast, seen_slow) = (fast.script.seen(), slow.script.seen());
    assert_eq!(seen_fast.len(), seen_slow.len());
    for (k, (a, b)) in seen_fast.iter().zip(&seen_slow).enumerate() {
        assert!(a.body == b.body, "{label}: upstream request {k} differs");
    }
    let taken = fast.state.metrics().fast_path;
    assert_eq!(slow.state.metrics().fast_path, 0);
    println!(
        "{label}: {taken} of {} calls on the fast path",
        seen_fast.len()
    );
    taken
}

/// Whether the model produced a Responses input item (reasoning, a call, its message).
fn model_side(item: &serde_json::Value) -> bool {
    let kind = item["type"].as_str().unwrap_or("message");
    kind == "reasoning"
        || (kind.ends_with("_call"))
        || (kind == "message" && item["role"] == "assistant")
}

/// A Responses session replayed as its agent sent it: one request before each run of
/// model-side items, and the whole body last.
fn responses_calls(
    session: &serde_json::Value,
    model: &str,
) -> Vec<(&'static str, Vec<u8>, usize)> {
    let items = session["input"].as_array().unwrap();
    let ends = (1..=items.len()).filter(|&end| {
        !model_side(&items[end - 1]) && (end == items.len() || model_side(&items[end]))
    });
    ends.map(|end| {
        let mut body = session.clone();
        body["model"] = json!(model);
        body["stream"] = json!(false);
        body["input"] = json!(&items[..end]);
        ("/v1/responses", serde_json::to_vec(&body).unwrap(), end)
    })
    .collect()
}

#[tokio::test]
async fn responses_requests_take_the_same_decisions() {
    // Codex's own layout: developer and user context items, reasoning beside its calls,
    // function, custom and local shell calls with their outputs.
    let codex = responses_common::fixture("codex-session");
    for model in ["gpt-5-codex", "claude-sonnet-4-5"] {
        let calls = responses_calls(&codex, model);
        let n = calls.len() as u64;
        let taken = same_on_both_bodies(&format!("codex-session, {model}"), 200_000, calls).await;
        assert_eq!(taken, n - 1, "every call after the first, {model}");
    }
    // A long generated Codex session: a window it never fills, and one it fills.
    let session = responses_common::generated_session(60, 3_000, 7);
    let calls = responses_calls(&session, "gpt-5-codex");
    let n = calls.len() as u64;
    let taken = same_on_both_bodies("generated session at 400K", 400_000, calls.clone()).await;
    assert_eq!(taken, n - 1);
    let taken = same_on_both_bodies("generated session at 24K", 24_000, calls).await;
    assert!(taken > 0 && taken < n - 1, "{taken} of {n}");
}

#[tokio::test]
async fn a_responses_remember_request_takes_the_slow_path() {
    let h = proxy(200_000, true).await;
    let item = |role: &str, text: &str| json!({"type": "message", "role": role, "content": text});
    let mut input = vec![item("user", "Remember: the staging database is read-only.")];
    for next in ["Next step?", "And then?"] {
        let body = json!({"model": "gpt-5-codex", "instructions": "Be terse.", "input": input});
        assert_eq!(
            send_to(&h, "/v1/responses", &serde_json::to_vec(&body).unwrap())
                .await
                .status,
            200
        );
        input.push(item("assistant", "Noted."));
        input.push(item("user", next));
    }
    assert_eq!(h.state.metrics().fast_path, 0);
}

#[tokio::test]
async fn a_replayed_session_is_the_same_with_and_without_the_fast_path() {
    // A window the session never fills: after the first call every call takes the fast path.
    let calls = call_points(&fixture_messages(
        "openhands__llama-4-maverick__ponyc-4588.json",
    ));
    let taken = same_on_both(
        "openhands__llama-4-maverick__ponyc-4588.json",
        "gpt-4o",
        200_000,
    )
    .await;
    assert_eq!(taken as usize, calls.len() - 1);
    // A window it fills: the fast path takes the calls before the first compaction only.
    let taken = same_on_both(
        "openhands__llama-4-maverick__ponyc-4588.json",
        "gpt-4o",
        12_000,
    )
    .await;
    assert!(taken > 0 && (taken as usize) < calls.len() - 1, "{taken}");
}

#[tokio::test]
async fn models_estimated_with_the_prior_take_the_same_decisions() {
    let fixture = "claude-code__spotter__6c2214d7-subagent-afc096d.json";
    let taken = same_on_both(fixture, "claude-sonnet-4-5", 64_000).await;
    assert!(taken > 0);
    same_on_both(fixture, "claude-sonnet-4-5", 16_000).await;
}

#[tokio::test]
async fn anthropic_requests_take_the_same_decisions() {
    // Claude Code's own session, as Claude Code sends it: a top-level system prompt, tool
    // calls as tool_use blocks, results as user messages of tool_result blocks.
    let fixture = "claude-code__spotter__6c2214d7-subagent-afc096d.json";
    let calls = call_points(&fixture_messages(fixture)).len() as u64;
    let taken = same_on_both_in(fixture, "claude-sonnet-4-5", 200_000, true).await;
    assert_eq!(taken, calls - 1);
    let taken = same_on_both_in(fixture, "claude-sonnet-4-5", 16_000, true).await;
    assert!(taken > 0 && taken < calls - 1, "{taken}");
}

#[tokio::test]
async fn the_fast_path_forwards_the_clients_bytes_as_they_came() {
    let h = proxy(200_000, true).await;
    // Unusual spacing and key order: a re-serialised body would differ.
    let first = r#"{ "messages" : [ {"content":"Summarise the plan.",  "role":"user"} ], "model":"gpt-4o" }"#;
    let second = r#"{ "messages" : [ {"content":"Summarise the plan.",  "role":"user"}, {"role":"assistant","content":"Done."}, {"content":"Thanks, now the risks.",  "role":"user"} ], "model":"gpt-4o" }"#;
    assert_eq!(send(&h, first.as_bytes()).await.status, 200);
    assert_eq!(send(&h, second.as_bytes()).await.status, 200);
    let seen = h.script.seen();
    assert_eq!(seen[1].body.as_ref(), second.as_bytes());
    assert_eq!(h.state.metrics().fast_path, 1);
}

#[tokio::test]
async fn an_overflow_on_the_fast_path_is_recovered_without_sending_the_request_twice() {
    let h = proxy(200_000, true).await;
    let mut messages = history(6, 600, "What did we decide?");
    let first = json!({"model": "gpt-4o", "messages": messages.clone()});
    assert_eq!(
        send(&h, &serde_json::to_vec(&first).unwrap()).await.status,
        200
    );
    // The provider's window turns out smaller than the proxy thought: the next request
    // overflows on the fast path, and the slow path recovers from that answer.
    messages.push(json!({"role": "assistant", "content": "We decided to ship on Friday."}));
    messages.push(json!({"role": "user", "content": "And who signs off?"}));
    let second = json!({"model": "gpt-4o", "messages": messages});
    let (status, error) = overflow_body_sized(OverflowKind::OpenAi, 800, 1_200);
    h.script.push_error(status, &error, &[]);
    let exchange = send(&h, &serde_json::to_vec(&second).unwrap()).await;
    assert_eq!(
        exchange.status,
        200,
        "{}",
        String::from_utf8_lossy(&exchange.answer)
    );
    let seen = h.script.seen();
    // The first call, the overflowing one (sent once), the recovered one.
    assert_eq!(
        seen.len(),
        3,
        "{:?}",
        seen.iter().map(|s| s.status).collect::<Vec<_>>()
    );
    assert_eq!(seen[1].status, 400);
    assert!(seen[2].body.len() < seen[1].body.len());
    let metrics = h.state.metrics();
    assert_eq!(
        (
            metrics.fast_path,
            metrics.overflow_errors,
            metrics.overflow_recoveries
        ),
        (1, 1, 1)
    );
    assert_eq!(metrics.upstream_calls, 3);
}

#[tokio::test]
async fn a_conversation_with_a_remembered_fact_takes_the_slow_path() {
    let h = proxy(200_000, true).await;
    let mut messages = vec![
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": "Remember: the staging database is read-only."}),
    ];
    let first = json!({"model": "gpt-4o", "messages": messages.clone()});
    assert_eq!(
        send(&h, &serde_json::to_vec(&first).unwrap()).await.status,
        200
    );
    messages.push(json!({"role": "assistant", "content": "Noted."}));
    messages.push(json!({"role": "user", "content": "Next step?"}));
    let second = json!({"model": "gpt-4o", "messages": messages});
    assert_eq!(
        send(&h, &serde_json::to_vec(&second).unwrap()).await.status,
        200
    );
    assert_eq!(h.state.metrics().fast_path, 0);
}

#[tokio::test]
async fn a_conversation_declined_early_takes_the_fast_path_again_once_it_is_clean() {
    // A system prompt past the 64 KiB the fast path identifies a body by (Claude Code's
    // is of that size): requests of one task share their first 64 KiB.
    let system = common::prose(0, 70_000);
    let task = "Fix the parser.";
    let body = |results: usize, chars: usize| {
        let mut messages = vec![
            json!({"role": "system", "content": system}),
            json!({"role": "user", "content": task}),
        ];
        for i in 0..results {
            let id = format!("call_{i}");
            messages.push(
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
                "type": "function", "function": {"name": "read_file",
                "arguments": format!("{{\"path\":\"src/m{i}.rs\"}}")}}]}),
            );
            messages.push(json!({"role": "tool", "tool_call_id": id,
                "content": common::prose(i + 1, chars)}));
        }
        serde_json::to_vec(&json!({"model": "gpt-4o", "max_tokens": 1024, "messages": messages}))
            .unwrap()
    };
    let h = proxy(60_000, true).await;
    // Too large: compacted, twice (the second is declined by its first 64 KiB alone; it
    // grows past what the first compaction's deeper cut left room for).
    for results in [8, 14] {
        let exchange = send(&h, &body(results, 40_000)).await;
        assert!(exchange.report.is_some(), "compacted");
    }
    // The task starts over, small: the slow path leaves it untouched...
    assert!(send(&h, &body(1, 1_000)).await.report.is_none());
    assert_eq!(h.state.metrics().fast_path, 0);
    // ... so the next request of it, sharing those 64 KiB, takes the fast path.
    let next = body(2, 1_000);
    assert!(send(&h, &next).await.report.is_none());
    assert_eq!(h.state.metrics().fast_path, 1);
    assert_eq!(
        h.script.seen().last().unwrap().body.as_ref(),
        next.as_slice()
    );
}
