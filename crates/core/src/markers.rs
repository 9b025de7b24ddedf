//! Every marker the cascade writes, exactly as SPEC.md gives them.

/// ① appended to a cut tool result.
pub const TRUNCATED: &str = "\n[truncated: output exceeded context limit]";
/// ② the placeholder of a compacted tool result.
pub const COMPACTED: &str = "[compacted: tool output removed to free context]";
/// ③ the synthetic result of a call whose result was removed.
pub const RESULT_REMOVED: &str = "[tool result removed during context compaction]";
/// ④ the first line of a summary message.
pub const SUMMARY_PREFIX: &str = "[context summary]";

/// ③ the notice put where messages were removed.
pub(crate) fn pruned_notice(removed: usize) -> String {
    format!("[context compacted: {removed} earlier messages removed]")
}

/// ⑤ level 3: the bare notice.
pub(crate) fn bare_notice(removed: usize) -> String {
    format!("[context compacted: {removed} earlier messages removed; summary unavailable]")
}

/// ⑤ level 1: appended to the chunk summaries that succeeded.
pub(crate) fn partial_notice(succeeded: usize, total: usize) -> String {
    format!(
        "[partial summary: chunks 1-{succeeded} of {total} summarized; the rest could not be processed]"
    )
}

/// ⑤ level 2: stands for a large message left out of the summary.
pub(crate) fn omitted_notice(role: &str, tokens: u64) -> String {
    format!("[large {role} message (~{tokens} tokens) omitted from summary]")
}

/// The nine sections of a summary, in order.
pub const SUMMARY_SECTIONS: [&str; 9] = [
    "User intent and goals",
    "Key concepts and terminology",
    "Files and paths",
    "Errors encountered and fixes",
    "Problem-solving approach",
    "Key user messages",
    "Pending tasks",
    "Current progress",
    "Next steps",
];

/// Whether a text is one of the cascade's own notices (so it is not summarized as content).
pub fn is_cascade_notice(text: &str) -> bool {
    text.starts_with("[context compacted: ") || text.starts_with(SUMMARY_PREFIX)
}
