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
    let scan = Scan::read(Format::OpenAi, &bytes).unwrap();
    let estimator = manager.estimator("gpt-4o");
    let digests = (scan.messages.iter().zip(scan.ids())).map(|(raw, id)| {
        fast.facts(Format::OpenAi, (raw, id), manager.config(), &estimator)
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
    let scan = Scan::read(Format::OpenAi, edited.as_bytes()).unwrap();
    let digests = (scan.messages.iter().zip(scan.ids())).map(|(raw, id)| {
        fast.facts(Format::OpenAi, (raw, id), manager.config(), &estimator)
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
    let scan = Scan::read(Format::Anthropic, &bytes).unwrap();
    let estimator = manager.estimator("claude-sonnet-4-5");
    let skeleton = skeleton(Format::Anthropic, &scan).unwrap();
    assert_eq!(skeleton.messages.len(), 1, "the system prompt");
    let digests = (scan.messages.iter().zip(scan.ids())).map(|(raw, id)| {
        let facts = fast.facts(Format::Anthropic, (raw, id), manager.config(), &estimator);
        facts.unwrap().digest
    });
    let leading = skeleton.messages.iter().map(MessageId::of);
    let envelope = envelope_hash(Format::Anthropic, &skeleton.envelope);
    assert_eq!(
        RequestDigest::from_parts(envelope, leading.chain(digests)),
        slow
    );
}

/// A Responses body: the messages the fast path reads from groups of items are the slow
/// path's, one for one (the same digest), and so is the exact count of the whole request.
#[test]
fn the_responses_digest_and_count_from_the_memo_are_the_slow_paths() {
    let path = cascade_test_support::fixture("responses/codex-session.json");
    let bytes = std::fs::read(path).unwrap();
    let mut parsed = context_cascade::format::parse(&bytes, Some(Format::Responses)).unwrap();
    parsed.resolve_tool_names();
    let slow = RequestDigest::of(&parsed);
    let manager = ContextManager::new(CascadeConfig::default()).with_exact_counts();
    let estimator = manager.estimator("gpt-5-codex");
    assert!(estimator.counter.is_some(), "an exact count to compare");
    let fast = FastPath::new(true);
    let scan = Scan::read(Format::Responses, &bytes).unwrap();
    let facts =
        (fast.item_facts((&scan.messages, &scan.ids()), manager.config(), &estimator)).unwrap();
    let skeleton = skeleton(Format::Responses, &scan).unwrap();
    assert_eq!(skeleton.messages.len(), 1, "the instructions");
    assert_eq!(skeleton.messages.len() + facts.len(), parsed.messages.len());
    let leading = skeleton.messages.iter().map(MessageId::of);
    let envelope = envelope_hash(Format::Responses, &skeleton.envelope);
    let digests = facts.iter().map(|f| f.digest);
    assert_eq!(
        RequestDigest::from_parts(envelope, leading.chain(digests)),
        slow
    );
    let counts = (facts.iter()).fold(ClassCounts::of_conversation(&skeleton), |acc, f| {
        acc + f.counts
    });
    let tokens = request_tokens(&estimator, &skeleton, &facts, &counts);
    assert_eq!(tokens, estimator.tokens(&parsed));
    // Again from the memo: the same facts without parsing.
    let again =
        (fast.item_facts((&scan.messages, &scan.ids()), manager.config(), &estimator)).unwrap();
    assert_eq!(
        request_tokens(&estimator, &skeleton, &again, &counts),
        tokens
    );
}

/// A Responses conversation's key is the slow path's, from the leading items only, and two
/// conversations of one client (no session header) get two keys: their sticky records and
/// remembered facts do not meet.
#[test]
fn the_responses_key_is_the_slow_paths_and_names_one_conversation() {
    let path = cascade_test_support::fixture("responses/codex-session.json");
    let body: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let key = |body: &Value| {
        let bytes = serde_json::to_vec(body).unwrap();
        let scan = Scan::read(Format::Responses, &bytes).unwrap();
        let fast = responses_key(&HeaderMap::new(), &scan).unwrap();
        let slow =
            crate::state::memory::conversation_key(&HeaderMap::new(), body, Format::Responses);
        assert_eq!(fast, slow);
        fast
    };
    let mut without_cache_key = body.clone();
    without_cache_key
        .as_object_mut()
        .unwrap()
        .remove("prompt_cache_key");
    let mut other_task = without_cache_key.clone();
    let items = other_task["input"].as_array_mut().unwrap();
    let first_user = (items.iter_mut())
        .find(|m| context_cascade::format::message_facts::user_text(m).is_some())
        .unwrap();
    first_user["content"] = serde_json::json!([{"type": "input_text", "text": "another task"}]);
    assert_ne!(key(&without_cache_key), key(&other_task));
    // What follows the first user item does not name the conversation: the session grows.
    let mut later = without_cache_key.clone();
    later["input"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}));
    assert_eq!(key(&without_cache_key), key(&later));
    // The client's own cache key names it whatever the items say.
    let mut a = other_task.clone();
    a["prompt_cache_key"] = serde_json::json!("conversation-a");
    let mut b = without_cache_key.clone();
    b["prompt_cache_key"] = serde_json::json!("conversation-a");
    assert_eq!(key(&a), key(&b));
    b["prompt_cache_key"] = serde_json::json!("conversation-b");
    assert_ne!(key(&a), key(&b));
}

/// An agent's calls, each body the previous one plus its new messages (a real session as
/// Chat and as Responses input): reading each after the previous one's layout gives what a
/// whole scan gives, and takes every message the two share without scanning it.
#[test]
fn each_call_of_a_session_reads_as_a_whole_scan_reads_it() {
    let path =
        cascade_test_support::fixture("transcripts/openhands__llama-4-maverick__ponyc-4588.json");
    let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let messages = fixture["messages"].as_array().unwrap();
    let responses: Vec<Value> = (messages.iter())
        .map(|m| serde_json::json!({"type": "message", "role": m["role"], "content": m["content"].to_string()}))
        .collect();
    for (format, items, field) in [
        (Format::OpenAi, messages.clone(), "messages"),
        (Format::Responses, responses, "input"),
    ] {
        let layouts = scan::Layouts::new();
        let mut previous_len = 0;
        for end in (2..items.len()).step_by(3) {
            let body =
                serde_json::json!({"model": "gpt-4o", field: items[..end], "max_tokens": end});
            let bytes = serde_json::to_vec(&body).unwrap();
            let scan = layouts.scan(format, 1, &bytes).unwrap();
            let whole = Scan::read(format, &bytes).unwrap();
            assert_eq!(scan.messages, whole.messages);
            assert_eq!(scan.rest, whole.rest);
            assert_eq!(scan.messages_at, whole.messages_at);
            assert_eq!(scan.ids(), whole.ids());
            assert_eq!(scan.known_len(), previous_len, "{format:?} at {end}");
            layouts.keep(1, &scan, &bytes, &scan.ids());
            previous_len = end;
        }
    }
}
