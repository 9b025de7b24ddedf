//! Each fixture parsed once, with per-message class counts and exact o200k_base counts and
//! their prefix sums: what a request `messages[..i]` costs, for every `i`, in O(1).

use context_cascade::estimate::exact::ExactCounter;
use context_cascade::estimate::{ClassCounts, Weights};
use context_cascade::{Conversation, format, replay};
use serde_json::Value;

use crate::inputs::{self, Fixture};

/// One fixture, measured.
pub struct Measured {
    pub name: String,
    pub conversation: Conversation,
    /// `cum_counts[i]`: class counts of `messages[..i]`.
    pub cum_counts: Vec<ClassCounts>,
    /// `cum_exact[i]`: exact o200k_base tokens of `messages[..i]` (4 per message included,
    /// the same fixed cost the prior charges).
    pub cum_exact: Vec<u64>,
    /// The agent's calls, as `context_cascade::replay::call_points` finds them: for each, the
    /// `i` such that the request `messages[..i]` was sent.
    pub calls: Vec<usize>,
    /// Claude Code compaction points: (message_index, preTokens reported by the provider).
    pub compactions: Vec<(usize, u64)>,
    /// The model the session used most (`meta.models`), or `meta.model`.
    pub session_model: String,
}

impl Measured {
    /// Parses and counts a fixture.
    pub fn new(fixture: &Fixture, counter: &ExactCounter) -> Result<Measured, String> {
        let body = inputs::request(fixture.messages.clone());
        let conversation =
            format::parse_value(body, None).map_err(|e| format!("{}: {e}", fixture.name))?;
        let mut cum_counts = vec![ClassCounts::default()];
        let mut cum_exact = vec![0u64];
        let calls = replay::call_points(conversation.messages.iter().map(|m| m.role()));
        for (i, message) in conversation.messages.iter().enumerate() {
            let mut one = Conversation::new(conversation.format);
            one.messages.push(message.clone());
            let exact = counter.count_conversation(&one) as u64;
            cum_counts.push(cum_counts[i] + message.counts());
            cum_exact.push(cum_exact[i] + exact);
        }
        let compactions = fixture
            .meta
            .get("compactions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let index = c.get("message_index")?.as_u64()? as usize;
                let pre = c.pointer("/compactMetadata/preTokens")?.as_u64()?;
                Some((index, pre))
            })
            .collect();
        let session_model = fixture
            .meta
            .get("models")
            .and_then(Value::as_object)
            .and_then(|models| {
                models
                    .iter()
                    .max_by_key(|(_, n)| n.as_u64().unwrap_or(0))
                    .map(|(k, _)| k.clone())
            })
            .or_else(|| {
                fixture
                    .meta
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        Ok(Measured {
            session_model,
            name: fixture.name.clone(),
            conversation,
            cum_counts,
            cum_exact,
            calls,
            compactions,
        })
    }

    /// Messages in the transcript.
    pub fn len(&self) -> usize {
        self.conversation.messages.len()
    }

    /// The prior of `messages[..i]` under some weights.
    pub fn prior(&self, weights: &Weights, i: usize) -> f64 {
        weights.prior(&self.cum_counts[i])
    }

    /// chars/4 of `messages[..i]`: the rule of thumb many agents use.
    pub fn chars_over_4(&self, i: usize) -> f64 {
        Weights::chars(&self.cum_counts[i]) as f64 / 4.0
    }
}
