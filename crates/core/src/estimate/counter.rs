//! The hook for exact token counts: a tokenizer that knows what a provider bills.
//!
//! The prior (with calibration) estimates every model; where the tokenizer is public
//! (OpenAI's o200k_base and cl100k_base, see the `exact` feature's
//! [`crate::estimate::exact`]), a [`TokenCounter`] replaces it for whole messages and whole
//! requests. The trait lives here, always compiled, so that the engine can carry a counter
//! without every library user paying for the tokenizer tables.

use crate::conversation::{Conversation, Message};

/// Exact token counts for one tokenizer and its chat framing.
///
/// Implementations are process-wide (`&'static`), so that an [`crate::estimate::Estimator`]
/// stays `Copy`, and should memoize per message: a request that extends the previous one
/// then costs only its new messages.
pub trait TokenCounter: Send + Sync + std::fmt::Debug {
    /// The tokenizer's name (`o200k_base`), for reports and logs.
    fn name(&self) -> &str;

    /// Tokens of one message as the provider bills it, its framing included.
    fn message(&self, message: &Message) -> u64;

    /// Tokens a request costs beyond its messages: the reply priming and the `tools`
    /// definitions.
    fn request_overhead(&self, conversation: &Conversation) -> u64;

    /// Tokens of a bare text (a summary, a marker).
    fn text(&self, text: &str) -> u64;

    /// Tokens of a whole request: every message plus the request overhead.
    fn request(&self, conversation: &Conversation) -> u64 {
        let messages: u64 = conversation
            .messages
            .iter()
            .map(|m| m.exact_tokens(self.key(), || self.message(m)))
            .sum();
        messages + self.request_overhead(conversation)
    }

    /// An identity for the per-message cache ([`Message::exact_tokens`]): the counter's
    /// address, unique among live `'static` counters.
    fn key(&self) -> usize {
        std::ptr::from_ref(self).cast::<()>() as usize
    }
}

/// Which counter, if any, counts a model's requests exactly (`None`: the prior).
pub type CounterFor =
    std::sync::Arc<dyn Fn(&str) -> Option<&'static dyn TokenCounter> + Send + Sync>;
