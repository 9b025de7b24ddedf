//! Issue 13, item 2: Anthropic output alternates. The cascade's notices and summaries are
//! their own messages inside `Conversation`; the Anthropic writer merges them into an
//! adjacent user message, and the reader splits them out again, so compaction stays
//! idempotent through the wire and an untouched request still round-trips byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::invariants::{self, Scope};
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Format};
use serde_json::{Value, json};

fn write(c: &context_cascade::Conversation) -> Vec<u8> {
    format::to_vec(c, WriteOptions::default()).unwrap()
}

#[test]
fn compacted_fixtures_alternate_and_stay_idempotent_through_the_wire() {
    let manager = ContextManager::new(CascadeConfig::default());
    let mut compacted = 0;
    for (name, fixture) in common::transcripts() {
        let body = common::to_anthropic(fixture["messages"].as_array().unwrap());
        let input = serde_json::to_vec(&body).unwrap();
        let original = format::parse(&input, None).unwrap();
        let size = manager.estimate(&original);
        for window in [4_000, 8_000, 16_000, size / 10, size / 20, size / 3] {
            let budget = Budget::new(window.max(2_000), original.output_reserve());
            let mut output = original.clone();
            let report = pollster::block_on(manager.compact_with_summary(&mut output, budget));
            compacted += usize::from(report.messages_after < report.messages_before);
            let bytes = write(&output);
            invariants::wire_alternates(&input, &bytes, Scope::All)
                .unwrap_or_else(|e| panic!("{name} at {window}: {e}"));
            // What goes on the wire reads back as the same conversation...
            // (Forced: with every tool block gone, a body without `system` reads as OpenAI.)
            let reread = format::parse(&bytes, Some(Format::Anthropic)).unwrap();
            assert_eq!(
                reread.messages.len(),
                output.messages.len(),
                "{name} at {window}: {}",
                String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(1500)
                    .collect::<String>()
            );
            // ...and compacting it again with the same budget changes nothing.
            let mut again = reread.clone();
            pollster::block_on(manager.compact_with_summary(&mut again, budget));
            assert!(
                write(&again) == bytes,
                "{name} at {window}: a second compaction through the wire changed the output"
            );
        }
    }
    assert!(compacted > 20, "only {compacted} runs removed messages");
}

fn round_trip(body: &Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let c = format::parse(&bytes, None).unwrap();
    assert_eq!(c.format, Format::Anthropic);
    assert_eq!(
        String::from_utf8(write(&c)).unwrap(),
        String::from_utf8(bytes).unwrap()
    );
}

#[test]
fn inputs_that_merely_contain_marker_text_round_trip_exactly() {
    let notice = "[context compacted: 3 earlier messages removed]";
    let summary = "[context summary]\nthe user wants a parser";
    let text = |t: &str| json!({"type": "text", "text": t});
    let cases = [
        // A marker at the end, at the start, in the middle, alone, twice, with extra keys.
        json!([{"role": "user", "content": [text("hi"), text(notice)]}]),
        json!([{"role": "user", "content": [text(summary), text("hi")]}]),
        json!([{"role": "user", "content": [text("a"), text(notice), text("b")]}]),
        json!([{"role": "user", "content": notice}]),
        json!([{"role": "user", "content": [text(notice)]}]),
        json!([{"role": "user", "content": [text(summary), text(notice)]}]),
        json!([{"content": [text(summary), text(notice)], "role": "user"}]),
        json!([{"role": "user", "_pin": true, "content": [text(summary), text(notice)]}]),
        json!([{"role": "user", "content": [text("hi"), {"type": "text", "text": notice, "cache_control": {"type": "ephemeral"}}]}]),
        // Separate messages, as an older cascade wrote them: two user turns stay two.
        json!([{"role": "user", "content": "first"}, {"role": "user", "content": notice}, {"role": "assistant", "content": "ok"}]),
        json!([{"role": "user", "content": "first"}, {"role": "user", "content": [text(notice)]}, {"role": "user", "content": "go"}]),
        // Tool results first, marker after them.
        json!([
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}, text(notice)]},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": [text(notice), text("next")]}
        ]),
    ];
    for messages in cases {
        round_trip(&json!({"model": "claude", "system": "s", "messages": messages}));
    }
}

#[test]
fn a_notice_merges_into_the_first_user_message_on_the_wire() {
    let mut messages = vec![json!({"role": "user", "content": "the task"})];
    for i in 0..12 {
        messages.push(
            json!({"role": "assistant", "content": format!("step {i} {}", "x".repeat(2_000))}),
        );
        messages
            .push(json!({"role": "user", "content": format!("more {i} {}", "y".repeat(2_000))}));
    }
    let body = json!({"model": "claude", "max_tokens": 100, "system": "s", "messages": messages});
    let input = serde_json::to_vec(&body).unwrap();
    let mut c = format::parse(&input, None).unwrap();
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(4_000, 100);
    let report = manager.compact(&mut c, budget);
    assert!(report.messages_after < report.messages_before);
    let bytes = write(&c);
    invariants::wire_alternates(&input, &bytes, Scope::All).unwrap();
    let out: Value = serde_json::from_slice(&bytes).unwrap();
    let first = &out["messages"][0]["content"];
    assert_eq!(first[0], json!({"type": "text", "text": "the task"}));
    assert!(
        first[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("[context compacted: ")
    );
}

#[test]
fn user_messages_without_markers_are_never_merged() {
    use context_cascade::{Conversation, Message, Role};
    let mut c = Conversation::new(Format::Anthropic);
    c.envelope.insert("messages".into(), Value::Null);
    let mut pinned = Message::text(Role::User, "remember: eu-west-1");
    pinned.fields_mut().insert("_pin".into(), json!(true));
    c.messages.push(pinned);
    c.messages.push(Message::text(Role::User, "hello"));
    let out: Value = serde_json::from_slice(&write(&c)).unwrap();
    assert_eq!(out["messages"][1]["content"], "hello");
}
