//! Claude Code (with its default model) sends a system message inside `messages` (its
//! environment block) besides the top-level `system`. The Anthropic reader used to refuse the
//! whole request ("unknown role"); it now keeps the message, in its place, on every write.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Format, Role};
use serde_json::{Value, json};

fn body(turns: usize) -> Value {
    let mut messages = vec![
        json!({"role": "user", "content": "fix the failing test"}),
        json!({"role": "system", "content": "# Environment\nWorking directory: /repo\nPlatform: linux"}),
    ];
    for i in 0..turns {
        let id = format!("toolu_{i}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("cat log{i}")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": "line\n".repeat(400)}]}));
    }
    messages.push(json!({"role": "user", "content": "now run it"}));
    json!({"model": "claude-opus-4-1", "max_tokens": 1024,
           "system": [{"type": "text", "text": "You are Claude Code."}], "messages": messages})
}

#[test]
fn a_system_message_inside_messages_round_trips_in_place() {
    let original = body(2);
    let conversation = format::parse(original.to_string().as_bytes(), None).unwrap();
    assert_eq!(conversation.format, Format::Anthropic);
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role()).collect();
    assert_eq!(roles[..3], [Role::System, Role::User, Role::System]);
    let written = format::to_vec(&conversation, WriteOptions::default()).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), original);
}

#[test]
fn compaction_keeps_it_where_it_was() {
    let original = body(30);
    let mut conversation = format::parse(original.to_string().as_bytes(), None).unwrap();
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(6_000, 1_024);
    let report = pollster::block_on(manager.compact_with_summary(&mut conversation, budget));
    assert!(report.fits, "{}", report.summary_line());
    let written = format::to_vec(
        &conversation,
        WriteOptions {
            strip_pins: true,
            pretty: false,
        },
    )
    .unwrap();
    let out: Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(out["system"], original["system"]);
    assert_eq!(
        out["messages"][1], original["messages"][1],
        "the environment block moved"
    );
    let again = format::parse(&written, None).unwrap();
    let rewritten = format::to_vec(
        &again,
        WriteOptions {
            strip_pins: true,
            pretty: false,
        },
    )
    .unwrap();
    assert_eq!(written, rewritten);
}
