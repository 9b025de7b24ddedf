//! The `offline` summarizer: a deterministic, extractive nine-section summary, with no
//! network and no model.
//!
//! It carries forward what an agent needs to go on after its history is replaced: every
//! user request and constraint (quoted, shortened only when long), the files it read,
//! edited or created, the errors it met and what it did next, its last plan, its open
//! tasks. It reads each message once, keeps bounded excerpts (tool outputs of hundreds of
//! kilobytes cost a few hundred characters), and, when the result is over the token limit,
//! renders again with shorter quotes and fewer bullets until it fits. Same input, same bytes
//! out: no clock, no hashing order.
//!
//! ```
//! use context_cascade::OfflineSummarizer;
//! use context_cascade::summarizer::{Summarizer, SummaryRequest};
//! use context_cascade::{Message, Role};
//!
//! let messages = vec![Message::text(Role::User, "Fix the failing test in src/lib.rs")];
//! let request = SummaryRequest::summarize(messages, 2_000);
//! let summary = OfflineSummarizer::default().summarize_now(&request).unwrap();
//! assert!(summary.starts_with("## 1. User intent and goals"));
//! assert!(summary.contains("src/lib.rs"));
//! ```

mod excerpt;
pub(crate) mod facts;
mod merge;
mod render;
pub(crate) mod scan;
mod tools;

use crate::BoxFuture;
use crate::estimate::Estimator;
use crate::summarizer::{
    Summarizer, SummaryError, SummaryRequest, section_heading, split_sections,
};
use facts::Gatherer;
use merge::SectionMerge;
use render::Level;

/// Limits of the first (largest) rendering; smaller ones are derived from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfflineConfig {
    /// Characters of a quoted user message before it is shortened (head … tail).
    pub quote_chars: usize,
    /// Characters of an error line, a plan sentence or a task.
    pub snippet_chars: usize,
    /// Bullets of the sections an agent cannot go on without (intent, files, user
    /// messages, pending tasks).
    pub key_items: usize,
    /// Bullets of each other section.
    pub other_items: usize,
    /// Identifiers listed under key concepts.
    pub identifiers: usize,
}

impl Default for OfflineConfig {
    fn default() -> Self {
        OfflineConfig {
            quote_chars: 300,
            snippet_chars: 200,
            key_items: 400,
            other_items: 30,
            identifiers: 40,
        }
    }
}

/// The default summarizer: extractive, deterministic, instant. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct OfflineSummarizer {
    config: OfflineConfig,
}

/// Token estimates of a summary get this safety margin on top of the prior.
const SAFETY: f64 = 1.1;
/// How many times the summary is rendered smaller before only headings are left.
const MAX_SHRINK_STEPS: usize = 32;

impl OfflineSummarizer {
    /// A summarizer with its own limits.
    pub fn new(config: OfflineConfig) -> Self {
        OfflineSummarizer { config }
    }

    /// The summary, computed synchronously (what the trait's ready future holds).
    pub fn summarize_now(&self, request: &SummaryRequest) -> Result<String, SummaryError> {
        let c = self.config;
        // Excerpts keep as much as the largest rendering quotes; smaller ones cut them down.
        let mut gatherer = Gatherer::new(c.quote_chars, c.snippet_chars);
        request.messages().iter().for_each(|m| gatherer.message(m));
        let facts = gatherer.finish();

        let mut earlier: Vec<[Vec<String>; 9]> = Vec::new();
        earlier.extend(request.previous_summary().map(split_sections));
        earlier.extend(request.partials().iter().map(|p| split_sections(p)));
        earlier.extend(facts.embedded_summaries.iter().map(|s| split_sections(s)));

        let mut level = Level {
            quote: c.quote_chars,
            snippet: c.snippet_chars,
            key_items: c.key_items,
            other_items: c.other_items,
            identifiers: c.identifiers,
        };
        let estimator = Estimator::default();
        for _ in 0..MAX_SHRINK_STEPS {
            let fresh = render::sections(&facts, level);
            let text = assemble(&earlier, fresh, level);
            if tokens(&estimator, &text) <= request.max_tokens() {
                return Ok(text);
            }
            let smaller = level.smaller();
            if smaller == level {
                break;
            }
            level = smaller;
        }
        let bare = assemble(&[], Default::default(), level);
        let bare_tokens = tokens(&estimator, &bare);
        if bare_tokens <= request.max_tokens() {
            return Ok(bare);
        }
        Err(SummaryError::TooLarge {
            summary: bare_tokens,
            replaced: request.max_tokens(),
        })
    }
}

impl Summarizer for OfflineSummarizer {
    /// `offline/v1`; other limits give other summaries, so they are part of the identity.
    fn id(&self) -> String {
        let c = self.config;
        if c == OfflineConfig::default() {
            return "offline/v1".to_owned();
        }
        format!(
            "offline/v1?quote={}&snippet={}&key={}&other={}&identifiers={}",
            c.quote_chars, c.snippet_chars, c.key_items, c.other_items, c.identifiers
        )
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(std::future::ready(self.summarize_now(request)))
    }
}

/// The estimated tokens of a summary, with the safety margin.
fn tokens(estimator: &Estimator, text: &str) -> u64 {
    (estimator.text_tokens(text) as f64 * SAFETY).ceil() as u64
}

/// Merges earlier summaries' sections and the fresh ones, caps each section, and writes
/// the nine headings with their bullets.
fn assemble(earlier: &[[Vec<String>; 9]], fresh: [Vec<String>; 9], level: Level) -> String {
    // A task list is a full state: only the newest source that has one keeps its items.
    let has_list =
        |s: &[Vec<String>; 9]| (6..=8).any(|i| s[i].iter().any(|l| merge::is_task_list_line(i, l)));
    let newest_list = if has_list(&fresh) {
        earlier.len()
    } else {
        earlier.iter().rposition(has_list).unwrap_or(0)
    };
    // Lines of earlier summaries are shortened only when the summary must shrink.
    let earlier_limit = level.quote + level.snippet + 60;
    let mut out = String::new();
    for (index, fresh_lines) in fresh.into_iter().enumerate() {
        let mut merged = SectionMerge::default();
        for (source, sections) in earlier.iter().enumerate() {
            for line in &sections[index] {
                if source < newest_list && merge::is_task_list_line(index, line) {
                    continue;
                }
                merged.add(index, line, Some(earlier_limit));
            }
        }
        for line in &fresh_lines {
            merged.add(index, line, None);
        }
        let max = level.items(index);
        // Section 2 is ranked (most frequent first); the first request matters as much as
        // the latest state in the key sections; elsewhere the latest lines matter most.
        // Section 3 is cut by what was done with each path.
        let head = match index {
            1 => max,
            0 | 5 | 6 => max - max / 2,
            _ => max / 2,
        };
        let lines = if index == 2 {
            merged.finish_paths(max)
        } else {
            merged.finish(max, head)
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&section_heading(index));
        out.push('\n');
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
