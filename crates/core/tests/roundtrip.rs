//! Lossless reading and writing: a round trip with nothing changed is the identity, byte for
//! byte in key order, on every fixture in both formats and on every block type.
// Helpers beside the tests unwrap what a test would: a panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::round_trip;
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Block, Format, Role};
use serde_json::json;

#[test]
fn every_fixture_round_trips_in_openai_form() {
    for (name, fixture) in common::transcripts() {
        // The fixture file itself is an object with `messages` and extra keys: OpenAI form.
        assert_eq!(round_trip(&fixture, Format::OpenAi), fixture, "{name}");
        let body = common::openai_body(&fixture);
        assert_eq!(round_trip(&body, Format::OpenAi), body, "{name}");
        let bare = fixture["messages"].clone();
        assert_eq!(round_trip(&bare, Format::Bare), bare, "{name}");
    }
}

#[test]
fn every_fixture_round_trips_in_anthropic_form() {
    for (name, fixture) in common::transcripts() {
        let body = common::to_anthropic(fixture["messages"].as_array().unwrap());
        assert_eq!(round_trip(&body, Format::Anthropic), body, "{name}");
    }
}

#[test]
fn tool_names_are_resolved_from_their_calls() {
    for (name, fixture) in common::transcripts() {
        for body in [
            common::openai_body(&fixture),
            common::to_anthropic(fixture["messages"].as_array().unwrap()),
        ] {
            let c = format::parse_value(body, None).unwrap();
            let results: Vec<_> = c.messages.iter().flat_map(|m| m.tool_results()).collect();
            assert!(!results.is_empty(), "{name}");
            for r in results {
                assert!(
                    r.tool_name.is_some(),
                    "{name}: result {} has no tool name",
                    r.call_id
                );
            }
        }
    }
}

#[test]
fn openai_shapes_and_unknown_fields_survive() {
    let body = json!({
        "model": "gpt-4.1", "temperature": 0.2,
        "messages": [
            {"role": "developer", "content": "be terse"},
            {"role": "system", "content": [{"type": "text", "text": "sys", "x": 1}]},
            {"role": "user", "name": "ann", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                {"type": "mystery", "payload": [1, 2]}
            ]},
            {"role": "assistant", "content": null, "reasoning_content": "hmm", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "not json"}}
            ]},
            {"role": "tool", "tool_call_id": "a", "content": "fn main() {}"},
            {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "ok"}], "is_error": true},
            {"role": "assistant", "function_call": {"name": "legacy", "arguments": "{}"}, "content": null},
            {"role": "function", "name": "legacy", "content": "legacy result"},
            {"role": "assistant", "content": "done", "_pin": true, "refusal": null}
        ],
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
        "max_completion_tokens": 500
    });
    round_trip(&body, Format::OpenAi);
    let c = format::parse_value(body, None).unwrap();
    assert_eq!(c.messages[0].role(), Role::Developer);
    assert!(matches!(c.messages[2].blocks()[1], Block::Binary(_)));
    assert!(matches!(c.messages[2].blocks()[2], Block::Binary(_)));
    assert!(matches!(c.messages[2].blocks()[3], Block::Other(_)));
    assert_eq!(c.messages[3].tool_calls().count(), 2);
    assert!(c.messages[5].is_error());
    let legacy = c.messages[7].tool_results().next().unwrap();
    assert_eq!(legacy.tool_name.as_deref(), Some("legacy"));
    assert_eq!(
        legacy.call_id,
        c.messages[6].tool_calls().next().unwrap().id
    );
    assert!(c.messages[8].is_pinned());
    assert_eq!(c.output_reserve(), 500);
    let stripped = format::to_value(
        &c,
        WriteOptions {
            strip_pins: true,
            pretty: false,
        },
    )
    .unwrap();
    assert!(stripped["messages"][8].get("_pin").is_none());
}

#[test]
fn anthropic_block_types_survive() {
    let body = json!({
        "model": "claude-sonnet-4-5", "max_tokens": 2048,
        "system": [{"type": "text", "text": "You are a coder.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "see", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "let me think", "signature": "xyz"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a"}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "text result"},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": [
                    {"type": "text", "text": "boom"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "BBBB"}}
                ]},
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
            ]},
            {"role": "assistant", "content": "ok", "_pin": true}
        ]
    });
    round_trip(&body, Format::Anthropic);
    let c = format::parse_value(body, None).unwrap();
    assert_eq!(c.messages[0].role(), Role::System);
    assert!(matches!(c.messages[2].blocks()[0], Block::Thinking(_)));
    assert!(matches!(c.messages[2].blocks()[1], Block::Thinking(_)));
    let results: Vec<_> = c.messages[3].tool_results().collect();
    assert_eq!(results[1].tool_name.as_deref(), Some("Bash"));
    assert!(c.messages[3].is_error());
    assert!(matches!(c.messages[3].blocks()[2], Block::Other(_)));
    assert!(c.messages[4].is_pinned());
    // system as a plain string
    round_trip(
        &json!({"system": "plain", "messages": [{"role": "user", "content": "hi"}]}),
        Format::Anthropic,
    );
}

#[test]
fn format_can_be_forced() {
    let body = json!({"messages": [{"role": "user", "content": "hi"}]});
    let bytes = serde_json::to_vec(&body).unwrap();
    assert_eq!(format::parse(&bytes, None).unwrap().format, Format::OpenAi);
    assert_eq!(
        format::parse(&bytes, Some(Format::Anthropic))
            .unwrap()
            .format,
        Format::Anthropic
    );
}
