//! Remembered facts: user messages that ask the model to remember something are stored per
//! conversation and put back into the system prompt when a later request no longer
//! carries them (an agent compacted its own history, or a client trimmed it).
//!
//! A conversation is named by the `x-cascade-session` header, or else by a hash of its
//! system prompt and first user message, which stay the same for the life of an agent run.
//! Everything here works on the request body as JSON, before it is parsed, so the injected
//! text is part of what the cascade sees (and estimates).

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
    let messages = messages(body);
    match format {
        Format::Anthropic => {
            if let Some(system) = body.get("system") {
                hasher.update(system.to_string().as_bytes());
            }
        }
        _ => {
            for message in messages.iter().filter(|m| is_system(m)) {
                hasher.update(
                    message
                        .get("content")
                        .map(Value::to_string)
                        .unwrap_or_default(),
                );
            }
        }
    }
    hasher.update(b"\0");
    if let Some(first) = messages.iter().find(|m| user_text(m).is_some()) {
        hasher.update(
            first
                .get("content")
                .map(Value::to_string)
                .unwrap_or_default(),
        );
    }
    hex::encode(hasher.finalize())
}

/// The remember requests among a request's user messages, in order.
pub fn remember_requests(body: &Value, policy: &RememberPolicy) -> Vec<String> {
    messages(body)
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
pub fn missing_facts(body: &Value, facts: &[String]) -> Vec<String> {
    let texts: Vec<String> = messages(body).iter().filter_map(user_text).collect();
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
/// system messages; Anthropic, appended to `system` (a string, or a text block in a list).
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
        let facts = remember_requests(&first, &policy);
        assert_eq!(facts.len(), 1);
        let mut later = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"}
        ]});
        assert_eq!(
            conversation_key(&HeaderMap::new(), &first, Format::OpenAi),
            conversation_key(&HeaderMap::new(), &later, Format::OpenAi)
        );
        let missing = missing_facts(&later, &facts);
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
        assert!(missing_facts(&first, &facts).is_empty());
    }

    #[test]
    fn remember_requests_in_output_text_parts_are_found() {
        let policy = RememberPolicy::default();
        let body = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "output_text", "text": "Please remember that the deploy key is K-42."}
        ]}]});
        assert_eq!(
            remember_requests(&body, &policy),
            vec!["Please remember that the deploy key is K-42.".to_owned()]
        );
        let facts = remember_requests(&body, &policy);
        assert!(missing_facts(&body, &facts).is_empty());
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
}
