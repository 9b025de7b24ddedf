//! The OpenAI Responses wire format: lossless reading and writing, and the mapping of its
//! items onto the neutral model (pairs by `call_id`, reasoning beside its call, opaque
//! built-in and unknown items, `instructions` as a system message).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
mod responses_common;

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Block, CascadeConfig, ContextManager, Format, Role};
use responses_common::{fixture, fixtures, generated_session};
use serde_json::{Value, json};

/// Parses `body` (auto-detected, must be Responses), writes it back, checks the bytes are
/// the same and returns what was written.
fn round_trip(body: &Value) -> Value {
    common::round_trip(body, Format::Responses)
}

#[test]
fn every_fixture_round_trips_byte_for_byte() {
    let all = fixtures();
    assert!(all.len() >= 4);
    for (name, body) in all {
        assert_eq!(round_trip(&body), body, "{name}");
    }
}

#[test]
fn generated_sessions_round_trip() {
    for (turns, seed) in [(1, 1), (7, 2), (40, 3), (120, 4)] {
        let body = generated_session(turns, 2_000, seed);
        assert_eq!(round_trip(&body), body, "{turns} turns");
    }
}

#[test]
fn a_body_with_input_and_no_messages_is_detected() {
    let string = json!({"model": "m", "input": "hi"});
    let items = json!({"input": [], "model": "m"});
    for body in [string, items] {
        let c = format::parse_value(body, None).unwrap();
        assert_eq!(c.format, Format::Responses);
        assert_eq!(c.format.as_str(), "responses");
    }
    // `messages` wins: not a Responses body.
    let chat = json!({"messages": [{"role": "user", "content": "x"}], "input": "y"});
    assert_eq!(
        format::parse_value(chat, None).unwrap().format,
        Format::OpenAi
    );
    let forced = format::parse_value(json!({"input": 3}), Some(Format::Responses));
    assert_eq!(forced.unwrap_err().path, "$.input");
}

#[test]
fn codex_items_map_onto_messages_and_pairs() {
    let c = format::parse_value(fixture("codex-session"), None).unwrap();
    let roles: Vec<Role> = c.messages.iter().map(|m| m.role()).collect();
    use Role::*;
    assert_eq!(
        roles,
        [
            System, Developer, User, Assistant, Tool, Assistant, Tool, Assistant, Tool, Assistant,
            Tool, Assistant, Tool, Assistant, User
        ]
    );
    // The instructions, first, counted like any system prompt.
    assert!(c.messages[0].text_content().starts_with("You are Codex"));
    // Reasoning, the assistant's words and the apply_patch call of one turn: one message.
    let turn = &c.messages[7];
    let kinds: Vec<&str> = turn
        .blocks()
        .iter()
        .map(|b| match b {
            Block::Thinking(_) => "thinking",
            Block::Text(_) => "text",
            Block::ToolCall(_) => "call",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["thinking", "text", "call"]);
    let calls: Vec<(&str, &str)> = c.messages[7..]
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.name.as_str(), c.id.as_str()))
        .take(2)
        .collect();
    assert_eq!(
        calls,
        [
            ("apply_patch", "call_Zp4nB6vC1xM9kL2jH5gF8dS0"),
            ("local_shell", "call_Lc5vN7bM2zX4cV6bN8mQ0wE1")
        ]
    );
    // Every output is a tool message paired with its call, its tool name resolved.
    let results: Vec<_> = c.messages.iter().flat_map(|m| m.tool_results()).collect();
    assert_eq!(results.len(), 5);
    let names: Vec<&str> = results
        .iter()
        .map(|r| r.tool_name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "shell",
            "shell",
            "apply_patch",
            "local_shell",
            "update_plan"
        ]
    );
    // Codex's context, AGENTS.md and task items are one user turn: the first user message,
    // which the cascade always keeps, holds the task.
    assert_eq!(c.first_user_index(), Some(2));
    assert!(c.messages[2].text_content().starts_with("# AGENTS.md"));
    assert!(
        c.messages[2]
            .text_content()
            .ends_with("Find out why and fix it.")
    );
    assert!(!c.holds_history_upstream());
}

#[test]
fn built_in_and_unknown_items_stay_opaque_in_place() {
    let body = fixture("agents-sdk");
    let c = format::parse_value(body.clone(), None).unwrap();
    let opaque: Vec<String> = c
        .messages
        .iter()
        .flat_map(|m| m.blocks())
        .filter_map(|b| match b {
            Block::Other(o) => o.raw.get("type").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .collect();
    for kind in [
        "web_search_call",
        "file_search_call",
        "mcp_list_tools",
        "mcp_call",
        "image_generation_call",
        "future_item_kind",
        "item_reference",
        "mcp_approval_response",
    ] {
        assert!(opaque.iter().any(|k| k == kind), "{kind} not opaque");
    }
    // The computer call and its screenshot are a pair like any function call.
    let computer = c
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .find(|c| c.name == "computer");
    assert_eq!(computer.unwrap().id, "call_C0mpU");
    let pinned: Vec<String> = c
        .messages
        .iter()
        .filter(|m| m.is_pinned())
        .map(|m| m.text_content())
        .collect();
    assert_eq!(pinned, ["Now take a screenshot of the dashboard."]);
    // Written for the provider, the pin is gone and nothing else changed.
    let options = WriteOptions {
        strip_pins: true,
        pretty: false,
    };
    let sent = format::to_value(&c, options).unwrap();
    let mut expected = body;
    expected["input"][12]
        .as_object_mut()
        .unwrap()
        .remove("_pin");
    assert_eq!(sent, expected);
}

#[test]
fn instructions_tools_and_reserve_are_counted() {
    let body = fixture("string-input");
    let c = format::parse_value(body.clone(), None).unwrap();
    assert_eq!(c.messages.len(), 2);
    assert_eq!(c.messages[0].role(), Role::System);
    assert_eq!(c.messages[1].text_content(), "Why is the sky blue?");
    assert_eq!(c.output_reserve(), 256);
    let manager = ContextManager::new(CascadeConfig::default());
    let mut bare = body.clone();
    bare.as_object_mut().unwrap().remove("instructions");
    let without = format::parse_value(bare, None).unwrap();
    assert!(manager.estimate(&c) > manager.estimate(&without));

    let codex = format::parse_value(fixture("codex-session"), None).unwrap();
    assert!(codex.tools().is_some());
    let mut toolless = codex.clone();
    toolless.envelope.remove("tools");
    assert!(manager.estimate(&codex) > manager.estimate(&toolless) + 200);
}

#[test]
fn previous_response_id_marks_history_held_upstream() {
    let c = format::parse_value(fixture("previous-response"), None).unwrap();
    assert!(c.holds_history_upstream());
    assert_eq!(c.messages.len(), 1);
    assert_eq!(c.messages[0].role(), Role::Tool);
    let conversation = json!({"input": "x", "conversation": "conv_1"});
    assert!(
        format::parse_value(conversation, None)
            .unwrap()
            .holds_history_upstream()
    );
}

#[test]
fn items_the_model_cannot_hold_stay_opaque() {
    let body = json!({"input": [
        {"role": "user", "content": 7},
        {"type": "function_call", "name": 3, "call_id": "c", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": 5},
        {"type": "message", "role": "critic", "content": "?"},
        {"type": "function_call_output", "output": "no id"},
        {"role": "user", "content": [{"type": "input_text"}, "bare string part"]},
        {"type": "message", "role": "assistant"},
        {"type": "message", "role": "assistant", "content": null, "id": "msg_1"},
        {"type": "message", "role": "assistant", "content": ""}
    ]});
    assert_eq!(round_trip(&body), body);
    let non_objects = format::parse_value(json!({"input": [1]}), None).unwrap_err();
    assert_eq!(non_objects.path, "$.input[0]");
}

#[test]
fn messages_made_by_the_cascade_are_written_as_items() {
    let body = json!({"model": "m", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "e1"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** x"},
        {"type": "local_shell_call", "call_id": "c2", "action": {"type": "exec"}}
    ]});
    let mut c = format::parse_value(body, None).unwrap();
    c.messages
        .push(context_cascade::Message::text(Role::User, "a notice"));
    c.messages
        .push(context_cascade::Message::text(Role::Assistant, "done"));
    // A repair's results have no keys of their own: their type follows the call's.
    for id in ["c1", "c2"] {
        c.messages.insert(
            2,
            context_cascade::Message::new(
                Role::Tool,
                vec![Block::ToolResult(context_cascade::ToolResult::text(
                    id,
                    None,
                    "removed".into(),
                ))],
                context_cascade::Shape::String,
                Default::default(),
            ),
        );
    }
    let out = format::to_value(&c, WriteOptions::default()).unwrap();
    let input = &out["input"];
    assert_eq!(
        input[4],
        json!({"type": "local_shell_call_output", "id": "c2", "output": "removed"})
    );
    assert_eq!(
        input[5],
        json!({"type": "custom_tool_call_output", "call_id": "c1", "output": "removed"})
    );
    assert_eq!(input[6], json!({"role": "user", "content": "a notice"}));
    assert_eq!(input[7], json!({"role": "assistant", "content": "done"}));
}

#[test]
fn a_compacted_screenshot_output_is_still_a_screenshot() {
    let body = fixture("agents-sdk");
    let mut c = format::parse_value(body.clone(), None).unwrap();
    for message in &mut c.messages {
        for block in message.blocks_mut() {
            if let Block::ToolResult(result) = block {
                result.content = vec![Block::text("[compacted]")];
                result.shape = context_cascade::Shape::String;
            }
        }
    }
    let out = format::to_value(&c, WriteOptions::default()).unwrap();
    let screenshot = &out["input"][14];
    assert_eq!(screenshot["type"], "computer_call_output");
    assert_eq!(screenshot["output"], body["input"][14]["output"]);
    assert_eq!(out["input"][5]["output"], "[compacted]");
}

#[test]
fn a_turn_whose_parts_changed_is_still_written_without_private_keys() {
    let body = fixture("codex-session");
    let mut c = format::parse_value(body, None).unwrap();
    // The merged user turn (context + AGENTS.md + task) and an assistant turn of several
    // items, each given one more text block than their layouts know of.
    for index in [2, 7] {
        c.messages[index].blocks_mut().push(Block::text("extra"));
    }
    let text = String::from_utf8(format::to_vec(&c, WriteOptions::default()).unwrap()).unwrap();
    assert!(
        !text.contains("_responses"),
        "a private key reached the wire"
    );
    let again = format::parse(text.as_bytes(), None).unwrap();
    let calls = again.messages.iter().flat_map(|m| m.tool_calls()).count();
    assert_eq!(calls, 5);
    assert!(again.messages[2].text_content().contains("fix it.\nextra"));
}
