//! The tool-pair invariant the fuzz properties check on what the cascade (or the proxy)
//! sends: shared by the `prepare` and `admission` targets and their regression tests.

use std::collections::HashSet;

use context_cascade::{Conversation, Role};

/// Every tool call has exactly one result in a later message (but the calls of the last
/// message: the agent's pending action), every result answers a call made before it, no
/// call id is used twice, and only assistant messages make calls (as every format has it:
/// OpenAI `tool_calls` and Anthropic `tool_use` are the assistant's; the cascade's pair
/// repair reads them so). The cascade must keep this when its input had it; an input
/// without it is the client's own business.
pub fn hold(conversation: &Conversation) -> bool {
    let last = conversation.messages.len().saturating_sub(1);
    let mut made: HashSet<&str> = HashSet::new();
    let mut open: HashSet<&str> = HashSet::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        for result in message.tool_results() {
            if !open.remove(result.call_id.as_str()) {
                return false;
            }
        }
        for call in message.tool_calls() {
            if message.role() != Role::Assistant || !made.insert(call.id.as_str()) {
                return false;
            }
            if index != last {
                open.insert(call.id.as_str());
            }
        }
    }
    open.is_empty()
}
