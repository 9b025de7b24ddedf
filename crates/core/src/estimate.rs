//! Token estimation: a per-character-class prior, computed in one pass over the bytes.
//!
//! Every character counts by its class (ASCII letters, digits, whitespace, other ASCII,
//! non-ASCII), plus a fixed cost per message and per binary block. The class counts are what
//! a message caches; weights are applied afterwards, so changing weights or calibrating never
//! re-reads the text. Calibration (see [`crate::Calibration`]) scales the prior to what the
//! provider really counts.

#[cfg(feature = "exact")]
mod chunked;
pub mod counter;
#[cfg(feature = "exact")]
pub mod exact;

use crate::conversation::{Conversation, Message};
use crate::counts::ASCII_CLASS;
pub use crate::counts::ClassCounts;
pub use counter::{CounterFor, TokenCounter};

/// Tokens per character of each class, and the fixed costs (SPEC.md "Token estimation").
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Weights {
    /// Tokens per ASCII letter.
    pub letter: f64,
    /// Tokens per ASCII digit.
    pub digit: f64,
    /// Tokens per whitespace character.
    pub whitespace: f64,
    /// Tokens per other ASCII character (punctuation, symbols).
    pub punctuation: f64,
    /// Tokens per non-ASCII character.
    pub non_ascii: f64,
    /// Fixed tokens per message (role, framing).
    pub per_message: f64,
    /// Fixed tokens per image, document or other binary block.
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

/// The estimate in force: the prior's weights times the model's calibration multiplier,
/// or, where the model's tokenizer is public, an exact [`TokenCounter`] for whole messages,
/// texts and requests (parts of messages, which no provider bills alone, keep the prior).
#[derive(Debug, Clone, Copy)]
pub struct Estimator {
    /// The per-class prior.
    pub weights: Weights,
    /// Calibrated scale, or the starting scale times the safety margin. It scales the
    /// prior only, never an exact count.
    pub multiplier: f64,
    /// The exact counter of the model, if its tokenizer is public.
    pub counter: Option<&'static dyn TokenCounter>,
}

impl PartialEq for Estimator {
    fn eq(&self, other: &Self) -> bool {
        let key = |c: Option<&'static dyn TokenCounter>| c.map(|c| c.key());
        self.weights == other.weights
            && self.multiplier == other.multiplier
            && key(self.counter) == key(other.counter)
    }
}

impl Estimator {
    /// An estimator with these weights and calibration multiplier (the prior only).
    pub fn new(weights: Weights, multiplier: f64) -> Self {
        Estimator {
            weights,
            multiplier,
            counter: None,
        }
    }

    /// The same estimator counting exactly with `counter` where it can.
    pub fn with_counter(self, counter: Option<&'static dyn TokenCounter>) -> Self {
        Estimator { counter, ..self }
    }

    /// Tokens of some class counts, rounded up (always the prior: class counts carry no
    /// text to tokenize).
    pub fn tokens_of(&self, counts: &ClassCounts) -> u64 {
        (self.weights.prior(counts) * self.multiplier).ceil() as u64
    }

    /// Tokens of a whole request (messages and `tools`): exact with a counter.
    pub fn tokens(&self, conversation: &Conversation) -> u64 {
        match self.counter {
            Some(counter) => counter.request(conversation),
            None => self.tokens_of(&ClassCounts::of_conversation(conversation)),
        }
    }

    /// Tokens of one message (cached counts, or the cached exact count).
    pub fn message_tokens(&self, message: &Message) -> u64 {
        match self.counter {
            Some(counter) => message.exact_tokens(counter.key(), || counter.message(message)),
            None => self.tokens_of(&message.counts()),
        }
    }

    /// Tokens of a text.
    pub fn text_tokens(&self, text: &str) -> u64 {
        match self.counter {
            Some(counter) => counter.text(text),
            None => self.tokens_of(&ClassCounts::of_str(text)),
        }
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
