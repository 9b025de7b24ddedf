//! Recognizers over prose: identifiers, plan sentences, constraints and task lines. (File
//! paths and error lines, which the trail reads too, are in `crate::extract`.)
//!
//! All of them are single linear passes, because texts can be hundreds of kilobytes.

use crate::extract::floor_char_boundary;

/// Calls `found` for each identifier-like word of `text` that names a concept: `CamelCase`,
/// `lowerCamel`, `snake_case` and `name(` calls. Words glued to `/` are path segments and
/// skipped; so are ids full of digits (`toolu_01UwLn...`).
pub(crate) fn identifiers_in(text: &str, mut found: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_alphabetic() || b == b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        let before = start.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i).copied();
        // Part of a longer non-ASCII word, a path, or a number: not an identifier.
        let glued = |c: Option<u8>| c.is_some_and(|c| c == b'/' || c >= 0x80);
        if glued(before) || glued(after) {
            continue;
        }
        let word = &text[start..i];
        if is_identifier(word, after == Some(b'(')) {
            found(word);
        }
    }
}

fn is_identifier(word: &str, called: bool) -> bool {
    let len = word.len();
    if !(4..=64).contains(&len) || word.bytes().filter(u8::is_ascii_digit).count() > 3 {
        return false;
    }
    let core = word.trim_matches('_');
    let snake = core.contains('_') && core.bytes().any(|b| b.is_ascii_lowercase());
    let bytes = core.as_bytes();
    let camel = bytes
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    let function = called && !COMMON_CALLS.contains(&word);
    snake || camel || function
}

/// Words followed by `(` that are keywords or prose, not names worth listing.
const COMMON_CALLS: &[&str] = &[
    "print", "return", "while", "switch", "assert", "format", "catch", "function", "super",
    "typeof", "sizeof", "defined", "note", "see", "both", "that", "this", "with", "from", "these",
    "those", "each", "here", "there", "which", "only", "also", "then", "when", "like",
];

/// The sentences of a text: split at line ends and after `.`, `!` or `?` followed by a
/// space (so `src/lib.rs` and `e.g.` inside a sentence do not split it), trimmed.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ends = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace);
            if ends {
                out.push(line[start..=i].trim());
                start = i + 1;
            }
        }
        out.push(line[start..].trim());
    }
    out.retain(|s| s.len() > 3);
    out
}

/// Words of a sentence that state a plan or a reason.
const PLAN_WORDS: &[&str] = &[
    "i'll ",
    "i will ",
    "let me ",
    "let's ",
    "i need to",
    "i'm going to",
    "we need to",
    "the plan",
    "my plan",
    "approach",
    "first,",
    "next,",
    "then i",
    "because",
    "the issue",
    "the problem",
    "root cause",
    "the fix",
    "instead",
    "i should",
    "we should",
    "now i",
    "strategy",
];

/// Whether a sentence of the assistant states a plan or a reason.
pub(crate) fn is_plan(sentence: &str) -> bool {
    contains_any_lowercase(sentence, PLAN_WORDS)
}

/// Words of a user sentence that make it a request or a constraint.
const CONSTRAINT_WORDS: &[&str] = &[
    "must",
    "don't",
    "do not",
    "never",
    "always",
    "should",
    "make sure",
    "ensure",
    "only ",
    "instead",
    "please",
    "need",
    "want",
    "remember",
    "prefer",
    "avoid",
    "without",
    "can you",
    "could you",
    "keep ",
    "use ",
    "don’t",
];

/// Whether a user sentence asks for something or constrains how.
pub(crate) fn is_constraint(sentence: &str) -> bool {
    contains_any_lowercase(sentence, CONSTRAINT_WORDS)
}

/// Markers of an open task in a line.
const TODO_WORDS: &[&str] = &[
    "todo",
    "- [ ]",
    "* [ ]",
    "next i will",
    "next, i will",
    "remaining",
    "still need",
    "left to do",
    "not yet done",
    "fixme",
];

/// Whether a line states an open task.
pub(crate) fn is_todo_line(line: &str) -> bool {
    contains_any_lowercase(line, TODO_WORDS)
}

/// Whether a line is a ticked checklist item.
pub(crate) fn is_done_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("- [x]") || t.starts_with("* [x]") || t.starts_with("- [X]")
}

fn contains_any_lowercase(text: &str, words: &[&str]) -> bool {
    // Sentences are short; long ones are looked at only in their first 2 KB.
    let head = &text[..floor_char_boundary(text, 2048)];
    let lower = head.to_lowercase();
    words.iter().any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_named_concepts() {
        let mut seen = Vec::new();
        identifiers_in(
            "SessionLive uses make_pattern_type and getRetryStrategy(); if (x) see lib/foo_bar \
             toolu_01UwLnYYWGBvukzh1QE6JpfM the plain words build(",
            |w| seen.push(w.to_owned()),
        );
        assert_eq!(
            seen,
            vec![
                "SessionLive",
                "make_pattern_type",
                "getRetryStrategy",
                "build"
            ]
        );
    }

    #[test]
    fn keywords() {
        assert!(is_plan("Let me check the file first."));
        assert!(is_constraint("Don't touch the tests."));
        assert!(is_todo_line("- [ ] write docs"));
        assert!(is_done_line("- [x] wrote docs"));
        assert!(!is_todo_line("all done"));
    }

    #[test]
    fn sentences_split_at_sentence_ends_only() {
        assert_eq!(
            sentences("Read src/lib.rs first. Then fix it!\nDone? ok"),
            vec!["Read src/lib.rs first.", "Then fix it!", "Done?"]
        );
    }
}
