//! Replaying a recorded transcript as the agent loop that produced it: where the agent
//! called the model, what it sent each time, and how often the request kept the previous
//! one as its prefix (a provider's prompt cache only hits then). The CLI's `cascade
//! replay`, the benchmark's cost curves and the prompt-cache tests all measure through
//! this module, so that their figures mean the same thing.
//!
//! # Where an agent calls the model
//!
//! An agent loop calls the model, appends the reply, runs the tools it asked for or waits
//! for the user, appends what came back, and calls again. So **a call point is the end of
//! every run of non-assistant messages** (user messages, tool results, system messages,
//! in any mix) that is followed by an assistant reply or ends the transcript: the
//! request is `messages[..end]`.
//!
//! - Several assistant messages in a row are one reply written as several messages: one
//!   call.
//! - A batch of tool results followed by a user message is one call: the model replied to
//!   neither separately (the transcript would show that reply).
//! - A transcript that ends with user messages or tool results ends with one more call,
//!   the one the agent was about to make (or made without recording its reply).
//! - A transcript that starts with an assistant message has no call before it.
//!
//! # Prefix stability
//!
//! A request **extends** the previous one when the previous request's parts, unchanged and
//! in order, begin it ([`extends`]). For a [`Conversation`] the parts are its messages and
//! its other fields must be equal; on the wire they are the message bytes and the other
//! fields' bytes. The **prefix stability** of a session is the share of its calls, after
//! the first, whose request extends the previous one ([`PrefixStability`]).
//!
//! # Tokens re-billed uncached
//!
//! A provider bills the part of a request after its longest cached prefix at the full
//! price. A call whose request does not extend the previous one **re-bills** the tokens
//! of its request from the first message that differs from the previous request to the
//! end: `tokens(current.messages[p..])`, where `p` = [`common_prefix`] (how many messages
//! at the start of both are equal, in order; 0 when the fields besides the messages
//! differ, since they come first on the wire), estimated with the estimate in force for
//! the call. A call that extends the previous request re-bills nothing (its new messages
//! are billed uncached by any agent, with or without the cascade); a call that does not
//! counts its own new messages too, as they come after the change. The sum over a session
//! is [`Replay::rebilled_tokens`]; a prepared request reports the same figure for its own
//! change as [`Report::uncached_tokens`].
//!
//! # The replay
//!
//! [`replay`] carries the conversation forward as a library user does: before each call
//! the new messages are appended to what was sent last time (already compacted by earlier
//! calls), [`ContextManager::prepare`] runs on it, and the result is what is sent and
//! carried on. It is async only because `prepare` is; it does no I/O, so any executor (for
//! instance `pollster::block_on`) runs it to the end.
//!
//! ```
//! use context_cascade::{Budget, CascadeConfig, ContextManager, format, replay};
//!
//! let body = serde_json::json!({"model": "gpt-4o", "messages": [
//!     {"role": "user", "content": "list the files"},
//!     {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
//!         "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
//!     {"role": "tool", "tool_call_id": "1", "content": "Cargo.toml\nsrc"},
//!     {"role": "assistant", "content": "Two entries."},
//!     {"role": "user", "content": "thanks"}]});
//! let transcript = format::parse(body.to_string().as_bytes(), None)?;
//! let roles = transcript.messages.iter().map(|m| m.role());
//! assert_eq!(replay::call_points(roles), vec![1, 3, 5]);
//!
//! let manager = ContextManager::new(CascadeConfig::default());
//! let budget = Budget::new(8_000, 0);
//! let mut sent = Vec::new();
//! let run = pollster::block_on(replay::replay(&transcript, &manager, budget, |call, request| {
//!     sent.push((call.end, request.messages.len()));
//! }));
//! assert_eq!(sent, vec![(1, 1), (3, 3), (5, 5)]);
//! assert_eq!((run.stability.compared, run.stability.extending), (2, 2));
//! # Ok::<(), context_cascade::ParseError>(())
//! ```

use crate::config::Budget;
use crate::conversation::{Conversation, Role};
use crate::engine::ContextManager;
use crate::report::Report;

pub use crate::prefix::{common_prefix, conversation_extends, extends, matching_prefix};

/// The call points of a transcript whose messages have `roles`, in order: for each call,
/// how many messages of the transcript the agent had when it called (its request is
/// `messages[..end]`). See the [module documentation](self) for the rule.
pub fn call_points(roles: impl IntoIterator<Item = Role>) -> Vec<usize> {
    let mut points = Vec::new();
    // Whether the messages read since the last assistant reply (or the start) are waiting
    // for a reply.
    let mut waiting = false;
    let mut len = 0;
    for role in roles {
        if role == Role::Assistant {
            if waiting {
                points.push(len);
            }
            waiting = false;
        } else {
            waiting = true;
        }
        len += 1;
    }
    if waiting {
        points.push(len);
    }
    points
}

/// How many calls, after the first, sent a request extending the previous one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefixStability {
    /// Calls that had a previous request to extend (every call but the first).
    pub compared: usize,
    /// Of those, the calls whose request extended the previous one.
    pub extending: usize,
}

impl PrefixStability {
    /// The stability of a sequence of requests, each given as its parts.
    pub fn of<T: PartialEq, R: AsRef<[T]>>(requests: impl IntoIterator<Item = R>) -> Self {
        let mut stability = PrefixStability::default();
        let mut previous: Option<R> = None;
        for request in requests {
            if let Some(before) = &previous {
                stability.record(extends(before.as_ref(), request.as_ref()));
            }
            previous = Some(request);
        }
        stability
    }

    /// Counts one call after the first: whether its request extended the previous one.
    pub fn record(&mut self, extended: bool) {
        self.compared += 1;
        if extended {
            self.extending += 1;
        }
    }

    /// `extending / compared`; 1 when there was nothing to compare (no call broke a
    /// prefix).
    pub fn share(&self) -> f64 {
        if self.compared == 0 {
            1.0
        } else {
            self.extending as f64 / self.compared as f64
        }
    }
}

/// One call of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// 1-based call number.
    pub number: usize,
    /// Messages of the transcript the agent had when it called (the call point); the
    /// assistant reply, when the transcript records one, is `messages[end]`.
    pub end: usize,
    /// What [`ContextManager::prepare`] did to the request before it was sent.
    pub report: Report,
    /// Whether the request sent extends the previous request sent; `None` on the first
    /// call.
    pub extends_previous: Option<bool>,
    /// Tokens of the request sent from its first message that differs from the previous
    /// request sent; 0 when it extends it or on the first call (see the [module
    /// documentation](self#tokens-re-billed-uncached)).
    pub rebilled_tokens: u64,
}

/// A whole replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The calls, in order.
    pub calls: Vec<Call>,
    /// Prefix stability of the requests sent.
    pub stability: PrefixStability,
    /// Tokens re-billed uncached over the session: the sum of the calls'
    /// [`Call::rebilled_tokens`].
    pub rebilled_tokens: u64,
}

/// Replays `transcript` as an agent loop using `manager` (see the [module
/// documentation](self)). `on_call` runs after each call's `prepare` with the call and the
/// request as sent, before the next call: the place to count the request or to
/// [`ContextManager::observe`] what a provider would have reported for it.
pub async fn replay(
    transcript: &Conversation,
    manager: &ContextManager,
    budget: Budget,
    mut on_call: impl FnMut(&Call, &Conversation),
) -> Replay {
    let mut carried = Conversation {
        format: transcript.format,
        messages: Vec::new(),
        envelope: transcript.envelope.clone(),
    };
    let mut previous: Option<Conversation> = None;
    let mut stability = PrefixStability::default();
    let mut calls = Vec::new();
    let mut rebilled = 0;
    let mut next = 0;
    let points = call_points(transcript.messages.iter().map(|m| m.role()));
    for (n, end) in points.into_iter().enumerate() {
        carried
            .messages
            .extend(transcript.messages[next..end].iter().cloned());
        next = end;
        let report = manager.prepare(&mut carried, budget).await;
        let extends_previous = previous
            .as_ref()
            .map(|before| conversation_extends(before, &carried));
        if let Some(extended) = extends_previous {
            stability.record(extended);
        }
        let rebilled_tokens = match &previous {
            Some(before) if extends_previous == Some(false) => {
                let from = common_prefix(before, &carried);
                manager.estimate_from(&carried, from)
            }
            _ => 0,
        };
        rebilled += rebilled_tokens;
        let call = Call {
            number: n + 1,
            end,
            report,
            extends_previous,
            rebilled_tokens,
        };
        on_call(&call, &carried);
        calls.push(call);
        previous = Some(carried.clone());
    }
    Replay {
        calls,
        stability,
        rebilled_tokens: rebilled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CascadeConfig;
    use crate::format;
    use Role::{Assistant as A, System as S, Tool as T, User as U};

    #[test]
    fn a_call_ends_each_run_of_inputs_before_a_reply_or_at_the_end() {
        assert_eq!(call_points([S, U, A, T, T, A, U]), vec![2, 5, 7]);
        // Tool results then a user message: one call. Two assistant messages: one reply.
        assert_eq!(call_points([U, A, T, U, A, A, U, A]), vec![1, 4, 7]);
        // Nothing before the first reply: no call; nothing after the last: no call.
        assert_eq!(call_points([A, U, A]), vec![2]);
        assert_eq!(call_points([]), Vec::<usize>::new());
        assert_eq!(call_points([S]), vec![1]);
    }

    #[test]
    fn stability_counts_calls_after_the_first() {
        let requests: [&[u8]; 4] = [b"a", b"ab", b"xb", b"xbc"];
        let s = PrefixStability::of(requests);
        assert_eq!((s.compared, s.extending), (3, 2));
        assert!((s.share() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(PrefixStability::of([b"only"]).share(), 1.0);
        assert!(extends::<u8>(b"", b"a") && !extends::<u8>(b"ab", b"a"));
    }

    fn tool_session(turns: usize, output_chars: usize) -> Conversation {
        let body = cascade_test_support::tool_session_body(turns, output_chars);
        format::parse_value(body, None).expect("valid test body")
    }

    #[test]
    fn the_replay_carries_the_prepared_request_forward() {
        // Ends with a tool result: the last call is the one the agent was about to make.
        let transcript = tool_session(30, 4_000);
        let manager = ContextManager::new(CascadeConfig::default());
        let budget = Budget::new(8_000, 0);
        let mut sizes = Vec::new();
        let run = pollster::block_on(replay(&transcript, &manager, budget, |call, sent| {
            sizes.push((call.number, call.end, manager.estimate(sent)));
        }));
        assert_eq!(run.calls.len(), 31);
        assert_eq!(sizes.len(), 31);
        assert_eq!(sizes[0], (1, 2, sizes[0].2));
        assert_eq!(run.calls[30].end, transcript.messages.len());
        assert!(sizes.iter().all(|&(_, _, t)| t <= budget.window));
        assert_eq!(run.calls[0].extends_previous, None);
        assert_eq!(run.stability.compared, 30);
        let compacted = run.calls.iter().filter(|c| !c.report.steps.is_empty());
        assert!(compacted.count() > 0);
        // A call on which the cascade did nothing sends the previous request plus the new
        // messages; only a call that compacted rewrites the prefix.
        for call in &run.calls[1..] {
            if call.report.steps.is_empty() {
                assert_eq!(call.extends_previous, Some(true), "call {}", call.number);
            }
        }
        let extending = run
            .calls
            .iter()
            .filter(|c| c.extends_previous == Some(true));
        assert_eq!(extending.count(), run.stability.extending);
        assert!(run.stability.extending < 30);
    }

    #[test]
    fn with_room_to_spare_every_request_extends_the_previous_one() {
        let transcript = tool_session(5, 100);
        let manager = ContextManager::new(CascadeConfig::default());
        let run = pollster::block_on(replay(
            &transcript,
            &manager,
            Budget::new(1_000_000, 0),
            |_, _| {},
        ));
        assert_eq!(run.calls.len(), 6);
        assert_eq!(
            run.stability,
            PrefixStability {
                compared: 5,
                extending: 5
            }
        );
        assert!(run.calls.iter().all(|c| c.report.steps.is_empty()));
    }
}
