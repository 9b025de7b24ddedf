//! What every strategy receives (the config, the budget, the estimate in force) and the
//! bookkeeping that turns a before/after pair into a [`Step`].

use crate::config::{Budget, CascadeConfig};
use crate::conversation::Conversation;
use crate::estimate::{ClassCounts, Estimator, Weights};
use crate::report::{Step, Strategy};

/// The inputs every strategy shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepContext<'a> {
    pub(crate) config: &'a CascadeConfig,
    pub(crate) budget: Budget,
    pub(crate) estimator: Estimator,
    /// The recovery attempt running the strategy (`None` in Layer 1): every step it
    /// writes carries it.
    pub(crate) attempt: Option<u8>,
    /// Recall is on: every removal's marker carries its handle and the step keeps what it
    /// removed (`Step::removed`) for the store.
    pub(crate) recall: bool,
}

impl<'a> StepContext<'a> {
    pub(crate) fn new(config: &'a CascadeConfig, budget: Budget, estimator: Estimator) -> Self {
        StepContext {
            config,
            budget,
            estimator,
            attempt: None,
            recall: false,
        }
    }

    /// The same context, for the steps of recovery attempt `attempt`.
    pub(crate) fn in_attempt(self, attempt: u8) -> Self {
        StepContext {
            attempt: Some(attempt),
            ..self
        }
    }

    /// Tokens of the whole conversation.
    pub(crate) fn tokens(&self, conversation: &Conversation) -> u64 {
        self.estimator.tokens(conversation)
    }
}

/// What a step is, apart from what it measured: its strategy, ⑤'s level and its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) strategy: Strategy,
    /// ⑤'s level (1–3), `None` for the other strategies.
    pub(crate) level: Option<u8>,
    /// The target of the step, in tokens.
    pub(crate) target: u64,
}

impl Stamp {
    /// A step of `strategy` (not ⑤) towards `target`.
    pub(crate) fn of(strategy: Strategy, target: u64) -> Self {
        Stamp {
            strategy,
            level: None,
            target,
        }
    }

    /// A step of ⑤ at `level` towards `target`.
    pub(crate) fn degraded(level: u8, target: u64) -> Self {
        Stamp {
            strategy: Strategy::Degrade,
            level: Some(level),
            target,
        }
    }
}

/// What a strategy counted as it changed the conversation (the rest follows from the
/// before/after totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Changes {
    /// Messages whose content changed or that were removed.
    pub(crate) messages_affected: usize,
    /// Messages removed.
    pub(crate) messages_removed: usize,
    /// Characters the strategy wrote (markers, notices, summaries).
    pub(crate) chars_added: u64,
}

/// A snapshot taken before a strategy runs, finished into a [`Step`] after it.
pub(crate) struct Measure {
    tokens: u64,
    chars: u64,
    messages: usize,
}

impl Measure {
    pub(crate) fn before(cx: &StepContext<'_>, conversation: &Conversation) -> Self {
        Measure {
            tokens: cx.tokens(conversation),
            chars: chars_of(conversation),
            messages: conversation.messages.len(),
        }
    }

    /// Builds the step. `chars_added` is what the strategy wrote (markers, notices,
    /// summaries); the characters removed follow from the totals, so the report accounts
    /// for every character.
    pub(crate) fn finish(
        self,
        cx: &StepContext<'_>,
        conversation: &Conversation,
        stamp: Stamp,
        changes: Changes,
        detail: String,
    ) -> Step {
        let Changes {
            messages_affected,
            messages_removed,
            chars_added,
        } = changes;
        let tokens_after = cx.tokens(conversation);
        let chars_after = chars_of(conversation);
        let messages_added =
            (conversation.messages.len() + messages_removed).saturating_sub(self.messages);
        Step {
            strategy: stamp.strategy,
            attempt: cx.attempt,
            level: stamp.level,
            messages_affected,
            messages_removed,
            messages_added,
            chars_removed: (self.chars + chars_added).saturating_sub(chars_after),
            chars_added,
            tokens_before: self.tokens,
            tokens_after,
            tokens_freed: self.tokens.saturating_sub(tokens_after),
            target_tokens: stamp.target,
            detail,
            trail: None,
            inside_current_turn: false,
            removed: Vec::new(),
        }
    }
}

/// Characters of the conversation's content (the prior counts them).
pub(crate) fn chars_of(conversation: &Conversation) -> u64 {
    let total = conversation
        .messages
        .iter()
        .fold(ClassCounts::default(), |acc, m| acc + m.counts());
    Weights::chars(&total)
}

/// Characters of a text.
pub(crate) fn chars_in(text: &str) -> u64 {
    Weights::chars(&ClassCounts::of_str(text))
}
