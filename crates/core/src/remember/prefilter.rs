//! The remember policy's cheap first test: a text holding none of the phrases' needles
//! cannot ask to remember anything, so the full test (which normalizes the whole text)
//! runs only on the few that might.
//!
//! A needle is a phrase's longest run of ASCII letters, or the whole phrase when it has
//! none (CJK). They are searched in one Aho-Corasick pass, ASCII letters in either case
//! (a case-insensitive regex of the needles compiled slower still). The full test then
//! finds every phrase in the normalized text in one pass of a second automaton, where it
//! searched once per phrase (51 passes for the default phrases). Both are built together
//! ([`Searchers`]).
//!
//! On the 108 KB of user text of a ~1M-token request (`scaled-1m`, where "take" and
//! "make" let 45% of the bytes through), a pass of the policy takes ~0.7 ms with them,
//! against ~2.5 ms with the prefilter alone (a contiguous NFA) and the search per phrase,
//! and ~8.4 ms with neither (~78 ns a byte). Building them costs ~0.7 ms in a fresh process
//! (the prefilter is a DFA: twice as fast to search as an NFA on these texts, slower to
//! build), what testing ~9 KB without them costs: a one-shot command whose user messages
//! hold a few hundred bytes would pay more to build them than it saves. So they are built
//! once the texts tested without them add up to [`BUILD_AFTER_BYTES`] (the ski-rental
//! rule: never more than twice the cheaper of the two choices), and from then on serve
//! every text: a proxy builds them within its first requests and keeps them.
//!
//! The prefilter must never rule out a text the full test accepts. That test lowercases
//! the text first, so what it matches is what matches once lowercased: ASCII letters in
//! either case (searched so); the Kelvin sign and the dotted capital I, which lowercase to
//! `k` and to `i` with a combining dot (a text holding either skips the prefilter); and
//! other letters past ASCII, which the needles of phrases written in cased scripts would
//! hold (a policy with such a phrase keeps a Unicode case-insensitive regex instead).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// Bytes of text tested without the searchers before they are built (see the module doc).
pub(super) const BUILD_AFTER_BYTES: usize = 8 * 1024;

/// What a policy builds once it pays ([`BUILD_AFTER_BYTES`]): the prefilter, and the
/// phrases' finder of the full test.
#[derive(Debug)]
pub(super) struct Searchers {
    /// Rules out the texts that hold no needle; `None` when it cannot be built.
    pub(super) prefilter: Option<Prefilter>,
    /// Every normalized phrase in one automaton (a contiguous NFA: as fast as a DFA on
    /// the few texts the prefilter lets through, quicker to build): one pass over a
    /// normalized text finds what a search per phrase finds; `None` when it cannot be
    /// built (the search per phrase serves).
    pub(super) phrases: Option<AhoCorasick>,
}

impl Searchers {
    /// The searchers of `phrases` (as configured) and of their normalized texts.
    pub(super) fn of<'a>(
        phrases: &[String],
        normalized: impl IntoIterator<Item = &'a str>,
    ) -> Searchers {
        Searchers {
            prefilter: Prefilter::of(phrases),
            phrases: AhoCorasick::builder()
                .kind(Some(AhoCorasickKind::NoncontiguousNFA))
                .build(normalized)
                .ok(),
        }
    }
}

/// The searchers, built when they start to pay ([`BUILD_AFTER_BYTES`]); shared by the
/// clones of a policy.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// Bytes tested before they were built.
    tested: AtomicUsize,
    pub(super) built: OnceLock<Searchers>,
}

impl Deferred {
    /// The searchers to test a text of `len` bytes with: none while the texts tested so far
    /// add up to less than [`BUILD_AFTER_BYTES`], then the ones `build` makes (once).
    pub(super) fn for_text(
        &self,
        len: usize,
        build: impl FnOnce() -> Searchers,
    ) -> Option<&Searchers> {
        if let Some(built) = self.built.get() {
            return Some(built);
        }
        let tested = self
            .tested
            .fetch_add(len, Ordering::Relaxed)
            .saturating_add(len);
        if tested < BUILD_AFTER_BYTES {
            return None;
        }
        Some(self.built.get_or_init(build))
    }
}

/// How [`super::RememberPolicy`] rules texts out.
#[derive(Debug, Clone)]
pub(super) enum Prefilter {
    /// The needles, ASCII letters in either case.
    Ascii(AhoCorasick),
    /// A needle has cased letters past ASCII: Unicode case-insensitive.
    Unicode(regex::Regex),
}

impl Prefilter {
    /// The prefilter of `phrases` (as configured); `None` when there is nothing to search
    /// for or it cannot be built (every text then gets the full test).
    pub(super) fn of(phrases: &[String]) -> Option<Prefilter> {
        let needles: Vec<&str> = phrases
            .iter()
            .map(|phrase| {
                let longest = (phrase.split(|c: char| !c.is_ascii_alphabetic()))
                    .max_by_key(|run| run.len())
                    .unwrap_or("");
                if longest.is_empty() { phrase } else { longest }
            })
            .filter(|needle| !needle.is_empty())
            .collect();
        if needles.is_empty() {
            return None;
        }
        let cased = |c: char| !c.is_ascii() && (c.is_lowercase() || c.is_uppercase());
        if needles.iter().any(|n| n.chars().any(cased)) {
            let escaped: Vec<String> = needles.iter().map(|n| regex::escape(n)).collect();
            return (regex::RegexBuilder::new(&escaped.join("|")).case_insensitive(true))
                .build()
                .ok()
                .map(Prefilter::Unicode);
        }
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            // Twice as fast as a contiguous NFA on real user text (see the module doc).
            .kind(Some(AhoCorasickKind::DFA))
            .build(&needles)
            .ok()
            .map(Prefilter::Ascii)
    }

    /// Whether `text` may ask to remember something (false: it certainly does not).
    pub(super) fn may_match(&self, text: &str) -> bool {
        match self {
            Prefilter::Ascii(needles) => {
                needles.is_match(text) || text.contains('\u{212A}') || text.contains('\u{130}')
            }
            Prefilter::Unicode(regex) => regex.is_match(text),
        }
    }
}
