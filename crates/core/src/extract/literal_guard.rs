//! A literal check before a pattern is compiled.
//!
//! Compiling one of the extractors' case-insensitive patterns costs 0.3–1.3 million
//! instructions (its literal prefilter above all), which a one-shot `cascade compact` pays
//! the first time ① cuts a result, even when the result holds nothing the pattern could
//! match: on the 109 kB Claude Code subagent session, the exit, test-report and error-line
//! patterns were 22% of the whole process's instructions, for a 28 kB file read holding
//! none of their words. A [`LiteralGuard`] lists words every match of a pattern holds
//! (ASCII case ignored, as the patterns ignore it); a text holding none of them cannot
//! match, and the pattern is neither compiled nor run on it.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// Words at least one of which, ASCII case ignored, every match of some pattern holds.
pub(crate) struct LiteralGuard {
    words: &'static [&'static str],
    searcher: OnceLock<Option<AhoCorasick>>,
}

impl LiteralGuard {
    /// A guard over `words`, built on first use as a contiguous NFA: the default
    /// (a DFA for a few words) cost ~0.7 million instructions to build, most of what the
    /// guard saves.
    pub(crate) const fn new(words: &'static [&'static str]) -> Self {
        LiteralGuard {
            words,
            searcher: OnceLock::new(),
        }
    }

    /// Whether `text` holds one of the words: when it does not, the pattern cannot match.
    /// (Were the searcher not to build, every text may match: the pattern decides.)
    pub(crate) fn may_match(&self, text: &str) -> bool {
        let searcher = self.searcher.get_or_init(|| {
            AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(self.words)
                .ok()
        });
        searcher.as_ref().is_none_or(|s| s.is_match(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_found_in_any_ascii_case_and_nothing_else_passes() {
        static GUARD: LiteralGuard = LiteralGuard::new(&["exit", " passed"]);
        assert!(GUARD.may_match("Exit code 2"));
        assert!(GUARD.may_match("[The command completed with EXIT code 0.]"));
        assert!(GUARD.may_match("3 Passed"));
        assert!(!GUARD.may_match("fn main() { println!(\"hello\"); }"));
        assert!(!GUARD.may_match("passed without a space before"));
        assert!(!GUARD.may_match(""));
    }
}
