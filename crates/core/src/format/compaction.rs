//! The providers' own compaction, as it shows in a request: where it starts the history.
//!
//! - Anthropic threshold compaction (`context_management.edits: [{"type":
//!   "compact_20260112"}]`) answers with a `compaction` block (`content`,
//!   `encrypted_content`) at the start of the assistant message; the client sends it back and
//!   the API ignores every block before it. On-demand compaction (the top-level `compaction`
//!   parameter) returns a signed `compaction` block that must come first in `messages`.
//! - The OpenAI Responses API answers `context_management: [{"type": "compaction"}]`,
//!   `POST /v1/responses/compact` and Codex's `compaction_trigger` with a `compaction` item
//!   (`encrypted_content`, readable only by the provider that made it); the items before the
//!   newest one may be dropped by the client.
//!
//! Either way the newest such block or item is where the history the provider reads begins:
//! what precedes it is not the cascade's to keep or count, and the block itself is opaque
//! (an unknown block, written back byte for byte). The reader keeps it as
//! [`Block::Other`]; [`history_start`] finds the message that holds the newest one.

use serde_json::Value;

use crate::conversation::{Block, Conversation};

/// The `type` of a provider's compaction block (Anthropic) or item (Responses).
pub const COMPACTION_TYPE: &str = "compaction";

/// Whether `block` is a provider's compaction block or item.
pub fn is_compaction(block: &Block) -> bool {
    match block {
        Block::Other(opaque) => {
            opaque.raw.get("type").and_then(Value::as_str) == Some(COMPACTION_TYPE)
        }
        _ => false,
    }
}

/// The index of the message that holds the newest compaction block or item, if any: the
/// provider reads the history from there (system messages and the envelope aside).
///
/// ```
/// use context_cascade::format::{compaction::history_start, parse};
///
/// let body = br#"{"model":"claude-x","max_tokens":100,"system":"be brief","messages":[
///   {"role":"user","content":"long ago"},
///   {"role":"assistant","content":[{"type":"compaction","content":"Summary","encrypted_content":null},
///                                  {"type":"text","text":"Going on."}]},
///   {"role":"user","content":"next"}]}"#;
/// let conversation = parse(body, None)?;
/// // The system prompt is message 0, then "long ago", then the compaction's message.
/// assert_eq!(history_start(&conversation), Some(2));
/// # Ok::<(), context_cascade::ParseError>(())
/// ```
pub fn history_start(conversation: &Conversation) -> Option<usize> {
    (conversation.messages.iter()).rposition(|message| message.blocks().iter().any(is_compaction))
}

/// The messages before the history start that are not the leading system messages: what
/// the provider does not read, as the range `start..end` of `conversation.messages` (empty
/// when nothing precedes the compaction but system messages).
pub fn superseded(conversation: &Conversation) -> Option<std::ops::Range<usize>> {
    let end = history_start(conversation)?;
    let leading = (conversation.messages.iter())
        .take_while(|m| m.role().is_system())
        .count()
        .min(end);
    Some(leading..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse;

    #[test]
    fn the_newest_compaction_item_of_a_responses_body_starts_the_history() {
        let body = br#"{"model":"gpt-5.1-codex","instructions":"sys","input":[
            {"type":"message","role":"user","content":[{"type":"input_text","text":"task"}]},
            {"type":"compaction","id":"cmp_1","encrypted_content":"old"},
            {"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]},
            {"type":"compaction","id":"cmp_2","encrypted_content":"new"},
            {"type":"message","role":"user","content":[{"type":"input_text","text":"now"}]}]}"#;
        let conversation = parse(body, None).unwrap();
        let start = history_start(&conversation).unwrap();
        let newest = &conversation.messages[start];
        assert!(newest.blocks().iter().any(|b| match b {
            Block::Other(o) => o.raw["id"] == "cmp_2",
            _ => false,
        }));
        let range = superseded(&conversation).unwrap();
        assert_eq!(range.start, 1, "the instructions stay with the history");
        assert_eq!(range.end, start);
    }

    #[test]
    fn a_body_without_compaction_has_no_start() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let conversation = parse(body, None).unwrap();
        assert_eq!(history_start(&conversation), None);
        assert_eq!(superseded(&conversation), None);
    }

    #[test]
    fn compaction_blocks_items_and_unknown_fields_round_trip_unchanged() {
        use crate::format::{WriteOptions, to_vec};
        let bodies: [&[u8]; 2] = [
            br#"{"model":"c","max_tokens":9,"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":50000}}]},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"compaction","content":null,"encrypted_content":"opaque=="},{"type":"text","text":"b","future_field":{"x":1}}]},{"role":"user","content":"c"}]}"#,
            br#"{"model":"m","input":[{"type":"compaction","id":"cmp_1","encrypted_content":"e","created_by":"x"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"r"},{"type":"future_item","payload":[1,2]},{"type":"message","role":"user","content":"go"},{"type":"compaction_trigger"}],"store":false}"#,
        ];
        for body in bodies {
            let conversation = parse(body, None).unwrap();
            let written = to_vec(&conversation, WriteOptions::default()).unwrap();
            let expected: Value = serde_json::from_slice(body).unwrap();
            let got: Value = serde_json::from_slice(&written).unwrap();
            assert_eq!(got, expected);
            assert_eq!(written, body, "written byte for byte");
        }
    }
}
