//! The hook for exact token counts: a tokenizer that knows what a provider bills.
//!
//! The prior (with calibration) estimates every model; where the tokenizer is public
//! (OpenAI's o200k_base and cl100k_base, see the `exact` feature's `estimate::exact`
//! module), a [`TokenCounter`] replaces it for whole messages and whole
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

/// The exact counters an engine uses, and the models whose provider counted otherwise.
///
/// An OpenAI model id names a tokenizer, but the endpoint behind it may not be OpenAI's: a
/// gateway, a local server under an OpenAI name, or a provider whose framing changed. An
/// exact count that disagrees with what the provider reports would never be corrected
/// (calibration does not scale exact counts) and would overflow on every request; so the
/// first report that differs by more than [`Counters::TOLERANCE`] (and
/// [`Counters::SLACK`] tokens) sends the model back to the calibrated prior.
/// Models remembered per engine at most (their names come from clients).
pub(crate) const MODELS_KEPT: usize = 1024;

#[derive(Default)]
pub(crate) struct Counters {
    counter_for: Option<CounterFor>,
    distrusted: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Counters {
    /// The share of the provider's count an exact count may miss by.
    pub(crate) const TOLERANCE: f64 = 0.05;
    /// Tokens an exact count may miss by whatever the request's size (framing of tool
    /// calls and images is documented only approximately).
    pub(crate) const SLACK: u64 = 32;

    pub(crate) fn new(counter_for: CounterFor) -> Self {
        Counters {
            counter_for: Some(counter_for),
            distrusted: std::sync::Mutex::default(),
        }
    }

    /// The same counters and verdicts, for an engine that must count as this one does (the
    /// shadow engine that forecasts ④'s ranges for background summaries).
    pub(crate) fn copy(&self) -> Self {
        Counters {
            counter_for: self.counter_for.clone(),
            distrusted: std::sync::Mutex::new(self.distrusted().clone()),
        }
    }

    fn distrusted(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.distrusted.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counter for `model`, unless its provider contradicted it.
    pub(crate) fn for_model(&self, model: &str) -> Option<&'static dyn TokenCounter> {
        let counter = self.counter_for.as_ref().and_then(|f| f(model))?;
        (!self.distrusted().contains(model)).then_some(counter)
    }

    /// Compares an exact count of a request with what its provider counted; returns whether
    /// the model's counter was dropped by this observation.
    pub(crate) fn check(&self, model: &str, counted: u64, real: u64) -> bool {
        // A count of 0 is no count (an endpoint that fills `usage` with zeros), as for the
        // calibration: it must not cost the model its tokenizer.
        if real == 0 || self.for_model(model).is_none() {
            return false;
        }
        let allowed = (real as f64 * Self::TOLERANCE).max(Self::SLACK as f64);
        if (real as f64 - counted as f64).abs() <= allowed {
            return false;
        }
        tracing::warn!(
            model = ?crate::logged::clipped(model),
            counted,
            real,
            "the provider counts this model's requests otherwise than its public tokenizer: \
             estimating it with the calibrated prior from now on"
        );
        let mut distrusted = self.distrusted();
        // Model names come from clients: a full set starts over (a model dropped again is
        // checked again on its next report).
        if distrusted.len() >= MODELS_KEPT {
            distrusted.clear();
        }
        distrusted.insert(model.to_owned())
    }
}

/// A tokenizer for tests that counts one token per character, plus `overhead` per request.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct PerChar {
    pub(crate) overhead: u64,
}

#[cfg(test)]
impl TokenCounter for PerChar {
    fn name(&self) -> &str {
        "per-char"
    }
    fn message(&self, message: &Message) -> u64 {
        message.text_content().chars().count() as u64
    }
    fn request_overhead(&self, _: &Conversation) -> u64 {
        self.overhead
    }
    fn text(&self, text: &str) -> u64 {
        text.chars().count() as u64
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure
    use super::*;

    static PER_CHAR: PerChar = PerChar { overhead: 0 };

    fn counters() -> Counters {
        Counters::new(std::sync::Arc::new(|model: &str| {
            (model.starts_with("gpt")).then_some(&PER_CHAR as &'static dyn TokenCounter)
        }))
    }

    #[test]
    fn a_provider_that_counts_otherwise_sends_the_model_back_to_the_prior() {
        let counters = counters();
        assert!(counters.for_model("gpt-4o").is_some());
        // Within 5% (or 32 tokens): the counter stays.
        assert!(!counters.check("gpt-4o", 10_000, 10_400));
        assert!(!counters.check("gpt-4o", 100, 130));
        // A usage of zeros counted nothing.
        assert!(!counters.check("gpt-4o", 10_000, 0));
        assert!(counters.for_model("gpt-4o").is_some());
        // A third more than counted: an endpoint with another tokenizer behind the name.
        assert!(counters.check("gpt-4o", 10_000, 13_300));
        assert!(counters.for_model("gpt-4o").is_none());
        // Other models keep theirs; a model without a counter is never dropped.
        assert!(counters.for_model("gpt-4.1").is_some());
        assert!(!counters.check("claude-sonnet-4-5", 10_000, 20_000));
    }

    /// The shadow engine that forecasts ④'s ranges for background summaries counts as the
    /// engine does: with a prior there, it would forecast ranges the compaction never takes.
    #[test]
    fn the_shadow_engine_counts_exactly_too() {
        use crate::{CascadeConfig, ContextManager, OfflineSummarizer};
        let manager =
            ContextManager::new(CascadeConfig::default()).with_token_counters(std::sync::Arc::new(
                |model: &str| (model == "gpt-4o").then_some(&PER_CHAR as &'static dyn TokenCounter),
            ));
        let body = br#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}"#;
        let conversation = crate::format::parse(body, None).unwrap();
        let shadow = manager.shadow(std::sync::Arc::new(OfflineSummarizer::default()));
        assert_eq!(manager.estimate(&conversation), 5);
        assert_eq!(
            shadow.estimate(&conversation),
            manager.estimate(&conversation)
        );
    }
}
