//! The `Summarizer` trait strategy ④ calls, and what a usable summary is.
//!
//! Summarizers are injected by the caller: the offline one ships in
//! [`crate::OfflineSummarizer`]; an LLM-backed one lives outside the core (it needs HTTP).
//! The trait returns boxed futures ([`crate::BoxFuture`]) so that it stays object-safe
//! (`Arc<dyn Summarizer>`) without tying the core to an async runtime.

use crate::BoxFuture;
use crate::conversation::Message;
use crate::estimate::Estimator;
use crate::markers::SUMMARY_SECTIONS;

/// What to summarize: history to put in nine sections, or chunk summaries to merge.
///
/// Either way the result must not exceed [`SummaryRequest::max_tokens`] tokens, as the
/// uncalibrated prior (`Estimator::default()`) counts them. The cascade converts the room
/// it has into these units, so an offline summarizer can size its text exactly; for an LLM
/// (whose tokenizer counts at least about as many tokens as the prior) it is a safe
/// `max_tokens`.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryRequest {
    /// Summarize the messages being replaced (one chunk of them when the input is large).
    Summarize {
        /// The messages being replaced, in order (an earlier summary is not among them).
        messages: Vec<Message>,
        /// The body of an earlier `[context summary]` in the replaced range: update it, do
        /// not summarize it as ordinary text. Only the first chunk carries it.
        previous_summary: Option<String>,
        /// The token limit of the summary (see the type's documentation).
        max_tokens: u64,
    },
    /// Merge chunk summaries, in order, into one nine-section summary.
    Merge {
        /// The chunk summaries (nine-section bodies).
        partials: Vec<String>,
        /// The token limit of the summary (see the type's documentation).
        max_tokens: u64,
    },
}

impl SummaryRequest {
    /// A request to summarize `messages` within `max_tokens`, with no previous summary.
    pub fn summarize(messages: Vec<Message>, max_tokens: u64) -> Self {
        SummaryRequest::Summarize {
            messages,
            previous_summary: None,
            max_tokens,
        }
    }

    /// The token limit of the summary.
    pub fn max_tokens(&self) -> u64 {
        match self {
            SummaryRequest::Summarize { max_tokens, .. }
            | SummaryRequest::Merge { max_tokens, .. } => *max_tokens,
        }
    }

    /// The messages to summarize (none for a merge).
    pub fn messages(&self) -> &[Message] {
        match self {
            SummaryRequest::Summarize { messages, .. } => messages,
            SummaryRequest::Merge { .. } => &[],
        }
    }

    /// The earlier summary to update, if any (never for a merge).
    pub fn previous_summary(&self) -> Option<&str> {
        match self {
            SummaryRequest::Summarize {
                previous_summary, ..
            } => previous_summary.as_deref(),
            SummaryRequest::Merge { .. } => None,
        }
    }

    /// The chunk summaries to merge (none unless this is a merge).
    pub fn partials(&self) -> &[String] {
        match self {
            SummaryRequest::Merge { partials, .. } => partials,
            SummaryRequest::Summarize { .. } => &[],
        }
    }

    /// Whether this request merges chunk summaries.
    pub fn is_merge(&self) -> bool {
        matches!(self, SummaryRequest::Merge { .. })
    }

    /// Whether a `summary` made under the limit `made_for` fits this request: made under
    /// its limit or a stricter one (what the summarizer would write for it), or, with
    /// `or_by_length`, no longer than its limit anyway (as the prior counts). Summary caches
    /// and prepared summaries apply it; ④ checks the summary it gets like any other.
    pub fn fits(&self, summary: &str, made_for: u64, or_by_length: bool) -> bool {
        made_for <= self.max_tokens()
            || (or_by_length && Estimator::default().text_tokens(summary) <= self.max_tokens())
    }

    /// How many of this request's first messages a summary made for them alone may stand
    /// for the whole request, longest first: every length whose messages left out are at
    /// most `gap_share` of the request's tokens (as the prior counts them). Such a summary
    /// says nothing of the messages past it; the compaction's trail still names their
    /// files, commands, errors and requests, as it does for what ③ prunes. None for a
    /// merge, or when `gap_share` is 0 (`ExperimentalConfig::prepared_summary_gap`).
    pub fn stand_in_lengths(&self, gap_share: f64) -> Vec<usize> {
        let messages = self.messages();
        if gap_share <= 0.0 || messages.len() < 2 {
            return Vec::new();
        }
        let estimator = Estimator::default();
        let tokens: Vec<u64> = messages
            .iter()
            .map(|m| estimator.message_tokens(m))
            .collect();
        let allowed = (tokens.iter().sum::<u64>() as f64 * gap_share) as u64;
        let mut left_out = 0;
        let mut lengths = Vec::new();
        for length in (1..messages.len()).rev() {
            left_out += tokens[length];
            if left_out > allowed {
                break;
            }
            lengths.push(length);
        }
        lengths
    }
}

/// Why a summary could not be had. Every variant means the same to the cascade: ④ failed,
/// nothing was written, and ⑤ takes over (a partial summary, a summary of the small
/// messages, or the bare notice); the variant is logged and never retried as such.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// The summarizer itself failed (an HTTP error, a refused request, a bad answer).
    #[error("summarizer failed: {0}")]
    Failed(String),
    /// The summarizer gave no answer in time.
    #[error("summarizer timed out")]
    Timeout,
    /// The summary was empty or blank (also returned by [`validate`]).
    #[error("summarizer returned an empty summary")]
    Empty,
    /// The summarizer's own length limit cut the summary off: a cut summary loses its last
    /// sections, so it is not used.
    #[error("summary was cut off by the summarizer's length limit")]
    Truncated,
    /// The summary is not smaller than what it replaces, or over the room the cascade has
    /// for it (also returned by [`validate`] and by the offline summarizer when even its
    /// barest rendering is over `max_tokens`).
    #[error("summary (~{summary} tokens) is larger than what it replaces (~{replaced} tokens)")]
    TooLarge {
        /// Tokens of the summary.
        summary: u64,
        /// Tokens it would replace (or the room left for it).
        replaced: u64,
    },
    /// The summarizer was not asked, or declined before trying (no room is left for a
    /// summary, a circuit breaker is open, ...).
    #[error("summarizer skipped: {0}")]
    Unavailable(String),
}

/// Summarizes conversation history into the nine sections of SPEC.md.
///
/// Implementations must respect this contract (the cascade relies on it):
///
/// * **Concurrency.** When the history is large, ④ splits it into chunks and calls
///   [`Summarizer::summarize`] for every chunk at once, polling the futures together on the
///   caller's task (no runtime is spawned), then once more with a
///   [`SummaryRequest::Merge`]. An implementation must therefore accept overlapping calls
///   through `&self` (hence `Send + Sync`), and its futures must make progress when polled
///   side by side: a future that waits for another call to finish first would deadlock.
/// * **Budget.** The summary must not exceed [`SummaryRequest::max_tokens`] as the prior
///   counts them. A longer one is not cut down by the cascade: it fails as
///   [`SummaryError::TooLarge`] and ⑤ takes over.
/// * **Determinism.** [`Summarizer::id`] names everything that shapes the output (kind,
///   endpoint, model, prompt version): caches key summaries on it together with the
///   request, so two summarizers with one `id` must give interchangeable summaries for the
///   same request. A summarizer whose output depends on anything else must put it in the
///   `id` or not be cached.
/// * **Failure.** Errors are values, never panics: every [`SummaryError`] sends the
///   cascade to ⑤ (see that type for what each variant means).
pub trait Summarizer: Send + Sync {
    /// A stable identity (kind, endpoint, model), part of summary cache keys.
    fn id(&self) -> String;

    /// Summarizes, or merges, into the nine sections. Returns the summary body, without
    /// the `[context summary]` first line.
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

pub(crate) fn heading_index(line: &str) -> Option<usize> {
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
