//! The `cascade` binary refuses a body whose object repeats a key (exit 2, one line naming
//! the object's JSON path): written back, such a body would hold one value where the
//! caller sent two.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::path::PathBuf;
use std::process::Output;

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "cascade-duplicate-keys-{}-{name}",
        std::process::id()
    ));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Asserts exit 2, nothing on stdout and exactly `expected` (one line) on stderr.
fn assert_refused(out: &Output, expected: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    assert_eq!(err, format!("{expected}\n"));
}

const WHY: &str = "a JSON object must not repeat a key (which value was meant?)";

#[test]
fn compact_refuses_a_repeated_top_level_key_and_names_the_file() {
    let body = br#"{"model":"gpt-4o","model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}"#;
    let file = temp_file("top.json", body);
    let name = file.to_str().unwrap();
    let out = common::run_with_stdin(&["compact", name, "--window", "8000"], b"");
    assert_refused(
        &out,
        &format!("cascade: {name}: $: duplicate key \"model\": {WHY}"),
    );
}

#[test]
fn the_path_names_the_object_inside_the_messages() {
    let body = br#"{"model":"gpt-4o","messages":[
        {"role":"system","content":"be brief"},
        {"role":"user","content":"a"},
        {"role":"assistant","content":"b"},
        {"role":"user","content":"first","content":"second"}]}"#;
    let out = common::run_with_stdin(&["compact", "-", "--window", "8000"], body);
    assert_refused(
        &out,
        &format!("cascade: <stdin>: $.messages[3]: duplicate key \"content\": {WHY}"),
    );
    // Every command that reads a conversation reads it the same way.
    let out = common::run_with_stdin(&["inspect", "-"], body);
    assert_refused(
        &out,
        &format!("cascade: <stdin>: $.messages[3]: duplicate key \"content\": {WHY}"),
    );
    let nested = br#"{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":[
        {"type":"text","text":"a"},
        {"type":"tool_result","tool_use_id":"t1","content":"x","is_error":false,"is_error":true}]}]}"#;
    let out = common::run_with_stdin(&["compact", "-", "--window", "8000"], nested);
    assert_refused(
        &out,
        &format!("cascade: <stdin>: $.messages[0].content[1]: duplicate key \"is_error\": {WHY}"),
    );
}

#[test]
fn the_same_key_in_different_objects_is_no_repeat() {
    let body = br#"{"model":"gpt-4o","messages":[
        {"role":"user","content":"a"},
        {"role":"assistant","content":"b","tool_calls":[
            {"id":"c1","type":"function","function":{"name":"ls","arguments":"{\"path\":\"/\",\"path\":\"/tmp\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"ok"}]}"#;
    // A repeat inside a string (the tool call's arguments) is text, not a key of the body.
    let out = common::run_with_stdin(&["compact", "-", "--window", "8000"], body);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        written["messages"][1]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"/","path":"/tmp"}"#
    );
}

#[test]
fn invalid_json_is_reported_as_such_even_with_a_repeated_key() {
    let out = common::run_with_stdin(
        &["compact", "-", "--window", "8000"],
        br#"{"model":"a","model":"b","messages":["#,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid JSON"), "{err}");
    assert!(!err.contains("duplicate"), "{err}");
}

/// A large body is refused the same way, and invalid JSON still reported as such (the
/// repeat is found while the body is parsed; only then is the rest of the text read again).
#[test]
fn a_large_body_is_checked_the_same_way() {
    let long = "x".repeat(70 * 1024);
    let body = format!(
        r#"{{"model":"gpt-4o","messages":[{{"role":"user","content":"{long}"}},
        {{"role":"assistant","content":"b","content":"c"}}]}}"#
    );
    let out = common::run_with_stdin(&["compact", "-", "--window", "200000"], body.as_bytes());
    assert_refused(
        &out,
        &format!("cascade: <stdin>: $.messages[1]: duplicate key \"content\": {WHY}"),
    );
    let cut = &body[..body.len() - 3];
    let out = common::run_with_stdin(&["compact", "-", "--window", "200000"], cut.as_bytes());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid JSON") && !err.contains("duplicate"),
        "{err}"
    );
    let fine = body.replacen(r#""content":"b","#, "", 1);
    let out = common::run_with_stdin(&["compact", "-", "--window", "200000"], fine.as_bytes());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
