//! Remember requests: user messages that ask the agent to keep something in mind.
//!
//! A user who writes "remember: the staging database is read-only" expects it to hold for
//! the rest of the session, and compaction is exactly what would make the agent forget it.
//! Such messages are pinned automatically (and the proxy keeps them in its memory store).
//! Pinning costs context for the rest of the conversation, so the detector only fires on a
//! *request*: "remember" at the start of a sentence or clause, or after "please", "can
//! you", "you should"... — not the narrative "I remember when we…" or the question "do you
//! remember…?". Latin-script phrases match whole words only ("remembered" and
//! "unforgettable" do not count); Chinese and Japanese phrases match as substrings, with a
//! few built-in exceptions for their narrative forms (`我记住了` "I have memorised it",
//! `覚えています` "I remember").
//!
//! ```
//! use context_cascade::RememberPolicy;
//!
//! let policy = RememberPolicy::default();
//! assert!(policy.is_remember_request("Please remember: staging is read-only."));
//! assert!(policy.is_remember_request("Et n'oublie pas de lancer les tests"));
//! assert!(policy.is_remember_request("记住：端口是 8080"));
//! assert!(!policy.is_remember_request("I remember when we fixed this last week."));
//! assert!(!policy.is_remember_request("Do you remember the port?"));
//! ```

/// The built-in phrases: the SPEC's list first, then variants that are requests in every
/// natural use. Left out on purpose: "note that" (ordinary task prose, pinning it would
/// defeat compaction), "from now on" (an instruction, not a request to remember, and often
/// narrative), "remind me" (mostly asks for information), Chinese `记得` (as often "I
/// recall" as "remember to"; the request forms `请记得`/`要记得` are listed).
#[rustfmt::skip]
const DEFAULT_PHRASES: &[&str] = &[
    // SPEC
    "remember", "please remember", "don't forget", "merci de retenir", "retiens",
    "bitte merken", "merk dir", "记住", "覚えて",
    // English
    "do not forget", "dont forget", "never forget", "keep in mind", "bear in mind",
    "memorize", "memorise", "make a note", "take note",
    // French
    "n'oublie pas", "n'oubliez pas", "retenez", "retenir", "souviens-toi", "souvenez-vous",
    "rappelle-toi", "rappelez-vous", "garde en tête", "gardez en tête", "garde à l'esprit",
    "gardez à l'esprit",
    // German
    "merke dir", "merken sie sich", "merken", "vergiss nicht", "vergesst nicht",
    "vergessen sie nicht", "denk daran", "denke daran", "denk dran", "denken sie daran",
    "behalte im hinterkopf",
    // Chinese
    "帮我记住", "请记得", "要记得", "别忘了", "别忘记", "不要忘记", "不要忘了", "请牢记",
    // Japanese
    "覚えといて", "忘れないで",
];

mod grammar;
mod prefilter;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::conversation::{Conversation, Role};
use grammar::{
    CJK_NARRATIVE, SELF_MARKERS, cjk_is_request, is_cjk, latin_is_request, starts_with_words,
};
use prefilter::{Deferred, Searchers};

/// Detects remember requests; the phrase list is configurable.
#[derive(Debug, Clone)]
pub struct RememberPolicy {
    phrases: Vec<String>,
    compiled: Vec<Phrase>,
    /// A cheap first test ([`prefilter`]), built once it pays: on a long history the full
    /// test would otherwise dominate `prepare`.
    prefilter: Arc<Deferred>,
}

#[derive(Debug, Clone)]
struct Phrase {
    /// Normalized like the text (lowercase, straight apostrophes, single spaces).
    text: String,
    cjk: bool,
    self_marked: bool,
    narrative: Option<(&'static [&'static str], &'static [&'static str])>,
}

impl Default for RememberPolicy {
    fn default() -> Self {
        RememberPolicy::from_phrases(DEFAULT_PHRASES)
    }
}

impl RememberPolicy {
    /// A policy for exactly these phrases (case-insensitive; empty and duplicate phrases
    /// are dropped). Phrases in any script work; the request rules (start of a clause, or
    /// after "please", "can you", ...) apply to Latin-script phrases, CJK phrases match
    /// anywhere.
    pub fn from_phrases(phrases: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut policy = RememberPolicy {
            phrases: Vec::new(),
            compiled: Vec::new(),
            prefilter: Arc::default(),
        };
        for phrase in phrases {
            let original = phrase.as_ref().trim();
            let text = normalize_text(original);
            let text = text.trim();
            if text.is_empty() || policy.compiled.iter().any(|p| p.text == text) {
                continue;
            }
            let cjk = text.chars().any(is_cjk);
            let words: Vec<&str> = text.split(' ').collect();
            let self_marked = !cjk && SELF_MARKERS.iter().any(|m| starts_with_words(&words, m));
            let narrative = CJK_NARRATIVE
                .iter()
                .find(|(p, _, _)| *p == text)
                .map(|&(_, before, after)| (before, after));
            policy.phrases.push(original.to_string());
            policy.compiled.push(Phrase {
                text: text.to_string(),
                cjk,
                self_marked,
                narrative,
            });
        }
        policy
    }

    /// Pins every user message of `conversation` that asks to remember something, so that
    /// no strategy removes it. Returns how many were pinned.
    pub fn pin_requests(&self, conversation: &mut Conversation) -> usize {
        let mut pinned = 0;
        for message in &mut conversation.messages {
            if message.role() == Role::User
                && !message.is_pinned()
                && self.is_remember_request(&message.text_content())
            {
                message.pin();
                pinned += 1;
            }
        }
        pinned
    }

    /// The phrases, as configured.
    pub fn phrases(&self) -> &[String] {
        &self.phrases
    }

    /// Whether `text` (a user message's text) asks to remember something.
    pub fn is_remember_request(&self, text: &str) -> bool {
        if self.compiled.is_empty() {
            return false;
        }
        let searchers = self.searchers(text.len());
        let prefilter = searchers.and_then(|s| s.prefilter.as_ref());
        if prefilter.is_some_and(|p| !p.may_match(text)) {
            return false;
        }
        let text = normalize_text(text);
        if let Some(finder) = searchers.and_then(|s| s.phrases.as_ref())
            && let Ok(mut found) = finder.try_find_overlapping_iter(text.as_str())
        {
            // An occurrence overlapping the previous one of the same phrase is skipped, as
            // `match_indices` (the per-phrase search below) skips it: same verdicts.
            let mut next_start = vec![0; self.compiled.len()];
            return found.any(|m| {
                let index = m.pattern().as_usize();
                let (Some(phrase), Some(next)) =
                    (self.compiled.get(index), next_start.get_mut(index))
                else {
                    return false;
                };
                if m.start() < *next {
                    return false;
                }
                *next = m.end();
                phrase.is_request_at(&text, m.start(), m.end())
            });
        }
        self.compiled.iter().any(|phrase| {
            text.match_indices(phrase.text.as_str())
                .any(|(start, found)| phrase.is_request_at(&text, start, start + found.len()))
        })
    }
}

impl RememberPolicy {
    /// The searchers to test a text of `len` bytes with, once they pay ([`prefilter`]).
    fn searchers(&self, len: usize) -> Option<&Searchers> {
        (self.prefilter).for_text(len, || {
            Searchers::of(&self.phrases, self.compiled.iter().map(|p| p.text.as_str()))
        })
    }
}

impl Phrase {
    /// Whether this phrase, found at `start..end` of the normalized `text`, asks to remember.
    fn is_request_at(&self, text: &str, start: usize, end: usize) -> bool {
        if self.cjk {
            cjk_is_request(text, start, end, self.narrative)
        } else {
            latin_is_request(text, start, end, self.self_marked)
        }
    }
}

/// Lowercases, straightens typographic apostrophes and collapses whitespace runs (to a
/// newline when the run holds one, since a newline starts a new clause).
fn normalize_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending: Option<char> = None;
    for c in text.chars() {
        if c.is_whitespace() {
            pending = Some(if c == '\n' || pending == Some('\n') {
                '\n'
            } else {
                ' '
            });
            continue;
        }
        if let Some(space) = pending.take() {
            out.push(space);
        }
        match c {
            '\u{2019}' | '\u{2018}' | '\u{02BC}' | '\u{FF07}' => out.push('\''),
            _ => out.extend(c.to_lowercase()),
        }
    }
    if let Some(space) = pending {
        out.push(space);
    }
    out
}
