//! What every strategy receives (the config, the budget, the estimate in force) and the
//! bookkeeping that turns a before/after pair into a [`Step`].

use crate::config::{Budget, CascadeConfig};
use crate::conversation::Conversation;
use crate::estimate::{ClassCounts, Estimator, Weights};
use crate::report::{Step, Strategy};

/// The inputs every strategy shares.
#[derive(Debug, Clone, Copy)]
pub struct StepContext<'a> {
    pub config: &'a CascadeConfig,
    pub budget: Budget,
    pub estimator: Estimator,
}

impl<'a> StepContext<'a> {
    pub fn new(config: &'a CascadeConfig, budget: Budget, estimator: Estimator) -> Self {
        StepContext {
            config,
            budget,
            estimator,
        }
    }

    /// Tokens of the whole conversation.
    pub fn tokens(&self, conversation: &Conversation) -> u64 {
        self.estimator.tokens(conversation)
    }
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish(
        self,
        cx: &StepContext<'_>,
        conversation: &Conversation,
        strategy: Strategy,
        level: Option<u8>,
        messages_affected: usize,
        messages_removed: usize,
        chars_added: u64,
        target_tokens: u64,
        detail: String,
    ) -> Step {
        let tokens_after = cx.tokens(conversation);
        let chars_after = chars_of(conversation);
        let messages_added =
            (conversation.messages.len() + messages_removed).saturating_sub(self.messages);
        Step {
            strategy,
            level,
            messages_affected,
            messages_removed,
            messages_added,
            chars_removed: (self.chars + chars_added).saturating_sub(chars_after),
            chars_added,
            tokens_before: self.tokens,
            tokens_after,
            tokens_freed: self.tokens.saturating_sub(tokens_after),
            target_tokens,
            detail,
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
