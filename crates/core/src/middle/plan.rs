//! The plan of a summary (④, and ⑤'s first two levels): which range it replaces, the tail
//! it keeps, the room it has, and the trail it carries.

use super::replace::trail_of;
use super::split::{self, Fate, KeepRules, Split, Summaries};
use crate::conversation::Conversation;
use crate::estimate::ClassCounts;
use crate::step::StepContext;
use crate::summarizer::SummaryError;
use crate::trail::{Rendered, complete_summary, render_for};

/// Below this many tokens of room, a summary cannot say anything useful: the tail shrinks.
const MIN_SUMMARY_TOKENS: u64 = 200;

/// The range ④ (or ⑤) replaces, the tail it keeps and the room left for the summary.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub split: Split,
    pub rules: KeepRules,
    /// Tokens the replacement message may take so that the result stays at the target.
    pub room: u64,
    /// Tokens of everything the replacement stands for.
    pub replaced_tokens: u64,
    pub target: u64,
    /// The trail of the replaced range, which the summary's sections 3, 4 and 6 carry.
    pub trail: Rendered,
    /// Tokens the trail takes of the room.
    pub trail_tokens: u64,
}

impl Plan {
    /// The trail, extracted from what the plan replaces and rendered within its share of
    /// the room (at most half: the summary needs the rest).
    fn with_trail(mut self, conversation: &Conversation, cx: &StepContext<'_>) -> Plan {
        let config = &cx.config.trail;
        let trail = trail_of(conversation, &self.split, cx);
        let room = (self.room / 2).min(self.replaced_tokens / 2);
        self.trail = render_for(&trail, config, cx.budget.effective(), room, &cx.estimator);
        let text = self.trail.text();
        self.trail_tokens = if text.is_empty() {
            0
        } else {
            cx.estimator.text_tokens(&text)
        };
        self
    }

    /// A summary body completed with the trail (SPEC: sections 3, 4 and 6 always carry it).
    pub(crate) fn complete(&self, body: &str) -> String {
        complete_summary(body, &self.trail)
    }
}

/// Why ④ failed, with the chunk summaries that did succeed (for ⑤ level 1).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub error: SummaryError,
    /// One entry per chunk, in order (empty when the input was not chunked).
    pub chunks: Vec<Option<String>>,
}

/// Chooses the longest tail, at most `max_recent` messages, that leaves room for a summary
/// within `target` tokens. When even no tail leaves that room (the irreducible part is
/// large), the target is relaxed to the preemptive threshold, then to the whole budget E:
/// a summary over the target beats none within E. (Landing under the preemptive threshold
/// keeps a second compaction from firing again: compacting is idempotent.) `None` when there is nothing new to replace.
pub(crate) fn plan(
    conversation: &Conversation,
    cx: &StepContext<'_>,
    max_recent: usize,
    target: u64,
    summaries: Summaries,
) -> Option<Plan> {
    let starts = split::exchange_starts(conversation);
    let protected = split::irreducible(conversation, &starts);
    let tokens: Vec<f64> = conversation
        .messages
        .iter()
        .map(|m| prior(cx, &m.counts()))
        .collect();
    let tools = conversation
        .tools()
        .map_or(0.0, |t| prior(cx, &ClassCounts::of_json(t)));
    let mut fallback = None;
    let relaxed = cx
        .budget
        .share(cx.config.recovery.preemptive_ratio)
        .max(target);
    for target in [target, relaxed, cx.budget.effective().max(target)] {
        for recent in (0..=max_recent).rev() {
            let rules = KeepRules { recent, summaries };
            let split = split::split(conversation, &starts, &protected, rules);
            if !split.is_effective() {
                continue;
            }
            // The notices that keep turns alternating across later gaps stay beside it.
            let bridges: f64 = (split.bridge_messages().iter())
                .map(|m| cx.estimator.message_tokens(m) as f64)
                .sum();
            let (mut kept, mut replaced) = (tools + bridges, 0.0);
            for (t, fate) in tokens.iter().zip(&split.fates) {
                match fate {
                    Fate::Keep => kept += t,
                    _ => replaced += t,
                }
            }
            let room = (target as f64 - kept.ceil()).max(0.0) as u64;
            let plan = Plan {
                split,
                rules,
                room,
                replaced_tokens: replaced.ceil() as u64,
                target,
                trail: Rendered::default(),
                trail_tokens: 0,
            };
            if room >= MIN_SUMMARY_TOKENS {
                return Some(plan.with_trail(conversation, cx));
            }
            fallback.get_or_insert(plan);
        }
    }
    fallback.map(|plan| plan.with_trail(conversation, cx))
}

fn prior(cx: &StepContext<'_>, counts: &ClassCounts) -> f64 {
    cx.estimator.weights.prior(counts) * cx.estimator.multiplier
}
