//! Token estimation: a per-character-class prior, computed in one pass over the bytes.
//!
//! Every character counts by its class (ASCII letters, digits, whitespace, other ASCII,
//! non-ASCII), plus a fixed cost per message and per binary block. The class counts are what
//! a message caches; weights are applied afterwards, so changing weights or calibrating never
//! re-reads the text. Calibration (see [`crate::calibrate`]) scales the prior to what the
//! provider really counts.

use std::ops::{Add, AddAssign};

use serde_json::Value;

use crate::conversation::{Block, Conversation, Message};

/// How many characters of each class a piece of content holds, plus its fixed costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounts {
    pub letters: u64,
    pub digits: u64,
    pub whitespace: u64,
    pub punctuation: u64,
    pub non_ascii: u64,
    /// Images, documents and other binary blocks.
    pub binary_blocks: u64,
    /// Messages (each costs a fixed overhead).
    pub messages: u64,
}

/// The class of each ASCII byte: 0 letter, 1 digit, 2 whitespace, 3 other ASCII.
const ASCII_CLASS: [u8; 128] = {
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

    /// The counts of one message: its texts, tool calls, results and opaque blocks.
    pub fn of_message(message: &Message) -> ClassCounts {
        let mut counts = ClassCounts {
            messages: 1,
            ..ClassCounts::default()
        };
        add_blocks(&mut counts, message.blocks());
        counts
    }

    /// The counts of some content blocks (a tool result's content, say).
    pub fn of_blocks(blocks: &[Block]) -> ClassCounts {
        let mut counts = ClassCounts::default();
        add_blocks(&mut counts, blocks);
        counts
    }

    /// The counts of a whole request: messages plus `tools` definitions.
    pub fn of_conversation(conversation: &Conversation) -> ClassCounts {
        let mut total = conversation
            .messages
            .iter()
            .fold(ClassCounts::default(), |acc, m| acc + m.counts());
        if let Some(tools) = conversation.tools() {
            total += ClassCounts::of_json(tools);
        }
        total
    }
}

fn add_blocks(counts: &mut ClassCounts, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Text(t) => *counts += ClassCounts::of_str(&t.text),
            Block::ToolCall(call) => {
                *counts += ClassCounts::of_str(&call.name);
                match &call.arguments {
                    Value::String(s) => *counts += ClassCounts::of_str(s),
                    other => add_json(counts, other),
                }
            }
            Block::ToolResult(result) => add_blocks(counts, &result.content),
            Block::Binary(_) => counts.binary_blocks += 1,
            Block::Thinking(o) | Block::Other(o) => add_json(counts, &o.raw),
        }
    }
}

fn add_json(counts: &mut ClassCounts, value: &Value) {
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

/// Tokens per character of each class, and the fixed costs (SPEC.md "Token estimation").
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Weights {
    pub letter: f64,
    pub digit: f64,
    pub whitespace: f64,
    pub punctuation: f64,
    pub non_ascii: f64,
    pub per_message: f64,
    pub per_binary_block: f64,
}

impl Default for Weights {
    /// Fitted on o200k_base over the real fixtures (SPEC.md).
    fn default() -> Self {
        Weights {
            letter: 0.23,
            digit: 0.75,
            whitespace: 0.12,
            punctuation: 0.62,
            non_ascii: 1.19,
            per_message: 4.0,
            per_binary_block: 1600.0,
        }
    }
}

impl Weights {
    /// The uncalibrated prior, in tokens (fractional).
    pub fn prior(&self, c: &ClassCounts) -> f64 {
        self.letter * c.letters as f64
            + self.digit * c.digits as f64
            + self.whitespace * c.whitespace as f64
            + self.punctuation * c.punctuation as f64
            + self.non_ascii * c.non_ascii as f64
            + self.per_message * c.messages as f64
            + self.per_binary_block * c.binary_blocks as f64
    }

    /// The weight of one character.
    pub fn of_char(&self, ch: char) -> f64 {
        if ch.is_ascii() {
            match ASCII_CLASS[ch as usize] {
                0 => self.letter,
                1 => self.digit,
                2 => self.whitespace,
                _ => self.punctuation,
            }
        } else {
            self.non_ascii
        }
    }

    /// The number of characters in an estimate (for the "chars per token" a report shows).
    pub fn chars(c: &ClassCounts) -> u64 {
        c.letters + c.digits + c.whitespace + c.punctuation + c.non_ascii
    }
}

/// The estimate in force: the prior's weights times the model's calibration multiplier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimator {
    pub weights: Weights,
    /// Calibrated scale, or the starting scale times the safety margin.
    pub multiplier: f64,
}

impl Estimator {
    pub fn new(weights: Weights, multiplier: f64) -> Self {
        Estimator {
            weights,
            multiplier,
        }
    }

    /// Tokens of some class counts, rounded up.
    pub fn tokens_of(&self, counts: &ClassCounts) -> u64 {
        (self.weights.prior(counts) * self.multiplier).ceil() as u64
    }

    /// Tokens of a whole request (messages and `tools`).
    pub fn tokens(&self, conversation: &Conversation) -> u64 {
        self.tokens_of(&ClassCounts::of_conversation(conversation))
    }

    /// Tokens of one message (cached counts).
    pub fn message_tokens(&self, message: &Message) -> u64 {
        self.tokens_of(&message.counts())
    }

    /// Tokens of a text.
    pub fn text_tokens(&self, text: &str) -> u64 {
        self.tokens_of(&ClassCounts::of_str(text))
    }

    /// The weight of one character, calibrated.
    pub fn char_tokens(&self, ch: char) -> f64 {
        self.weights.of_char(ch) * self.multiplier
    }
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator::new(Weights::default(), 1.0)
    }
}

/// Exact token counts with a real tokenizer (feature `exact`): the yardstick.
#[cfg(feature = "exact")]
pub mod exact {
    use crate::conversation::{Block, Conversation};

    /// The tokenizers available for exact counts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Encoding {
        O200kBase,
        Cl100kBase,
    }

    /// A loaded tokenizer.
    pub struct ExactCounter {
        bpe: tiktoken_rs::CoreBPE,
    }

    impl ExactCounter {
        /// Loads the tokenizer's ranks (embedded in tiktoken-rs; no network).
        pub fn new(encoding: Encoding) -> Result<Self, crate::error::Error> {
            let bpe = match encoding {
                Encoding::O200kBase => tiktoken_rs::o200k_base(),
                Encoding::Cl100kBase => tiktoken_rs::cl100k_base(),
            }
            .map_err(|e| crate::error::Error::Tokenizer(e.to_string()))?;
            Ok(ExactCounter { bpe })
        }

        /// Tokens of a text.
        pub fn count(&self, text: &str) -> usize {
            self.bpe.encode_ordinary(text).len()
        }

        /// Tokens of a request, counted over the same texts the prior counts, with the same
        /// fixed per-message and per-binary-block costs.
        pub fn count_conversation(&self, conversation: &Conversation) -> usize {
            let weights = crate::estimate::Weights::default();
            let mut total = 0usize;
            for message in &conversation.messages {
                total += weights.per_message as usize;
                total += self.count_blocks(message.blocks(), &weights);
            }
            if let Some(tools) = conversation.tools() {
                total += self.count(&tools.to_string());
            }
            total
        }

        fn count_blocks(&self, blocks: &[Block], weights: &crate::estimate::Weights) -> usize {
            blocks
                .iter()
                .map(|block| match block {
                    Block::Text(t) => self.count(&t.text),
                    Block::ToolCall(c) => self.count(&c.name) + self.count(&c.arguments_text()),
                    Block::ToolResult(r) => self.count_blocks(&r.content, weights),
                    Block::Binary(_) => weights.per_binary_block as usize,
                    Block::Thinking(o) | Block::Other(o) => self.count(&o.raw.to_string()),
                })
                .sum()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_class_once_per_character() {
        let c = ClassCounts::of_str("ab 12!\né日🎉");
        assert_eq!(c.letters, 2);
        assert_eq!(c.digits, 2);
        assert_eq!(c.whitespace, 2);
        assert_eq!(c.punctuation, 1);
        assert_eq!(c.non_ascii, 3);
    }

    #[test]
    fn block_counting_agrees_with_the_class_table_on_every_byte() {
        // Every ASCII byte, long enough to cross the 255-byte blocks, plus multi-byte text.
        let mut text: String = (0u8..128).map(char::from).collect::<String>().repeat(5);
        text.push_str(&"é日🎉x".repeat(100));
        let mut expected = [0u64; 5];
        for ch in text.chars() {
            let class = if ch.is_ascii() {
                ASCII_CLASS[ch as usize] as usize
            } else {
                4
            };
            expected[class] += 1;
        }
        let c = ClassCounts::of_str(&text);
        assert_eq!(
            [
                c.letters,
                c.digits,
                c.whitespace,
                c.punctuation,
                c.non_ascii
            ],
            expected
        );
    }

    #[test]
    fn prior_applies_the_spec_weights() {
        let w = Weights::default();
        let c = ClassCounts {
            letters: 100,
            digits: 10,
            whitespace: 20,
            punctuation: 5,
            non_ascii: 2,
            binary_blocks: 1,
            messages: 1,
        };
        let expected = 23.0 + 7.5 + 2.4 + 3.1 + 2.38 + 1600.0 + 4.0;
        assert!((w.prior(&c) - expected).abs() < 1e-9);
    }

    #[test]
    fn json_counting_includes_keys_and_structure() {
        let v = serde_json::json!({"name": "read", "n": 12});
        let c = ClassCounts::of_json(&v);
        assert_eq!(c.letters, 4 + 4 + 1);
        assert_eq!(c.digits, 2);
        assert!(c.punctuation >= 8);
    }

    #[test]
    fn char_weight_matches_class_counts() {
        let w = Weights::default();
        for ch in ['a', '7', ' ', '{', 'é', '🎉'] {
            let mut buf = [0u8; 4];
            let c = ClassCounts::of_str(ch.encode_utf8(&mut buf));
            assert!((w.prior(&c) - w.of_char(ch)).abs() < 1e-12, "{ch}");
        }
    }
}
