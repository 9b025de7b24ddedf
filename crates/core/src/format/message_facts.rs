//! Pure facts about wire JSON, for code that works on a request body before (or instead of)
//! parsing it into a [`crate::Conversation`]: the proxy's memory reads user text and finds
//! system messages this way. The readings are the parser's own ([`Role::parse`], the text
//! part types below), so the two cannot drift apart.

use serde_json::Value;

use crate::conversation::Role;

/// The content part types that carry text in either format: `text` (OpenAI Chat,
/// Anthropic), `input_text` and `output_text` (Responses-style parts that Chat clients
/// send too).
pub const TEXT_PART_TYPES: &[&str] = &["text", "input_text", "output_text"];

/// Whether a content part is a text part (see [`TEXT_PART_TYPES`]).
pub fn is_text_part(part: &Value) -> bool {
    part.get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| TEXT_PART_TYPES.contains(&kind))
}

/// The `messages` array of a request body (empty when there is none).
pub fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A message's role, when it names one the formats know.
pub fn role(message: &Value) -> Option<Role> {
    Role::parse(message.get("role")?.as_str()?)
}

/// Whether a message is an instruction (`system` or `developer`, see [`Role::is_system`]).
pub fn is_system(message: &Value) -> bool {
    role(message).is_some_and(Role::is_system)
}

/// The text of a message's content: a string as it is, or its text parts joined by
/// newlines (tool calls, tool results, images are not text). `None` when the content is
/// neither a string nor a list of parts.
pub fn text(message: &Value) -> Option<String> {
    match message.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| is_text_part(p))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// The text a user wrote in a message, if it is a user message with non-blank text (text
/// parts only, not tool results). The same reading serves both formats.
pub fn user_text(message: &Value) -> Option<String> {
    if role(message) != Some(Role::User) {
        return None;
    }
    text(message).filter(|t| !t.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn user_text_reads_every_text_part_type() {
        let message = json!({"role": "user", "content": [
            {"type": "text", "text": "a"},
            {"type": "input_text", "text": "b"},
            {"type": "output_text", "text": "c"},
            {"type": "tool_result", "tool_use_id": "t", "content": "not user text"},
            {"type": "image_url", "image_url": {"url": "x"}}
        ]});
        assert_eq!(user_text(&message).as_deref(), Some("a\nb\nc"));
        assert_eq!(user_text(&json!({"role": "user", "content": "  "})), None);
        assert_eq!(
            user_text(&json!({"role": "assistant", "content": "x"})),
            None
        );
    }

    #[test]
    fn system_roles_and_messages() {
        assert!(is_system(&json!({"role": "developer", "content": "x"})));
        assert!(is_system(&json!({"role": "system"})));
        assert!(!is_system(&json!({"role": "user"})));
        let body = json!({"messages": [{"role": "user", "content": "x"}]});
        assert_eq!(messages(&body).len(), 1);
        assert!(messages(&json!([])).is_empty());
    }
}
