//! The pre-tokenizers of o200k_base and cl100k_base, written out: a text's pieces exactly
//! where tiktoken's regular expression (below each function) finds them, at the speed of a
//! byte scan and with nothing to compile at load.
//!
//! The patterns' classes come from the Unicode tables of `regex-syntax`, the crate tiktoken's
//! regex engine parses them with, read by the build script (`estimate::char_classes`), so a
//! character is a letter, a number or a space here exactly when it is there; ASCII is looked
//! up in a table built at compile time.
//! `tests/exact_tokenizer.rs` compares the counts with tiktoken-rs's on every fixture
//! message, the patterns' edge cases and generated text in both encodings.

use std::ops::Range;

use super::char_classes::{LOWER, MARK, NEWLINE, NUMBER, OTHER, SPACE, UPPER};

const LETTER: u8 = UPPER | LOWER | OTHER;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
const UPPER_CLASS: u8 = UPPER | OTHER | MARK;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
const LOWER_CLASS: u8 = LOWER | OTHER | MARK;

/// `[^\r\n\p{L}\p{N}]`: what may lead a word.
fn leads_word(class: u8) -> bool {
    class & (NEWLINE | LETTER | NUMBER) == 0
}

/// `[^\s\p{L}\p{N}]`: punctuation and symbols.
fn is_symbol(class: u8) -> bool {
    class & (SPACE | LETTER | NUMBER) == 0
}

/// The class of each ASCII character.
const ASCII: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        table[i] = if c.is_ascii_uppercase() {
            UPPER
        } else if c.is_ascii_lowercase() {
            LOWER
        } else if c.is_ascii_digit() {
            NUMBER
        } else if c == b'\r' || c == b'\n' {
            SPACE | NEWLINE
        } else if c == b' ' || (c >= 0x09 && c <= 0x0d) {
            SPACE
        } else {
            0
        };
        i += 1;
    }
    table
};

/// The classes of every character past ASCII, `(first, last, class)`: disjoint ranges in
/// order, written by the build script from `regex-syntax`'s tables.
static RANGES: &[(char, char, u8)] = include!(concat!(env!("OUT_DIR"), "/unicode_classes.rs"));

/// The character classes of the patterns: a table lookup for ASCII, a binary search of
/// [`RANGES`] past it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Classes;

impl Classes {
    /// The class of the character at `at` and its length in bytes (0, 0 at the end).
    #[inline]
    fn at(&self, text: &str, at: usize) -> (u8, usize) {
        match text.as_bytes().get(at) {
            None => (0, 0),
            Some(&b) if b < 0x80 => (ASCII[b as usize], 1),
            Some(_) => match text.get(at..).and_then(|t| t.chars().next()) {
                Some(ch) => (self.of_char(ch), ch.len_utf8()),
                None => (0, 1),
            },
        }
    }

    fn of_char(&self, ch: char) -> u8 {
        let i = RANGES.partition_point(|&(start, _, _)| start <= ch);
        match i.checked_sub(1).and_then(|i| RANGES.get(i)).copied() {
            Some((_, end, class)) if ch <= end => class,
            _ => 0,
        }
    }

    /// The end of the run of characters in `class` from `at`.
    #[inline]
    fn run(&self, text: &str, mut at: usize, class: u8) -> usize {
        loop {
            let (c, len) = self.at(text, at);
            if c & class == 0 || len == 0 {
                return at;
            }
            at += len;
        }
    }

    /// Calls `piece` with every piece of `text` under o200k_base's pattern, in order.
    pub(crate) fn o200k(&self, text: &str, mut piece: impl FnMut(Range<usize>)) {
        let mut at = 0;
        while at < text.len() {
            let end = self.o200k_piece(text, at);
            piece(at..end);
            at = end;
        }
    }

    /// Calls `piece` with every piece of `text` under cl100k_base's pattern, in order.
    pub(crate) fn cl100k(&self, text: &str, mut piece: impl FnMut(Range<usize>)) {
        let mut at = 0;
        while at < text.len() {
            let end = self.cl100k_piece(text, at);
            piece(at..end);
            at = end;
        }
    }

    /// The end of the piece starting at `s`, by o200k_base's alternatives in order:
    ///
    /// ```text
    /// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    /// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    /// |\p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* |\s*[\r\n]+ |\s+(?!\S) |\s+
    /// ```
    fn o200k_piece(&self, text: &str, s: usize) -> usize {
        if let Some(end) = o200k_ascii_piece(text, s) {
            return end;
        }
        if o200k_ascii_space(text, s) {
            return self.spaces(text, s, true);
        }
        let (first, len) = self.at(text, s);
        // The optional leading character: tried taken, then not (backtracking order).
        let starts = if leads_word(first) {
            [Some(s + len), Some(s)]
        } else {
            [Some(s), None]
        };
        for start in starts.into_iter().flatten() {
            if let Some(end) = self.lower_word(text, start) {
                return end;
            }
        }
        for start in starts.into_iter().flatten() {
            let upper = self.run(text, start, UPPER_CLASS);
            if upper > start {
                let end = self.run(text, upper, LOWER_CLASS);
                return end + contraction(text, end);
            }
        }
        if let Some(end) = self.digits(text, s, first) {
            return end;
        }
        if let Some(end) = self.symbols(text, s) {
            return self.run_of_bytes(text, end, b"\r\n/");
        }
        self.spaces(text, s, true)
    }

    /// `[upper class]*[lower class]+(?i:'s|…)?` from `start`: the upper run gives back
    /// characters (the classes share `Lm`, `Lo`, `M`) until a lower-class one follows.
    fn lower_word(&self, text: &str, start: usize) -> Option<usize> {
        let mut at = self.run(text, start, UPPER_CLASS);
        loop {
            let (class, _) = self.at(text, at);
            if class & LOWER_CLASS != 0 {
                let end = self.run(text, at, LOWER_CLASS);
                return Some(end + contraction(text, end));
            }
            if at == start {
                return None;
            }
            at = previous_boundary(text, at);
        }
    }

    /// `\p{N}{1,3}`.
    fn digits(&self, text: &str, s: usize, first: u8) -> Option<usize> {
        if first & NUMBER == 0 {
            return None;
        }
        let mut end = s;
        for _ in 0..3 {
            let (class, len) = self.at(text, end);
            if class & NUMBER == 0 || len == 0 {
                break;
            }
            end += len;
        }
        Some(end)
    }

    /// ` ?[^\s\p{L}\p{N}]+`: the end of the symbols, if any.
    fn symbols(&self, text: &str, s: usize) -> Option<usize> {
        let start = if text.as_bytes().get(s) == Some(&b' ') {
            s + 1
        } else {
            s
        };
        let mut end = start;
        loop {
            let (class, len) = self.at(text, end);
            if len == 0 || !is_symbol(class) {
                break;
            }
            end += len;
        }
        (end > start).then_some(end)
    }

    /// The end of a run of the given ASCII bytes.
    fn run_of_bytes(&self, text: &str, mut at: usize, bytes: &[u8]) -> usize {
        while text.as_bytes().get(at).is_some_and(|b| bytes.contains(b)) {
            at += 1;
        }
        at
    }

    /// The white-space alternatives shared by both patterns, from a space at `s`: cl100k's
    /// `\s++$` takes a run that ends the text; `\s*[\r\n]+` (o200k) or `\s*[\r\n]` (cl100k)
    /// end after the run's last line break;
    /// else `\s+(?!\S)` leaves the run's last character to lead the next word; else `\s+`
    /// (o200k, `all`) or `\s` (cl100k).
    fn spaces(&self, text: &str, s: usize, all: bool) -> usize {
        let mut end = s;
        let mut last_break = None;
        let mut chars = 0;
        loop {
            let (class, len) = self.at(text, end);
            if class & SPACE == 0 || len == 0 {
                break;
            }
            if class & NEWLINE != 0 {
                last_break = Some(end + len);
            }
            end += len;
            chars += 1;
        }
        // cl100k tries `\s++$` before the line breaks; o200k has no such alternative.
        if !all && end == text.len() {
            return end;
        }
        if let Some(after_break) = last_break {
            return after_break;
        }
        if end == text.len() {
            return end;
        }
        if chars >= 2 {
            return previous_boundary(text, end);
        }
        // One space (or, never in practice, a character no alternative takes: one piece).
        let one = s + self.at(text, s).1.max(1);
        if all { end.max(one) } else { one }
    }

    /// The end of the piece starting at `s`, by cl100k_base's alternatives in order:
    ///
    /// ```text
    /// '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+
    /// |\s++$|\s*[\r\n]|\s+(?!\S)|\s
    /// ```
    fn cl100k_piece(&self, text: &str, s: usize) -> usize {
        let apostrophe = contraction(text, s);
        if apostrophe > 0 {
            return s + apostrophe;
        }
        let (first, len) = self.at(text, s);
        // Possessive: a leading character, once taken, is never given back.
        let start = if leads_word(first) { s + len } else { s };
        let end = self.run(text, start, LETTER);
        if end > start {
            return end;
        }
        if let Some(end) = self.digits(text, s, first) {
            return end;
        }
        if let Some(end) = self.symbols(text, s) {
            return self.run_of_bytes(text, end, b"\r\n");
        }
        self.spaces(text, s, false)
    }
}

/// Past the end of the text, for [`o200k_ascii_piece`]: in no class, and no symbol.
const END: u8 = 128;

/// The class of the ASCII byte at `at`, [`END`] past the text; `None` past ASCII.
#[inline]
fn ascii_at(bytes: &[u8], at: usize) -> Option<u8> {
    match bytes.get(at) {
        None => Some(END),
        Some(&b) if b < 0x80 => Some(ASCII[b as usize]),
        Some(_) => None,
    }
}

/// The end of the o200k piece at `s` when it is a word, a number or a run of symbols and
/// every byte that decides it is ASCII (most pieces of most text); `None` leaves the piece
/// to [`Classes::o200k_piece`]'s general path, as does white space. In ASCII the upper and
/// lower classes are `[A-Z]` and `[a-z]` and share nothing, so the first two alternatives
/// never give back a letter: a word is its optional leading character, its capitals and its
/// small letters, and a contraction.
#[inline]
fn o200k_ascii_piece(text: &str, s: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let first = ascii_at(bytes, s)?;
    let start = if first & LETTER != 0 {
        Some(s)
    } else if leads_word(first) && ascii_at(bytes, s + 1)? & LETTER != 0 {
        Some(s + 1)
    } else {
        None
    };
    if let Some(start) = start {
        let mut end = start;
        while ascii_at(bytes, end)? & UPPER != 0 {
            end += 1;
        }
        while ascii_at(bytes, end)? & LOWER != 0 {
            end += 1;
        }
        return Some(end + contraction(text, end));
    }
    if first & NUMBER != 0 {
        let mut end = s + 1;
        while end < s + 3 && ascii_at(bytes, end)? & NUMBER != 0 {
            end += 1;
        }
        // A fourth digit, even past ASCII, starts the next piece: nothing to check.
        return Some(end);
    }
    let from = if first & SPACE != 0 && bytes[s] == b' ' {
        s + 1
    } else {
        s
    };
    let mut end = from;
    loop {
        let class = ascii_at(bytes, end)?;
        if class == END || !is_symbol(class) {
            break;
        }
        end += 1;
    }
    if end == from {
        return None;
    }
    while matches!(bytes.get(end), Some(b'\r' | b'\n' | b'/')) {
        end += 1;
    }
    Some(end)
}

/// Whether the o200k piece at `s`, which [`o200k_ascii_piece`] left, can only be taken by
/// the white-space alternatives: a line break (no other alternative starts with one), or an
/// ASCII space followed by white space, a digit or the end (a space leads a word only into
/// a letter and symbols only into a symbol, and a number starts with a digit). Line breaks
/// and indentation are about one piece in eight of agent output, and the general path
/// tries every other alternative on them first. A space before a letter or a symbol is
/// left to the general path: the word or symbols it leads run into a character past ASCII.
#[inline]
fn o200k_ascii_space(text: &str, s: usize) -> bool {
    let bytes = text.as_bytes();
    match ascii_at(bytes, s) {
        Some(first) if first & NEWLINE != 0 => true,
        Some(first) if first & SPACE != 0 => {
            matches!(ascii_at(bytes, s + 1), Some(next) if next == END || next & (SPACE | NUMBER) != 0)
        }
        _ => false,
    }
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `at`: its length in bytes, 0 when there is none.
/// Case-insensitive as Unicode folds it: `ſ` (U+017F) is an `s`.
fn contraction(text: &str, at: usize) -> usize {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'\'') {
        return 0;
    }
    let lower = |i: usize| bytes.get(at + i).map(u8::to_ascii_lowercase);
    match (lower(1), lower(2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => 2,
        (Some(b'r' | b'v'), Some(b'e')) => 3,
        (Some(b'l'), Some(b'l')) => 3,
        (Some(0xc5), Some(0xbf)) => 3,
        _ => 0,
    }
}

/// The start of the character before byte `at` (`at` > 0, on a boundary).
fn previous_boundary(text: &str, at: usize) -> usize {
    let mut i = at.saturating_sub(1);
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::estimate::char_classes::PATTERNS;

    /// The built table gives every character past ASCII the classes the regex crate (which
    /// shares `regex-syntax`'s tables with tiktoken's engine) says it is in.
    #[test]
    fn the_built_table_agrees_with_the_regex_crate_on_every_character() {
        let patterns: Vec<(u8, regex::Regex)> = (PATTERNS.iter())
            .map(|&(class, pattern)| (class, regex::Regex::new(&format!("^{pattern}$")).unwrap()))
            .collect();
        assert!(
            RANGES.windows(2).all(|w| w[0].1 < w[1].0),
            "ordered, disjoint"
        );
        let mut buffer = [0u8; 4];
        for ch in '\u{80}'..=char::MAX {
            let text: &str = ch.encode_utf8(&mut buffer);
            let expected = (patterns.iter())
                .filter(|(_, re)| re.is_match(text))
                .fold(0, |bits, (class, _)| bits | class);
            assert_eq!(
                Classes.at(text, 0),
                (expected, ch.len_utf8()),
                "U+{:04X}",
                ch as u32
            );
        }
    }
}
