//! The remember policy's cheap first test: a text holding none of the phrases' needles
//! cannot ask to remember anything, so the full test (which normalizes the whole text)
//! runs only on the few that might.
//!
//! A needle is a phrase's longest run of ASCII letters, or the whole phrase when it has
//! none (CJK). They are searched in one Aho-Corasick pass, ASCII letters in either case
//! (a case-insensitive regex of the needles compiled slower still).
//!
//! Building the automaton of the 51 default needles costs ~0.1 ms warm and ~0.3 ms cold (a
//! fresh process), what the full test costs on about 10 KiB of text (~28 ns a byte, against
//! ~4 ns through the prefilter): a one-shot command whose user messages hold a few hundred
//! bytes would pay more to build it than it saves. So it is built once the texts tested without it add up to [`BUILD_AFTER_BYTES`] (the
//! ski-rental rule: never more than twice the cheaper of the two choices), and from then on
//! serves every text: a proxy builds it within its first requests and keeps it.
//!
//! It must never rule out a text the full test accepts. That test lowercases the text
//! first, so what it matches is what matches once lowercased: ASCII letters in either case
//! (searched so); the Kelvin sign and the dotted capital I, which lowercase to `k` and to
//! `i` with a combining dot (a text holding either skips the prefilter); and other letters
//! past ASCII, which the needles of phrases written in cased scripts would hold (a policy
//! with such a phrase keeps a Unicode case-insensitive regex instead).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// Bytes of text tested without the prefilter before it is built (see the module doc).
pub(super) const BUILD_AFTER_BYTES: usize = 8 * 1024;

/// The prefilter, built when it starts to pay ([`BUILD_AFTER_BYTES`]); shared by the
/// clones of a policy.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// Bytes tested before it was built.
    tested: AtomicUsize,
    pub(super) built: OnceLock<Option<Prefilter>>,
}

impl Deferred {
    /// The prefilter to test a text of `len` bytes with: none while the texts tested so far
    /// add up to less than [`BUILD_AFTER_BYTES`], then the one of `phrases`.
    pub(super) fn for_text(&self, phrases: &[String], len: usize) -> Option<&Prefilter> {
        if let Some(built) = self.built.get() {
            return built.as_ref();
        }
        let tested = self
            .tested
            .fetch_add(len, Ordering::Relaxed)
            .saturating_add(len);
        if tested < BUILD_AFTER_BYTES {
            return None;
        }
        self.built(phrases)
    }

    /// The prefilter of `phrases`, built now if it was not yet.
    pub(super) fn built(&self, phrases: &[String]) -> Option<&Prefilter> {
        self.built.get_or_init(|| Prefilter::of(phrases)).as_ref()
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
            // A DFA searches a little faster but takes ~0.2 ms to build, as long as a
            // one-shot command spends searching.
            .kind(Some(AhoCorasickKind::ContiguousNFA))
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
