//! Character-class counts: what a message caches and the token estimate weighs.
//!
//! Every character counts by its class (ASCII letters, digits, whitespace, other ASCII,
//! non-ASCII), plus a fixed cost per message and per binary block. This module counts text
//! and JSON; the counting of messages and blocks lives beside them in
//! conversation.rs, so that neither module needs the other.

use std::ops::{Add, AddAssign};

use serde_json::Value;

/// How many characters of each class a piece of content holds, plus its fixed costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// ASCII letters.
    pub letters: u64,
    /// ASCII digits.
    pub digits: u64,
    /// Whitespace characters.
    pub whitespace: u64,
    /// Other ASCII characters.
    pub punctuation: u64,
    /// Non-ASCII characters (counted once each).
    pub non_ascii: u64,
    /// Images, documents and other binary blocks.
    pub binary_blocks: u64,
    /// Messages (each costs a fixed overhead).
    pub messages: u64,
}

/// The class of each ASCII byte: 0 letter, 1 digit, 2 whitespace, 3 other ASCII.
pub(crate) const ASCII_CLASS: [u8; 128] = {
    let mut table = [3u8; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        table[i] = if c.is_ascii_alphabetic() {
            0
        } else if c.is_ascii_digit() {
            1
        } else if c.is_ascii_whitespace() || c == 0x0b {
            2
        } else {
            3
        };
        i += 1;
    }
    table
};

impl ClassCounts {
    /// Counts the characters of a string in one pass over its bytes. A non-ASCII character
    /// is counted once, at its lead byte (UTF-8 continuation bytes are `10xxxxxx`).
    ///
    /// Branch-free per byte, in blocks of at most 255 bytes with `u8` tallies, so the
    /// compiler turns the loop into SIMD compares: this runs on every byte of every request.
    pub fn of_str(text: &str) -> ClassCounts {
        let mut counts = ClassCounts::default();
        let mut ascii = 0u64;
        for block in text.as_bytes().chunks(255) {
            let (mut letters, mut digits, mut whitespace, mut non_ascii, mut below_128) =
                (0u8, 0u8, 0u8, 0u8, 0u8);
            for &byte in block {
                // `| 0x20` folds upper case onto lower case; no other byte lands in a..=z.
                letters += u8::from((byte | 0x20).wrapping_sub(b'a') < 26);
                digits += u8::from(byte.wrapping_sub(b'0') < 10);
                // Tab, line feed, vertical tab, form feed, carriage return, space.
                whitespace += u8::from(byte.wrapping_sub(0x09) < 5) + u8::from(byte == b' ');
                non_ascii += u8::from(byte >= 0xC0);
                below_128 += u8::from(byte < 0x80);
            }
            counts.letters += u64::from(letters);
            counts.digits += u64::from(digits);
            counts.whitespace += u64::from(whitespace);
            counts.non_ascii += u64::from(non_ascii);
            ascii += u64::from(below_128);
        }
        counts.punctuation = ascii - counts.letters - counts.digits - counts.whitespace;
        counts
    }

    /// Counts every key and string of a JSON value, plus its numbers and punctuation as
    /// they would be serialized (tool definitions, Anthropic tool inputs, unknown blocks).
    pub fn of_json(value: &Value) -> ClassCounts {
        let mut counts = ClassCounts::default();
        add_json(&mut counts, value);
        counts
    }
}

pub(crate) fn add_json(counts: &mut ClassCounts, value: &Value) {
    match value {
        Value::String(s) => {
            *counts += ClassCounts::of_str(s);
            counts.punctuation += 2;
        }
        Value::Number(n) => *counts += ClassCounts::of_str(&n.to_string()),
        Value::Bool(b) => counts.letters += if *b { 4 } else { 5 },
        Value::Null => counts.letters += 4,
        Value::Array(items) => {
            counts.punctuation += 1 + items.len() as u64;
            items.iter().for_each(|v| add_json(counts, v));
        }
        Value::Object(map) => {
            counts.punctuation += 1 + 2 * map.len() as u64;
            for (key, v) in map {
                *counts += ClassCounts::of_str(key);
                counts.punctuation += 2;
                add_json(counts, v);
            }
        }
    }
}

impl Add for ClassCounts {
    type Output = ClassCounts;
    fn add(mut self, rhs: ClassCounts) -> ClassCounts {
        self += rhs;
        self
    }
}

impl AddAssign for ClassCounts {
    fn add_assign(&mut self, rhs: ClassCounts) {
        self.letters += rhs.letters;
        self.digits += rhs.digits;
        self.whitespace += rhs.whitespace;
        self.punctuation += rhs.punctuation;
        self.non_ascii += rhs.non_ascii;
        self.binary_blocks += rhs.binary_blocks;
        self.messages += rhs.messages;
    }
}
