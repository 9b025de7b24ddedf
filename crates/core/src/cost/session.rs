//! A transcript replayed as an agent loop under one plan, every call priced (see the
//! [parent module](super) for the model).

use std::sync::{Arc, Mutex};

use super::{Billed, Prices};
use crate::config::{Budget, CascadeConfig};
use crate::conversation::{Conversation, Message, Role};
use crate::engine::ContextManager;
use crate::estimate::{CounterFor, Estimator};
use crate::offline::OfflineSummarizer;
use crate::prefix::common_prefix;
use crate::replay::call_points;
use crate::summarizer::{Summarizer, SummaryError, SummaryRequest};
use crate::{BoxFuture, PreparedSummaries};

/// What manages the context of the replayed session.
#[derive(Debug, Clone)]
pub enum Plan {
    /// The cascade with this configuration; `ahead`: ④'s summaries prepared between calls
    /// (`ContextManager::summarize_ahead`, as the proxy's background summaries do).
    Cascade {
        /// The cascade's settings.
        config: Box<CascadeConfig>,
        /// Whether summaries are prepared ahead.
        ahead: bool,
    },
    /// A client that compacts by itself: past its threshold it asks the model for a
    /// summary of the whole history and goes on from its system prompt and that summary.
    Client(ClientRule),
    /// The whole history every call (what a session that fits costs unmanaged).
    Unmanaged,
}

/// When a client compacts by itself, as its makers publish it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRule {
    /// Claude Code: at the window less 20,000 tokens kept for the summary's output and a
    /// 13,000-token buffer (167K of 200K, 83.5%); windows under 100K at 83.5%.
    ClaudeCode,
    /// Codex: at 90% of the window (`model_auto_compact_token_limit`'s default).
    Codex,
}

impl ClientRule {
    /// The request size at which the client compacts, for a window.
    pub fn threshold(self, window: u64) -> u64 {
        match self {
            ClientRule::ClaudeCode if window >= 100_000 => window - 33_000,
            ClientRule::ClaudeCode => window * 835 / 1000,
            ClientRule::Codex => window * 9 / 10,
        }
    }

    /// The client's name.
    pub fn name(self) -> &'static str {
        match self {
            ClientRule::ClaudeCode => "Claude Code's auto-compact",
            ClientRule::Codex => "Codex's auto-compact",
        }
    }
}

/// A session priced.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SessionCost {
    /// Calls of the agent loop.
    pub calls: usize,
    /// Calls whose request was over the window (sent anyway: the provider would refuse it).
    pub over_window: usize,
    /// Calls whose request extended the previous one (everything before it read from the
    /// cache).
    pub extending: usize,
    /// Tokens the agent's calls billed.
    pub agent: Billed,
    /// Summary calls (④'s summarizer, ahead or not; a client's compaction calls).
    pub summary_calls: usize,
    /// Tokens the summary calls billed.
    pub summaries: Billed,
    /// The whole session in US dollars.
    pub dollars: f64,
}

impl SessionCost {
    /// Input and output of every call, summaries included.
    pub fn total(&self) -> Billed {
        let mut total = self.agent;
        total += self.summaries;
        total
    }
}

/// Replays `transcript` under `plan` with windows of `budget`, counting with `counters`
/// (`None`: the prior) and pricing at `prices`. It does no I/O; the summaries are the
/// offline summarizer's, priced as if a model had written them.
pub async fn price_session(
    transcript: &Conversation,
    budget: Budget,
    plan: &Plan,
    counters: Option<CounterFor>,
    prices: &Prices,
) -> SessionCost {
    let counted = |manager: ContextManager| match &counters {
        Some(counters) => manager.with_token_counters(counters.clone()),
        None => manager,
    };
    let yardstick = counted(ContextManager::new(CascadeConfig::default()));
    let estimator = yardstick.estimator(transcript.model().unwrap_or(""));
    let counting = Arc::new(Counting::new(estimator));
    let mut cost = SessionCost::default();
    let mut sender = Sender::new(&yardstick, transcript);
    match plan {
        Plan::Cascade { config, ahead } => {
            let prepared = Arc::new(
                PreparedSummaries::new(counting.clone())
                    .with_gap_share(config.experimental.prepared_summary_gap),
            );
            let manager =
                counted(ContextManager::new((**config).clone())).with_summarizer(prepared.clone());
            for end in sender.points() {
                let mut request = sender.next_request(end);
                manager.prepare(&mut request, budget).await;
                sender.send(request, end, budget, &mut cost);
                if *ahead
                    && let Some(last) = sender.previous.as_ref()
                    && let Ok(Some(summary)) = manager
                        .summarize_ahead(last, budget, counting.clone())
                        .await
                {
                    prepared.add(summary);
                }
            }
        }
        Plan::Client(rule) => {
            let threshold = rule.threshold(budget.effective());
            for end in sender.points() {
                let mut request = sender.next_request(end);
                if yardstick.estimate(&request) >= threshold {
                    // The compaction call: the history as it stands (the previous request's
                    // prefix cached), the summary back.
                    let tokens = yardstick.estimate(&request);
                    let cached = sender.cached(&request);
                    let summary = counting.summary_of(&request.messages).await;
                    let output = estimator.text_tokens(&summary);
                    cost.summary_calls += 1;
                    cost.summaries += Billed::call(tokens, cached, output);
                    request.messages = compacted(&request.messages, summary);
                }
                sender.send(request, end, budget, &mut cost);
            }
        }
        Plan::Unmanaged => {
            for end in sender.points() {
                let request = sender.next_request(end);
                sender.send(request, end, budget, &mut cost);
            }
        }
    }
    let (calls, billed) = counting.taken();
    cost.summary_calls += calls;
    cost.summaries += billed;
    cost.dollars = cost.agent.dollars(prices) + cost.summaries.dollars(prices);
    cost
}

/// What a client keeps when it compacts by itself: its system messages and one user
/// message with the summary.
fn compacted(messages: &[Message], summary: String) -> Vec<Message> {
    let mut kept: Vec<Message> = (messages.iter())
        .filter(|m| m.role() == Role::System)
        .cloned()
        .collect();
    kept.push(Message::text(
        Role::User,
        format!(
            "This session is being continued from a previous conversation that ran out of \
             context. The summary below covers the earlier portion of the conversation.\n\n\
             {summary}"
        ),
    ));
    kept
}

/// The agent loop's side: what it carries from call to call, and the bill of each call.
struct Sender<'a> {
    yardstick: &'a ContextManager,
    transcript: &'a Conversation,
    /// The request sent last, as sent.
    previous: Option<Conversation>,
    /// Transcript messages already appended.
    next: usize,
}

impl<'a> Sender<'a> {
    fn new(yardstick: &'a ContextManager, transcript: &'a Conversation) -> Self {
        Sender {
            yardstick,
            transcript,
            previous: None,
            next: 0,
        }
    }

    fn points(&self) -> Vec<usize> {
        call_points(self.transcript.messages.iter().map(|m| m.role()))
    }

    /// The request of the call at `end`: what was sent last, plus the new messages.
    fn next_request(&mut self, end: usize) -> Conversation {
        let mut request = self.previous.clone().unwrap_or_else(|| Conversation {
            format: self.transcript.format,
            messages: Vec::new(),
            envelope: self.transcript.envelope.clone(),
        });
        let new = self.transcript.messages.get(self.next..end).unwrap_or(&[]);
        request.messages.extend(new.iter().cloned());
        self.next = end;
        request
    }

    /// Tokens of `request` the provider holds cached: its common prefix with the previous
    /// request sent.
    fn cached(&self, request: &Conversation) -> u64 {
        let Some(previous) = &self.previous else {
            return 0;
        };
        let from = common_prefix(previous, request);
        (self.yardstick.estimate(request))
            .saturating_sub(self.yardstick.estimate_from(request, from))
    }

    /// Sends `request` for the call at `end`: bills it and its reply (the transcript's
    /// assistant messages after the call point).
    fn send(&mut self, request: Conversation, end: usize, budget: Budget, cost: &mut SessionCost) {
        let tokens = self.yardstick.estimate(&request);
        let cached = self.cached(&request);
        let replies = (self.transcript.messages.get(end..).unwrap_or(&[]).iter())
            .take_while(|m| m.role() == Role::Assistant);
        let estimator = self.yardstick.estimator(request.model().unwrap_or(""));
        let output: u64 = replies.map(|m| estimator.message_tokens(m)).sum();
        cost.calls += 1;
        cost.over_window += usize::from(tokens > budget.effective());
        if self.previous.as_ref().is_some_and(|p| {
            common_prefix(p, &request) == p.messages.len() && !p.messages.is_empty()
        }) {
            cost.extending += 1;
        }
        cost.agent += Billed::call(tokens, cached, output);
        self.previous = Some(request);
    }
}

/// The offline summarizer, each call billed: the messages (or partial summaries) in, the
/// summary out. Summary calls share no prefix with the agent's requests: all input is
/// written (or plain input).
struct Counting {
    inner: OfflineSummarizer,
    estimator: Estimator,
    taken: Mutex<(usize, Billed)>,
}

impl Counting {
    fn new(estimator: Estimator) -> Self {
        Counting {
            inner: OfflineSummarizer::default(),
            estimator,
            taken: Mutex::default(),
        }
    }

    /// Calls and tokens billed so far.
    fn taken(&self) -> (usize, Billed) {
        *self.taken.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A whole history's summary (a client's compaction), not billed here.
    async fn summary_of(&self, messages: &[Message]) -> String {
        let request = SummaryRequest::summarize(messages.to_vec(), 20_000);
        self.inner.summarize_now(&request).unwrap_or_default()
    }
}

impl Summarizer for Counting {
    fn id(&self) -> String {
        format!("billed {}", self.inner.id())
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move {
            let input: u64 = match request {
                SummaryRequest::Summarize { messages, .. } => (messages.iter())
                    .map(|m| self.estimator.message_tokens(m))
                    .sum(),
                SummaryRequest::Merge { partials, .. } => (partials.iter())
                    .map(|p| self.estimator.text_tokens(p))
                    .sum(),
            };
            let summary = self.inner.summarize_now(request)?;
            let output = self.estimator.text_tokens(&summary);
            let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
            taken.0 += 1;
            taken.1 += Billed::call(input, 0, output);
            Ok(summary)
        })
    }
}
