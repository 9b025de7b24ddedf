//! Remembered facts: user messages that ask the model to remember something are stored per
//! conversation and put back into the system prompt when a later request no longer
//! carries them (an agent compacted its own history, or a client trimmed it).
//!
//! A conversation is named by the `x-cascade-session` header, or else by a hash of its
//! system prompt and first user message, which stay the same for the life of an agent run
//! (a Responses request: its `prompt_cache_key` when it has one, see [`conversation_key`]).
//! Everything here works on the request body as JSON, before it is parsed, so the injected
//! text is part of what the cascade sees (and estimates).

use std::borrow::Cow;

use axum::http::HeaderMap;
use context_cascade::Format;
use context_cascade::RememberPolicy;
use context_cascade::format::message_facts::{is_system, messages, user_text};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::state::store::fact::fact_head;

/// The header that names a conversation explicitly.
pub const SESSION_HEADER: &str = "x-cascade-session";
/// The first line of the injected memory text.
pub const MEMORY_HEADING: &str =
    "[context-cascade memory] Earlier in this conversation the user asked you to remember:";

/// The conversation key of a request.
pub fn conversation_key(headers: &HeaderMap, body: &Value, format: Format) -> String {
    let mut hasher = Sha256::new();
    if let Some(session) = headers.get(SESSION_HEADER) {
        hasher.update(b"session\0");
        hasher.update(session.as_bytes());
        return hex::encode(hasher.finalize());
    }
    hasher.update(format.as_str().as_bytes());
    hasher.update(b"\0");
    if format == Format::Responses {
        responses_key(&mut hasher, body);
        return hex::encode(hasher.finalize());
    }
    let messages = messages(body);
    match format {
        Format::Anthropic => {
            if let Some(system) = body.get("system") {
                hasher.update(system.to_string().as_bytes());
            }
        }
        _ => {
            for message in messages.iter().filter(|m| is_system(m)) {
                hasher.update(content_of(message));
            }
        }
    }
    hasher.update(b"\0");
    if let Some(first) = messages.iter().find(|m| user_text(m).is_some()) {
        hasher.update(content_of(first));
    }
    hex::encode(hasher.finalize())
}

/// A Responses conversation: the client's own `prompt_cache_key` when it sends one (Codex
/// sends its conversation id), else its `instructions`, the system items before the first
/// user item, and that item. Only leading items are read, so the fast path names the
/// conversation from the first few items without reading the rest.
fn responses_key(hasher: &mut Sha256, body: &Value) {
    if let Some(key) = body.get("prompt_cache_key").and_then(Value::as_str) {
        hasher.update(b"prompt_cache_key\0");
        hasher.update(key.as_bytes());
        return;
    }
    if let Some(instructions) = body.get("instructions") {
        hasher.update(instructions.to_string().as_bytes());
    }
    hasher.update(b"\0");
    let items = input_items(body);
    let first_user = items.iter().position(|m| user_text(m).is_some());
    let leading = &items[..first_user.unwrap_or(items.len())];
    for item in leading.iter().filter(|m| is_system(m)) {
        hasher.update(content_of(item));
    }
    hasher.update(b"\0");
    if let Some(first) = first_user.map(|at| &items[at]) {
        hasher.update(content_of(first));
    }
}

/// A message's `content` as JSON text (what the key hashes).
fn content_of(message: &Value) -> String {
    message
        .get("content")
        .map(Value::to_string)
        .unwrap_or_default()
}

/// A Responses body's input as messages: its items, or an `input` string as one user
/// message (the API reads it so).
fn input_items(body: &Value) -> Cow<'_, [Value]> {
    match body.get("input") {
        Some(Value::Array(items)) => Cow::Borrowed(items.as_slice()),
        Some(Value::String(text)) => Cow::Owned(vec![json!({"role": "user", "content": text})]),
        _ => Cow::Borrowed(&[]),
    }
}

/// The messages a request's user texts are read from: `messages`, or a Responses body's
/// input items.
fn conversation_messages(body: &Value, format: Format) -> Cow<'_, [Value]> {
    match format {
        Format::Responses => input_items(body),
        _ => Cow::Borrowed(messages(body)),
    }
}

/// The remember requests among a request's user messages, in order.
pub fn remember_requests(body: &Value, format: Format, policy: &RememberPolicy) -> Vec<String> {
    conversation_messages(body, format)
        .iter()
        .filter_map(user_text)
        .filter(|text| policy.is_remember_request(text))
        .collect()
}

/// The SHA-256 of a fact's text (its identity in the store).
pub fn fact_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The stored facts this request no longer carries in any user message. A fact the store
/// cut is carried when the request holds its head (the text before the store's note).
pub fn missing_facts(body: &Value, format: Format, facts: &[String]) -> Vec<String> {
    let texts: Vec<String> = (conversation_messages(body, format).iter())
        .filter_map(user_text)
        .collect();
    facts
        .iter()
        .filter(|fact| !texts.iter().any(|t| t.contains(fact_head(fact))))
        .cloned()
        .collect()
}

/// The text injected for `facts`: a heading and one quoted line per fact. Deterministic, so
/// the same missing facts give the same system prompt (and the provider's cache holds).
pub fn memory_text(facts: &[String]) -> String {
    let mut out = String::from(MEMORY_HEADING);
    for fact in facts {
        out.push_str("\n- ");
        out.push_str(&fact.replace('\n', " "));
    }
    out
}

/// Which message of the parsed conversation an injection changed (Anthropic's `system` is
/// message 0), so that its hash can be recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// A new message was inserted at this index.
    Inserted(usize),
    /// The message at this index was changed in place.
    Changed(usize),
}

/// Puts the facts into the system prompt: OpenAI, a system message after the leading
/// system messages; Anthropic, appended to `system` (a string, or a text block in a list);
/// Responses, appended to `instructions` (the parser's message 0).
pub fn inject(body: &mut Value, format: Format, facts: &[String]) -> Option<Injection> {
    if facts.is_empty() {
        return None;
    }
    let text = memory_text(facts);
    match format {
        Format::Anthropic => {
            let object = body.as_object_mut()?;
            match object.get_mut("system") {
                Some(Value::String(system)) => {
                    system.push_str("\n\n");
                    system.push_str(&text);
                    Some(Injection::Changed(0))
                }
                Some(Value::Array(blocks)) => {
                    blocks.push(json!({"type": "text", "text": text}));
                    Some(Injection::Changed(0))
                }
                Some(_) => None,
                None => {
                    object.insert("system".into(), Value::String(text));
                    Some(Injection::Inserted(0))
                }
            }
        }
        Format::Responses => {
            let object = body.as_object_mut()?;
            match object.get_mut("instructions") {
                Some(Value::String(instructions)) => {
                    instructions.push_str("\n\n");
                    instructions.push_str(&text);
                    Some(Injection::Changed(0))
                }
                Some(_) => None,
                None => {
                    object.insert("instructions".into(), Value::String(text));
                    Some(Injection::Inserted(0))
                }
            }
        }
        _ => {
            let messages = body.get_mut("messages").and_then(Value::as_array_mut)?;
            let at = messages.iter().take_while(|m| is_system(m)).count();
            messages.insert(at, json!({"role": "system", "content": text}));
            Some(Injection::Inserted(at))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_dropped_by_the_client_are_injected() {
        let policy = RememberPolicy::default();
        let first = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "Please remember that the deploy key is K-42."}
        ]});
        let facts = remember_requests(&first, Format::OpenAi, &policy);
        assert_eq!(facts.len(), 1);
        let mut later = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"}
        ]});
        assert_eq!(
            conversation_key(&HeaderMap::new(), &first, Format::OpenAi),
            conversation_key(&HeaderMap::new(), &later, Format::OpenAi)
        );
        let missing = missing_facts(&later, Format::OpenAi, &facts);
        assert_eq!(missing, facts);
        assert_eq!(
            inject(&mut later, Format::OpenAi, &missing),
            Some(Injection::Inserted(1))
        );
        assert_eq!(later["messages"][1]["role"], "system");
        assert!(
            later["messages"][1]["content"]
                .as_str()
                .unwrap()
                .contains("K-42")
        );
        assert!(missing_facts(&first, Format::OpenAi, &facts).is_empty());
    }

    #[test]
    fn remember_requests_in_output_text_parts_are_found() {
        let policy = RememberPolicy::default();
        let body = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "output_text", "text": "Please remember that the deploy key is K-42."}
        ]}]});
        assert_eq!(
            remember_requests(&body, Format::OpenAi, &policy),
            vec!["Please remember that the deploy key is K-42.".to_owned()]
        );
        let facts = remember_requests(&body, Format::OpenAi, &policy);
        assert!(missing_facts(&body, Format::OpenAi, &facts).is_empty());
    }

    #[test]
    fn anthropic_system_gets_the_text() {
        let mut body = json!({"system": [{"type": "text", "text": "s"}], "messages": []});
        let changed = inject(&mut body, Format::Anthropic, &["remember x".into()]);
        assert_eq!(changed, Some(Injection::Changed(0)));
        assert_eq!(body["system"][1]["type"], "text");
        let mut bare = json!({"messages": []});
        let inserted = inject(&mut bare, Format::Anthropic, &["remember y".into()]);
        assert_eq!(inserted, Some(Injection::Inserted(0)));
        assert!(bare["system"].as_str().unwrap().contains("remember y"));
    }

    #[test]
    fn responses_facts_are_read_from_the_input_and_put_into_the_instructions() {
        let policy = RememberPolicy::default();
        let first = json!({"model": "m", "instructions": "sys", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Please remember that the deploy key is K-42."}]}
        ]});
        let facts = remember_requests(&first, Format::Responses, &policy);
        assert_eq!(facts.len(), 1);
        assert!(missing_facts(&first, Format::Responses, &facts).is_empty());
        let mut later = json!({"model": "m", "instructions": "sys", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ]});
        assert_eq!(
            conversation_key(&HeaderMap::new(), &first, Format::Responses),
            conversation_key(&HeaderMap::new(), &later, Format::Responses)
        );
        let missing = missing_facts(&later, Format::Responses, &facts);
        assert_eq!(missing, facts);
        assert_eq!(
            inject(&mut later, Format::Responses, &missing),
            Some(Injection::Changed(0))
        );
        assert!(
            later["instructions"]
                .as_str()
                .unwrap()
                .starts_with("sys\n\n")
        );
        assert!(later["instructions"].as_str().unwrap().contains("K-42"));
        let mut bare = json!({"model": "m", "input": "hi"});
        assert_eq!(
            inject(&mut bare, Format::Responses, &missing),
            Some(Injection::Inserted(0))
        );
        assert!(bare["instructions"].as_str().unwrap().contains("K-42"));
    }

    #[test]
    fn two_responses_conversations_get_two_keys() {
        let conversation = |task: &str| {
            json!({"model": "m", "instructions": "sys", "input": [
                {"type": "message", "role": "developer", "content": "rules"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]}
            ]})
        };
        let key = |body: &Value| conversation_key(&HeaderMap::new(), body, Format::Responses);
        assert_ne!(key(&conversation("fix a")), key(&conversation("fix b")));
        assert_ne!(
            key(&json!({"input": "fix a"})),
            key(&json!({"input": "fix b"}))
        );
        assert_eq!(
            key(&json!({"input": "fix a"})),
            key(&json!({"input": [{"role": "user", "content": "fix a"}]}))
        );
    }
}
