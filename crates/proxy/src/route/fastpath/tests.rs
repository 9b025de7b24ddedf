//! The fast path's memo gives what the slow path computes from the parsed request.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure
use super::*;
use context_cascade::ContextManager;

/// The status page's digest of a request the fast path sent, built from its memo, is
/// the one the slow path computes from the parsed request: a conversation that moves
/// between the two paths keeps its prefix-stability record.
#[test]
fn the_digest_from_the_memo_is_the_slow_paths() {
    let path =
        cascade_test_support::fixture("transcripts/openhands__llama-4-maverick__ponyc-4588.json");
    let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let body = serde_json::json!({
        "model": "gpt-4o",
        "max_tokens": 512,
        "messages": fixture["messages"],
    });
    let bytes = serde_json::to_vec(&body).unwrap();
    let mut parsed = parse_value(body, Some(Format::OpenAi)).unwrap();
    parsed.resolve_tool_names();
    let slow = RequestDigest::of(&parsed);

    let manager = ContextManager::new(CascadeConfig::default());
    let fast = FastPath::new(true);
    let scan: Scan<'_> = serde_json::from_slice(&bytes).unwrap();
    let estimator = manager.estimator("gpt-4o");
    let digests = (scan.messages.iter()).map(|raw| {
        fast.facts(Format::OpenAi, raw, manager.config(), &estimator)
            .unwrap()
            .digest
    });
    let skeleton = skeleton(Format::OpenAi, &scan).unwrap();
    let envelope = envelope_hash(Format::OpenAi, &skeleton.envelope);
    assert_eq!(RequestDigest::from_parts(envelope, digests), slow);
    // A message that differs in one byte gives another digest.
    let edited = String::from_utf8(bytes)
        .unwrap()
        .replacen("ponyc", "ponyd", 1);
    let scan: Scan<'_> = serde_json::from_str(&edited).unwrap();
    let digests = (scan.messages.iter()).map(|raw| {
        fast.facts(Format::OpenAi, raw, manager.config(), &estimator)
            .unwrap()
            .digest
    });
    assert_ne!(RequestDigest::from_parts(envelope, digests), slow);
}

/// The same for an Anthropic request: its top-level system prompt is a leading message
/// of the skeleton, hashed like the slow path's.
#[test]
fn the_anthropic_digest_from_the_memo_is_the_slow_paths() {
    let body = serde_json::json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": "Fix the failing test."},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Run it first.", "signature": "c2ln"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                 "input": {"command": "cargo test"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": "test parse ... FAILED", "is_error": true}]},
        ],
    });
    let bytes = serde_json::to_vec(&body).unwrap();
    let mut parsed = parse_value(body, Some(Format::Anthropic)).unwrap();
    parsed.resolve_tool_names();
    let slow = RequestDigest::of(&parsed);
    let manager = ContextManager::new(CascadeConfig::default());
    let fast = FastPath::new(true);
    let scan: Scan<'_> = serde_json::from_slice(&bytes).unwrap();
    let estimator = manager.estimator("claude-sonnet-4-5");
    let skeleton = skeleton(Format::Anthropic, &scan).unwrap();
    assert_eq!(skeleton.messages.len(), 1, "the system prompt");
    let digests = (scan.messages.iter()).map(|raw| {
        let facts = fast.facts(Format::Anthropic, raw, manager.config(), &estimator);
        facts.unwrap().digest
    });
    let leading = skeleton.messages.iter().map(MessageId::of);
    let envelope = envelope_hash(Format::Anthropic, &skeleton.envelope);
    assert_eq!(
        RequestDigest::from_parts(envelope, leading.chain(digests)),
        slow
    );
}
