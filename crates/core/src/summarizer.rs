//! The `Summarizer` trait strategy ④ calls, and what a usable summary is.
//!
//! Summarizers are injected by the caller: the offline one ships in
//! [`crate::offline`]; an LLM-backed one lives outside the core (it needs HTTP). The trait
//! returns boxed futures so that it stays object-safe (`Arc<dyn Summarizer>`) without tying
//! the core to an async runtime.

use std::future::Future;
use std::pin::Pin;

use crate::conversation::Message;
use crate::markers::SUMMARY_SECTIONS;

/// A boxed, sendable future (what async trait methods return here).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What to summarize.
#[derive(Debug, Clone, Default)]
pub struct SummaryRequest {
    /// The messages being replaced, in order (an earlier summary is not among them).
    pub messages: Vec<Message>,
    /// The body of an earlier `[context summary]` in the replaced range: update it, do not
    /// summarize it as ordinary text.
    pub previous_summary: Option<String>,
    /// Chunk summaries to merge into one nine-section summary (then `messages` is empty).
    pub partials: Vec<String>,
    /// The summary must not exceed this many tokens, as the uncalibrated prior
    /// (`Estimator::default()`) counts them. The cascade converts the room it has into these
    /// units, so an offline summarizer can size its text exactly; for an LLM (whose
    /// tokenizer counts at least about as many tokens as the prior) it is a safe
    /// `max_tokens`.
    pub max_tokens: u64,
}

/// Why a summary could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    #[error("summarizer failed: {0}")]
    Failed(String),
    #[error("summarizer timed out")]
    Timeout,
    #[error("summarizer returned an empty summary")]
    Empty,
    #[error("summary was cut off by the summarizer's length limit")]
    Truncated,
    #[error("summary (~{summary} tokens) is larger than what it replaces (~{replaced} tokens)")]
    TooLarge { summary: u64, replaced: u64 },
    #[error("summarizer skipped: {0}")]
    Unavailable(String),
}

/// Summarizes conversation history into the nine sections of SPEC.md.
pub trait Summarizer: Send + Sync {
    /// A stable identity (kind, endpoint, model), part of summary cache keys.
    fn id(&self) -> String;

    /// Summarizes (or merges, when `request.partials` is set) into the nine sections. Returns
    /// the summary body, without the `[context summary]` first line.
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>>;
}

/// Checks a summary before it may enter the conversation: not empty, and smaller than what
/// it replaces (SPEC.md: such a summary is a failure, never written into the conversation).
/// Truncation by a length limit is reported by the summarizer itself.
pub fn validate(
    summary: &str,
    summary_tokens: u64,
    replaced_tokens: u64,
) -> Result<(), SummaryError> {
    if summary.trim().is_empty() {
        return Err(SummaryError::Empty);
    }
    if summary_tokens >= replaced_tokens {
        return Err(SummaryError::TooLarge {
            summary: summary_tokens,
            replaced: replaced_tokens,
        });
    }
    Ok(())
}

/// The heading of section `index` (0-based) as summaries write it: `## 1. User intent and goals`.
pub fn section_heading(index: usize) -> String {
    format!(
        "## {}. {}",
        index + 1,
        SUMMARY_SECTIONS.get(index).copied().unwrap_or("")
    )
}

/// Splits a nine-section summary into its sections' bodies (lines under each heading).
/// Headings are recognised by their title, with or without number and `#` marks, so that
/// summaries written by a model parse too. Text before the first heading goes to section 1.
pub fn split_sections(summary: &str) -> [Vec<String>; 9] {
    let mut sections: [Vec<String>; 9] = Default::default();
    let mut current = 0usize;
    for line in summary.lines() {
        if let Some(index) = heading_index(line) {
            current = index;
            continue;
        }
        if !line.trim().is_empty() {
            sections[current].push(line.to_owned());
        }
    }
    sections
}

fn heading_index(line: &str) -> Option<usize> {
    let t = line.trim().trim_start_matches('#').trim();
    let t = t
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches(['.', ')'])
        .trim();
    let t = t.trim_matches('*').trim_end_matches(':').trim();
    SUMMARY_SECTIONS
        .iter()
        .position(|s| s.eq_ignore_ascii_case(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_parse_back_from_headings() {
        let text = format!(
            "{}\n- a\n{}\n- b\n\n**Next steps:**\n- c",
            section_heading(0),
            section_heading(2)
        );
        let s = split_sections(&text);
        assert_eq!(s[0], vec!["- a"]);
        assert_eq!(s[2], vec!["- b"]);
        assert_eq!(s[8], vec!["- c"]);
    }

    #[test]
    fn empty_and_oversized_summaries_fail() {
        assert_eq!(validate("  \n", 0, 10), Err(SummaryError::Empty));
        assert!(matches!(
            validate("x", 10, 10),
            Err(SummaryError::TooLarge { .. })
        ));
        assert!(validate("x", 3, 10).is_ok());
    }
}
