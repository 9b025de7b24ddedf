//! Prompt-cache stability: a long real session replayed turn by turn through the proxy.
//!
//! The agent resends its whole history on every call, as agents do. The provider's prompt
//! cache only hits when a request extends the previous one unchanged, so the measure is the
//! share of upstream requests whose messages start with exactly the previous upstream
//! request's messages (each message byte for byte) and whose other fields are unchanged.
//! The call points and the measure are `context_cascade::replay`'s, as in the CLI, the
//! benchmark and core's cache-stability test.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{Script, call_points, fixture_messages, parts, start};
use std::borrow::Cow;

use context_cascade::replay::{self, PrefixStability};
use serde_json::json;

/// The longest session of the fixtures (293 messages, 578k characters).
const LONG: &str = "claude-code__spotter__4d5611e5-main.json";
/// A shorter one from another agent (101 messages, 75k characters), for a small window.
const SHORT: &str = "openhands__llama-4-maverick__ponyc-4588.json";

struct Replay {
    calls: usize,
    compacted: usize,
    extending: usize,
    share: f64,
    /// Calls where the cascade applied nothing but the upstream request still did not
    /// extend the previous one (the sticky prefix failed): must be none.
    unstable_quiet_calls: Vec<usize>,
}

async fn replay(fixture: &str, window: u64, sticky: bool) -> Replay {
    let messages = fixture_messages(fixture);
    let mut script = Script::new(u64::MAX);
    // Roughly what a real tokenizer gives on this kind of text.
    script.bytes_per_token = 4.0;
    let h = start(script, |c| {
        c.window.force = Some(window);
        c.requests.sticky_prefix = sticky;
    })
    .await;
    let points = call_points(&messages);
    let mut compacted = 0;
    let mut applied = Vec::with_capacity(points.len());
    for &end in &points {
        let body = json!({"model": "gpt-4o", "max_tokens": 4096, "messages": &messages[..end]});
        let response = h
            .client
            .post(format!("{}/v1/chat/completions", h.proxy))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "call ending at message {end}");
        let steps = response.headers().get("x-context-cascade");
        applied.push(steps.is_some());
        if let Some(steps) = steps {
            compacted += 1;
            if std::env::var_os("REPLAY_VERBOSE").is_some() {
                println!("call ending at {end}: {}", steps.to_str().unwrap_or("?"));
            }
        }
    }
    let seen = h.script.seen();
    assert_eq!(seen.len(), points.len(), "one upstream request per call");
    let sent: Vec<Vec<Cow<str>>> = seen.iter().map(|s| parts(&s.body)).collect();
    let stability = PrefixStability::of(&sent);
    let (extending, share) = (stability.extending, stability.share());
    let unstable_quiet_calls = (1..seen.len())
        .filter(|&k| !applied[k] && !replay::extends(&sent[k - 1], &sent[k]))
        .map(|k| points[k])
        .collect();
    println!(
        "replay {fixture} at window {window}, sticky prefix {}: {} calls, {compacted} compacted by the cascade, \
         {extending}/{} upstream requests extend the previous one byte for byte = {:.1}%",
        if sticky { "on" } else { "off" },
        seen.len(),
        stability.compared,
        share * 100.0
    );
    Replay {
        calls: seen.len(),
        compacted,
        extending,
        share,
        unstable_quiet_calls,
    }
}

#[tokio::test]
async fn replay_at_128k_keeps_the_prompt_cache_prefix() {
    let r = replay(LONG, 128_000, true).await;
    assert!(r.calls > 100);
    assert!(r.compacted > 0, "the window must force compaction");
    assert!(r.extending > 0);
    assert!(
        r.unstable_quiet_calls.is_empty(),
        "{:?}",
        r.unstable_quiet_calls
    );
    assert!(r.share >= 0.8, "prefix-stability share {:.3}", r.share);
}

#[tokio::test]
async fn replay_at_a_small_window_extends_whenever_the_cascade_is_quiet() {
    // A window well under the session's size: the cascade fires often, and each firing
    // changes the prefix once; every call in between must extend the previous request.
    let r = replay(SHORT, 12_000, true).await;
    assert!(r.compacted > 0 && r.compacted < r.calls);
    assert!(
        r.unstable_quiet_calls.is_empty(),
        "{:?}",
        r.unstable_quiet_calls
    );
    // Without the sticky prefix the cascade decides afresh on the whole history each call.
    let fresh = replay(SHORT, 12_000, false).await;
    assert!(
        r.extending > fresh.extending,
        "sticky {} vs fresh {}",
        r.extending,
        fresh.extending
    );
}
