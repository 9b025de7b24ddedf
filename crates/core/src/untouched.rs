//! Would the cascade change anything? The one answer.
//!
//! Most calls of an agent need nothing: the request is under every line the cascade draws.
//! Callers that skip work when nothing would run (the engine itself, the proxy's fast path
//! that never parses such a request, the CLI deciding whether exact counts can matter) ask
//! the same question, so it is answered once, here: no tool result over ①'s share of E,
//! and the whole at most ②'s headroom and the preemptive threshold. Under those lines ①
//! cuts nothing, ② does not start and Layer 2/3 does not fire: the request goes out as it
//! came.

use crate::config::{Budget, CascadeConfig};
use crate::conversation::Conversation;
use crate::engine::{ContextManager, model_of};
use crate::estimate::{ClassCounts, Estimator};

/// The two numbers that decide whether any strategy runs on a request, as the engine
/// estimates them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// The estimate of the whole request, in tokens.
    pub tokens: u64,
    /// The estimate of the largest tool result ① would look at, in tokens (pinned
    /// messages are never cut; a message whose whole estimate is smaller counts as that).
    pub largest_result: u64,
}

impl Load {
    /// The load of `conversation` under `estimator`.
    pub fn of(conversation: &Conversation, estimator: &Estimator) -> Load {
        Load {
            tokens: estimator.tokens(conversation),
            largest_result: largest_result(conversation, estimator),
        }
    }
}

/// The largest tool result ① looks at: over unpinned messages, the smaller of the
/// message's estimate and its largest result's (① checks both). A message whose estimate
/// is at most the largest found so far cannot raise it, so most results are never
/// recounted.
fn largest_result(conversation: &Conversation, estimator: &Estimator) -> u64 {
    let mut largest = 0;
    for message in conversation.messages.iter().filter(|m| !m.is_pinned()) {
        let whole = estimator.message_tokens(message);
        if whole <= largest {
            continue;
        }
        let result = (message.tool_results())
            .map(|r| estimator.tokens_of(&ClassCounts::of_blocks(&r.content)))
            .max()
            .unwrap_or(0);
        largest = largest.max(result.min(whole));
    }
    largest
}

impl CascadeConfig {
    /// Whether the cascade leaves a request of `load` as it is within `budget`: no tool
    /// result over ①'s share of E, the whole at most ②'s headroom and the preemptive
    /// threshold. A caller that keeps its own numbers (the proxy's fast path) asks this;
    /// one with a conversation asks [`ContextManager::would_change`].
    pub fn leaves_untouched(&self, load: Load, budget: Budget) -> bool {
        load.largest_result <= budget.share(self.layer1.single_tool_result_share)
            && load.tokens <= budget.share(self.layer1.headroom_ratio)
            && load.tokens <= budget.share(self.recovery.preemptive_ratio)
    }
}

impl ContextManager {
    /// Whether a strategy would run on `conversation` within `budget` in
    /// [`ContextManager::prepare`] (or `compact`). `false`: it goes out exactly as it came;
    /// `true`: a strategy runs (it may still find nothing it may take).
    ///
    /// ```
    /// use context_cascade::{Budget, CascadeConfig, ContextManager, format};
    ///
    /// let text = "hello ".repeat(1_000);
    /// let body = serde_json::json!({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]});
    /// let conversation = format::parse(body.to_string().as_bytes(), None)?;
    /// let manager = ContextManager::new(CascadeConfig::default());
    /// assert!(!manager.would_change(&conversation, Budget::new(8_000, 0)));
    /// assert!(manager.would_change(&conversation, Budget::new(1_000, 0)));
    /// # Ok::<(), context_cascade::ParseError>(())
    /// ```
    pub fn would_change(&self, conversation: &Conversation, budget: Budget) -> bool {
        let estimator = self.estimator(model_of(conversation));
        let tokens = estimator.tokens(conversation);
        // The whole alone decides most requests: no result is counted then.
        let whole = Load {
            tokens,
            largest_result: 0,
        };
        if !self.config().leaves_untouched(whole, budget) {
            return true;
        }
        let load = Load {
            tokens,
            largest_result: largest_result(conversation, &estimator),
        };
        !self.config().leaves_untouched(load, budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `would_change` says exactly whether `prepare` changes a request: over the transcript
    /// fixtures, in windows from where nothing runs to where everything does.
    #[test]
    fn the_answer_is_what_prepare_does() {
        let manager = ContextManager::new(CascadeConfig::default());
        let (mut untouched, mut changed) = (0, 0);
        for (name, conversation) in crate::trail::fixture_tests::fixtures().into_iter().take(8) {
            let tokens = manager.estimate(&conversation);
            for window in [tokens / 2, tokens + tokens / 4, tokens * 2, tokens * 4] {
                let budget = Budget::new(window, 0);
                let mut prepared = conversation.clone();
                let report = pollster::block_on(manager.prepare(&mut prepared, budget));
                let would = manager.would_change(&conversation, budget);
                assert_eq!(would, !report.steps.is_empty(), "{name} in {window}");
                assert_eq!(report.steps.is_empty(), prepared == conversation, "{name}");
                if would { changed += 1 } else { untouched += 1 }
            }
        }
        assert!(
            untouched > 0 && changed > 0,
            "{untouched} untouched, {changed} changed"
        );
    }

    #[test]
    fn one_large_result_alone_is_a_change() {
        let config = CascadeConfig::default();
        let budget = Budget::new(10_000, 0);
        let quiet = Load {
            tokens: 6_000,
            largest_result: 4_000,
        };
        assert!(config.leaves_untouched(quiet, budget));
        let large = Load {
            largest_result: 5_001,
            ..quiet
        };
        assert!(!config.leaves_untouched(large, budget));
        let full = Load {
            tokens: 7_501,
            ..quiet
        };
        assert!(!config.leaves_untouched(full, budget));
    }
}
