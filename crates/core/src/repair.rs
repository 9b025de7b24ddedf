//! Tool-pair repair, after messages were removed.
//!
//! Every tool call must have exactly one result after it, and every result its call before
//! it, by the format's rules: OpenAI wants the `tool` messages right after the assistant
//! message that made the calls; Anthropic wants the `tool_result` blocks at the start of the
//! next user message. Results whose call is gone and duplicates are dropped; a call left
//! without a result gets [`RESULT_REMOVED`]. Calls in the last message are the agent's
//! pending action and are left as they are.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::conversation::{Block, Conversation, Message, Role, Shape, ToolCall, ToolResult};
use crate::markers::RESULT_REMOVED;

/// What a repair changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RepairStats {
    pub results_dropped: usize,
    pub results_added: usize,
    pub messages_removed: usize,
    pub messages_added: usize,
    pub chars_added: u64,
}

/// Repairs tool pairs in place.
pub(crate) fn repair_tool_pairs(conversation: &mut Conversation) -> RepairStats {
    let messages = std::mem::take(&mut conversation.messages);
    let (messages, stats) = if conversation.format.is_openai_like() {
        repair_openai(messages)
    } else {
        repair_anthropic(messages)
    };
    conversation.messages = messages;
    stats
}

fn synthetic(call: &ToolCall) -> ToolResult {
    ToolResult::text(
        call.id.clone(),
        Some(call.name.clone()),
        RESULT_REMOVED.to_owned(),
    )
}

fn repair_openai(messages: Vec<Message>) -> (Vec<Message>, RepairStats) {
    let mut stats = RepairStats::default();
    let last = messages.len().saturating_sub(1);
    let mut out = Vec::with_capacity(messages.len());
    let mut iter = messages.into_iter().enumerate().peekable();
    while let Some((index, message)) = iter.next() {
        if message.role().is_tool_result() {
            // Not right after its assistant message: an orphan.
            stats.results_dropped += 1;
            stats.messages_removed += 1;
            continue;
        }
        let calls: Vec<ToolCall> = if message.role() == Role::Assistant {
            message.tool_calls().cloned().collect()
        } else {
            Vec::new()
        };
        out.push(message);
        if calls.is_empty() {
            continue;
        }
        let expected: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        let mut seen: HashSet<String> = HashSet::new();
        while let Some((_, next)) = iter.next_if(|(_, m)| m.role().is_tool_result()) {
            let id = next
                .tool_results()
                .next()
                .map(|r| r.call_id.clone())
                .unwrap_or_default();
            if expected.contains(id.as_str()) && seen.insert(id) {
                out.push(next);
            } else {
                stats.results_dropped += 1;
                stats.messages_removed += 1;
            }
        }
        if index == last {
            continue;
        }
        for call in calls.iter().filter(|c| !seen.contains(&c.id)) {
            let mut fields = Map::new();
            let role = if call.legacy {
                fields.insert("role".into(), Value::Null);
                fields.insert("name".into(), Value::from(call.name.clone()));
                Role::Function
            } else {
                Role::Tool
            };
            out.push(Message::new(
                role,
                vec![Block::ToolResult(synthetic(call))],
                Shape::String,
                fields,
            ));
            stats.results_added += 1;
            stats.messages_added += 1;
            stats.chars_added += RESULT_REMOVED.len() as u64;
        }
    }
    (out, stats)
}

fn repair_anthropic(messages: Vec<Message>) -> (Vec<Message>, RepairStats) {
    let mut stats = RepairStats::default();
    let last = messages.len().saturating_sub(1);
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // The calls of the previous message, when it was an assistant message.
    let mut pending: Option<(Vec<ToolCall>, bool)> = None;
    for (index, mut message) in messages.into_iter().enumerate() {
        let expected = pending.take();
        if message.role() == Role::Assistant || message.role().is_system() {
            if let Some((calls, _)) = expected {
                // The assistant's calls got no user message at all: add one.
                add_results_message(&mut out, &calls, &mut stats);
            }
            if message.role() == Role::Assistant {
                let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
                if !calls.is_empty() {
                    pending = Some((calls, index == last));
                }
            }
            out.push(message);
            continue;
        }
        // A user message: keep the results of the previous assistant's calls, once each.
        let (calls, _) = expected.unwrap_or_default();
        let ids: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        let mut seen: HashSet<String> = HashSet::new();
        let has_results = message.tool_results().next().is_some();
        if has_results {
            let before = message.blocks().len();
            message.blocks_mut().retain(|b| match b {
                Block::ToolResult(r) => {
                    ids.contains(r.call_id.as_str()) && seen.insert(r.call_id.clone())
                }
                _ => true,
            });
            stats.results_dropped += before - message.blocks().len();
        }
        let missing: Vec<&ToolCall> = calls.iter().filter(|c| !seen.contains(&c.id)).collect();
        if !missing.is_empty() {
            let at = message
                .blocks()
                .iter()
                .take_while(|b| matches!(b, Block::ToolResult(_)))
                .count();
            let blocks = message.blocks_mut();
            for (k, call) in missing.iter().enumerate() {
                blocks.insert(at + k, Block::ToolResult(synthetic(call)));
            }
            if message.shape() != Shape::Parts {
                message.set_shape(Shape::Parts);
            }
            stats.results_added += missing.len();
            stats.chars_added += (RESULT_REMOVED.len() * missing.len()) as u64;
        }
        if message.blocks().is_empty() {
            stats.messages_removed += 1;
            continue;
        }
        out.push(message);
    }
    if let Some((calls, is_last)) = pending
        && !is_last
    {
        add_results_message(&mut out, &calls, &mut stats);
    }
    (out, stats)
}

fn add_results_message(out: &mut Vec<Message>, calls: &[ToolCall], stats: &mut RepairStats) {
    let blocks = calls
        .iter()
        .map(|c| Block::ToolResult(synthetic(c)))
        .collect();
    out.push(Message::new(Role::User, blocks, Shape::Parts, Map::new()));
    stats.results_added += calls.len();
    stats.messages_added += 1;
    stats.chars_added += (RESULT_REMOVED.len() * calls.len()) as u64;
}
