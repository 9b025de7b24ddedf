//! Issue 12: the current turn is never cut (SPEC.md ③, invariant 1), and tool-call ids
//! reused across turns (as Kimi-K2 agents emit them) pair with the right call.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::invariants::{self, Run, Scope};
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Block, Budget, CascadeConfig, ContextManager, Conversation, Role};
use serde_json::{Value, json};

fn parse(body: &Value) -> Conversation {
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

const INSTRUCTION: &str = "Fix the failing parser test in src/parser.rs, then run the suite.";

/// An earlier turn, then one long final turn: the instruction, 40 tool steps, thinking
/// only in the turn's first assistant message.
fn long_turn() -> Value {
    let mut messages = vec![
        json!({"role": "user", "content": "Set up the repository and tell me when it builds."}),
        json!({"role": "assistant", "content": "It builds."}),
        json!({"role": "user", "content": INSTRUCTION}),
    ];
    for step in 0..40 {
        let id = format!("toolu_{step:02}");
        let mut content = Vec::new();
        if step == 0 {
            content.push(json!({"type": "thinking", "thinking": "The parser test fails on empty input; read the parser first.", "signature": "c2lnbmF0dXJlLW9mLXRoZS10aGlua2luZy1ibG9jaw=="}));
        }
        content.push(json!({"type": "tool_use", "id": id, "name": "Read",
            "input": {"file_path": format!("/repo/src/module_{step}.rs")}}));
        messages.push(json!({"role": "assistant", "content": content}));
        let output = format!("fn module_{step}() {{}}\n").repeat(12);
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}]}));
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 200, "system": "You are a coding agent.",
        "messages": messages})
}

#[test]
fn a_long_final_turn_keeps_its_instruction_and_thinking() {
    let manager = ContextManager::new(CascadeConfig::default());
    let body = long_turn();
    let original = parse(&body);
    let budget = Budget::new(2_500, 200);
    let (output, report) = invariants::compact(&manager, &original, budget);
    assert!(report.messages_after < report.messages_before);
    // The instruction and the turn's first assistant message, byte for byte.
    let instruction = &original.messages[3];
    assert_eq!(instruction.text_content(), INSTRUCTION);
    let answer = &original.messages[4];
    assert_eq!(answer.role(), Role::Assistant);
    assert!(matches!(answer.blocks().first(), Some(Block::Thinking(_))));
    assert!(output.messages.contains(instruction), "instruction lost");
    assert!(output.messages.contains(answer), "the turn's thinking lost");
    // The turn alone was over budget: the report says its older exchanges went.
    assert!(
        report.steps.iter().any(|s| s.inside_current_turn),
        "{report:#?}"
    );
    invariants::hold(&Run::new(&manager, &original, &output, &report, budget)).unwrap();
    let write = |c: &Conversation| {
        let options = WriteOptions {
            strip_pins: true,
            pretty: false,
        };
        format::to_vec(c, options).unwrap()
    };
    invariants::wire_alternates(&write(&original), &write(&output), Scope::All).unwrap();
    // What was removed of the turn left its trail.
    let trail = report.trail().unwrap();
    assert!(trail.files > 0, "{trail:?}");
    let text: String = output.messages.iter().map(|m| m.text_content()).collect();
    assert!(text.contains("$ROOT = /repo/src"), "{text}");
}

#[test]
fn tool_call_ids_reused_across_turns_pair_with_their_own_call() {
    let id = "functions.str_replace_editor:0";
    let mut messages = vec![json!({"role": "user", "content": "Make the tests pass."})];
    for turn in 0..30 {
        let path = format!("/repo/src/file_{}.py", turn % 5);
        let command = if turn % 2 == 0 { "view" } else { "str_replace" };
        let arguments = json!({"command": command, "path": path, "old_str": "a", "new_str": "b"});
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "str_replace_editor",
            "arguments": arguments.to_string()}}]}),
        );
        let output = if turn == 7 {
            "Traceback (most recent call last):\nValueError: bad token at 3".to_owned()
        } else {
            format!("line of {path}\n").repeat(40)
        };
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    messages.push(json!({"role": "user", "content": "Go on."}));
    let original = parse(&json!({"model": "kimi-k2", "messages": messages}));
    let manager = ContextManager::new(CascadeConfig::default());
    for window in [2_000, 4_000, 8_000] {
        let budget = Budget::new(window, 0);
        let (output, report) = invariants::compact(&manager, &original, budget);
        let run = Run::new(&manager, &original, &output, &report, budget);
        invariants::hold(&run).unwrap_or_else(|e| panic!("{window}: {e}"));
        // A compacted view says which later call superseded it, never a wrong tool.
        for message in &output.messages {
            for result in message.tool_results() {
                let text = result.joined_text();
                if let Some(note) = text.lines().nth(1).filter(|l| l.starts_with("stale: ")) {
                    assert!(note.ends_with("by str_replace_editor"), "{note}");
                }
            }
        }
    }
}
