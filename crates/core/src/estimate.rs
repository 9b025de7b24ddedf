//! Token estimation: a per-character-class prior, computed in one pass over the bytes.
//!
//! Every character counts by its class (ASCII letters, digits, whitespace, other ASCII,
//! non-ASCII), plus a fixed cost per message and per binary block. The class counts are what
//! a message caches; weights are applied afterwards, so changing weights or calibrating never
//! re-reads the text. Calibration (see [`crate::Calibration`]) scales the prior to what the
//! provider really counts.

#[cfg(feature = "exact")]
mod char_classes;
#[cfg(feature = "exact")]
mod chunked;
pub mod counter;
#[cfg(feature = "exact")]
pub mod exact;
#[cfg(feature = "exact")]
mod merged;
mod parallel;
#[cfg(feature = "exact")]
mod pieces;
#[cfg(feature = "exact")]
mod table_hash;
#[cfg(feature = "exact")]
mod vocab;

use crate::conversation::{Conversation, Message};
use crate::counts::ASCII_CLASS;
pub use crate::counts::ClassCounts;
pub use counter::{CounterFor, TokenCounter};
pub use parallel::set_counting_threads;

/// Tokens per character of each class, and the fixed costs (SPEC.md "Token estimation").
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
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

/// Characters past which a message or a text is estimated with the calibrated prior even
/// when the model's tokenizer is public, because counting it exactly would cost more than
/// its precision is worth. Ordinary text counts at about 40 ns a character, but text with
/// no break (one long run of letters, symbols or whitespace) costs 0.2–0.45 µs a character
/// even cut into chunks (`estimate::exact`; 1–5 s for 10 MB), where the prior costs about
/// 1 ns. At this size a message costs at most about half a second, and holds over 250K
/// tokens of ordinary text: more than most windows, so that compaction must cut it
/// whatever its exact count. A report says how many messages were estimated so
/// ([`crate::Report::estimated_messages`]).
pub const EXACT_COUNT_MAX_CHARS: u64 = 1 << 20;

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

    /// Tokens of a whole request (messages and `tools`): exact with a counter, but for
    /// messages too long to count exactly ([`EXACT_COUNT_MAX_CHARS`]).
    pub fn tokens(&self, conversation: &Conversation) -> u64 {
        match self.counter {
            Some(counter) => {
                parallel::count_ahead(self, &conversation.messages);
                let messages: u64 = (conversation.messages.iter())
                    .map(|m| self.message_tokens(m))
                    .sum();
                messages + counter.request_overhead(conversation)
            }
            None => self.tokens_of(&ClassCounts::of_conversation(conversation)),
        }
    }

    /// Tokens of one message (cached counts, or the cached exact count). A message longer
    /// than [`EXACT_COUNT_MAX_CHARS`] is estimated even with a counter.
    pub fn message_tokens(&self, message: &Message) -> u64 {
        match self.counter {
            Some(counter) if counts_exactly(&message.counts()) => {
                message.exact_tokens(counter.key(), || counter.message(message))
            }
            _ => self.tokens_of(&message.counts()),
        }
    }

    /// Tokens of a text (estimated past [`EXACT_COUNT_MAX_CHARS`], as a message).
    pub fn text_tokens(&self, text: &str) -> u64 {
        match self.counter {
            Some(counter) if text.len() as u64 <= EXACT_COUNT_MAX_CHARS => counter.text(text),
            Some(counter) => {
                let counts = ClassCounts::of_str(text);
                if counts_exactly(&counts) {
                    counter.text(text)
                } else {
                    self.tokens_of(&counts)
                }
            }
            None => self.tokens_of(&ClassCounts::of_str(text)),
        }
    }

    /// How many messages of `conversation` this estimator estimates although it has an
    /// exact counter, because they are longer than [`EXACT_COUNT_MAX_CHARS`] (0 without
    /// a counter).
    pub fn estimated_messages(&self, conversation: &Conversation) -> usize {
        if self.counter.is_none() {
            return 0;
        }
        (conversation.messages.iter())
            .filter(|m| !counts_exactly(&m.counts()))
            .count()
    }

    /// The weight of one character, calibrated.
    pub fn char_tokens(&self, ch: char) -> f64 {
        self.weights.of_char(ch) * self.multiplier
    }
}

/// Whether text of these counts is short enough to count exactly.
fn counts_exactly(counts: &ClassCounts) -> bool {
    Weights::chars(counts) <= EXACT_COUNT_MAX_CHARS
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

    static PER_CHAR: counter::PerChar = counter::PerChar { overhead: 3 };

    #[test]
    fn a_message_too_long_to_count_exactly_is_estimated() {
        let limit = EXACT_COUNT_MAX_CHARS as usize;
        let body = serde_json::json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "hello"},
            {"role": "user", "content": "a".repeat(limit)},
            {"role": "user", "content": "b".repeat(limit + 1)},
        ]});
        let conversation = crate::format::parse(body.to_string().as_bytes(), None).unwrap();
        let [short, at_limit, over] = &conversation.messages[..] else {
            panic!("three messages")
        };
        let exact = Estimator::new(Weights::default(), 2.0).with_counter(Some(&PER_CHAR));
        assert_eq!(exact.message_tokens(short), 5);
        assert_eq!(exact.message_tokens(at_limit), limit as u64);
        // Past the limit, the calibrated prior (here 0.23 × 2 a letter), not the counter.
        let prior = exact.tokens_of(&over.counts());
        assert_eq!(exact.message_tokens(over), prior);
        assert!(prior < limit as u64);
        assert_eq!(exact.tokens(&conversation), 5 + limit as u64 + prior + 3);
        assert_eq!(exact.estimated_messages(&conversation), 1);
        // The same rule for a bare text.
        let text = "c".repeat(limit + 1);
        assert_eq!(
            exact.text_tokens(&text),
            exact.tokens_of(&ClassCounts::of_str(&text))
        );
        assert_eq!(exact.text_tokens(&text[..limit]), limit as u64);
        // Without a counter everything is the prior, and nothing is estimated "instead".
        assert_eq!(Estimator::default().estimated_messages(&conversation), 0);
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
