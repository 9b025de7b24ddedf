//! Why a request cannot fit: what the part no strategy may remove takes, against the
//! budget (a report says so when the cascade leaves a request over E).

use super::split::{exchange_starts, irreducible};
use crate::conversation::{Block, Conversation};
use crate::estimate::ClassCounts;
use crate::step::StepContext;

/// Explains a result over budget: how much the irreducible part takes.
pub(crate) fn why_it_cannot_fit(conversation: &Conversation, cx: &StepContext<'_>) -> String {
    let starts = exchange_starts(conversation);
    let protected = irreducible(conversation, &starts);
    let mut counts = conversation
        .tools()
        .map(ClassCounts::of_json)
        .unwrap_or_default();
    for (message, _) in conversation
        .messages
        .iter()
        .zip(&protected)
        .filter(|(_, keep)| **keep)
    {
        counts += message.counts();
    }
    let pinned_results = conversation
        .messages
        .iter()
        .filter(|m| m.is_pinned())
        .flat_map(|m| m.blocks())
        .filter(|b| matches!(b, Block::ToolResult(_)))
        .count();
    format!(
        "the part no strategy may remove (system, first user message, pinned and current messages{}, tool definitions) takes ~{} tokens, the budget is {} (window {} − reserve {})",
        if pinned_results > 0 {
            ", pinned tool results"
        } else {
            ""
        },
        cx.estimator.tokens_of(&counts),
        cx.budget.effective(),
        cx.budget.window,
        cx.budget.reserve,
    )
}
