//! Bytes → conversation → the whole cascade at a window taken from the input, with the
//! offline summarizer: never a panic; the output is a request we can read back; when the
//! report says it fits, the estimate is within the budget; the system messages and the
//! first user message survive; and compacting the output again changes nothing.
#![no_main]

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Role};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [a, b, body @ ..] = data else { return };
    // 256 .. 33,023 tokens: small windows exercise every strategy.
    let window = 256 + u64::from(u16::from_le_bytes([*a, *b]) & 0x7fff);
    let Ok(mut conversation) = format::parse(body, None) else {
        return;
    };
    let reserve = conversation.output_reserve().min(window / 2);
    let budget = Budget::new(window, reserve);
    let manager = ContextManager::new(CascadeConfig::default());
    let original = conversation.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut conversation, budget));

    let written = format::to_vec(&conversation, WriteOptions::default()).expect("writes");
    let mut again = format::parse(&written, Some(conversation.format)).expect("reads back");
    if report.fits {
        assert!(
            manager.estimate(&conversation) <= budget.effective(),
            "report says it fits but the estimate is over the budget"
        );
    }
    let kept = |c: &context_cascade::Conversation| {
        c.messages
            .iter()
            .filter(|m| m.role() == Role::System)
            .count()
    };
    assert_eq!(
        kept(&original),
        kept(&conversation),
        "a system message was removed"
    );
    if let Some(first) = original.first_user_index() {
        let wanted = original.messages[first].text_content();
        assert!(
            conversation
                .messages
                .iter()
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
});
