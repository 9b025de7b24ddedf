//! The `prepare` target's property, shared with `crates/core/tests/fuzz_regressions.rs`:
//! bytes → a conversation in any format (Chat, Messages, Responses, a bare array; detected
//! from the body) → the whole cascade at a window taken from the input, with the offline
//! summarizer → bytes.
//!
//! An input is `[window low, window high, body...]`: the window is 256 to 33,023 tokens
//! (small windows exercise every strategy). Beyond "no panic":
//! - the budget is respected, or the report says it does not fit and why;
//! - the output is valid JSON in the input's format, and reading and writing it again gives
//!   the same bytes;
//! - tool calls stay paired when the input's were;
//! - the system messages and the first user message survive;
//! - compacting the output again changes nothing (the result is a fixed point).

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation, Role};

#[path = "tool_pairs.rs"]
mod tool_pairs;

/// Runs one input and checks the property (panics on a violation).
pub fn check(data: &[u8]) {
    let [a, b, body @ ..] = data else { return };
    let window = 256 + u64::from(u16::from_le_bytes([*a, *b]) & 0x7fff);
    let Ok(mut conversation) = format::parse(body, None) else {
        return;
    };
    let reserve = conversation.output_reserve().min(window / 2);
    let budget = Budget::new(window, reserve);
    let manager = ContextManager::new(CascadeConfig::default());
    let original = conversation.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut conversation, budget));

    if report.fits {
        assert!(
            manager.estimate(&conversation) <= budget.effective(),
            "the report says it fits but the estimate is over the budget"
        );
    } else {
        assert!(
            report.reason.is_some(),
            "over the budget without saying why"
        );
    }
    let written = format::to_vec(&conversation, WriteOptions::default()).expect("writes");
    let _: serde_json::Value = serde_json::from_slice(&written).expect("the output is JSON");
    let mut again = format::parse(&written, Some(conversation.format)).expect("reads back");
    let reread = format::to_vec(&again, WriteOptions::default()).expect("writes");
    assert!(written == reread, "reading the output back changed it");
    if tool_pairs::hold(&original) {
        assert!(
            tool_pairs::hold(&conversation),
            "the input's tool calls were paired, the output's are not"
        );
    }
    assert_eq!(
        systems(&original),
        systems(&conversation),
        "a system message was removed"
    );
    if let Some(first) = original.first_user_index() {
        let wanted = original.messages[first].text_content();
        assert!(
            (conversation.messages.iter())
                .any(|m| m.role() == Role::User && m.text_content().contains(wanted.as_str())),
            "the first user message is gone"
        );
    }
    let second = pollster::block_on(manager.compact_with_summary(&mut again, budget));
    let rewritten = format::to_vec(&again, WriteOptions::default()).expect("writes");
    assert!(
        written == rewritten,
        "compacting the output again changed it: {}",
        second.summary_line()
    );
}

fn systems(conversation: &Conversation) -> usize {
    (conversation.messages.iter())
        .filter(|m| m.role() == Role::System)
        .count()
}
