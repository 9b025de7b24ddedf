//! Summaries prepared ahead (`ContextManager::summarize_ahead` and `PreparedSummaries`):
//! what is prepared between turns is exactly what the synchronous ④ asks for when the
//! next request comes as forecast (no summarizer call then, the same bytes out), and a
//! history that went another way falls back to the real summarizer.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use context_cascade::format::{self, WriteOptions};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{
    BoxFuture, Budget, CascadeConfig, ContextManager, Conversation, OfflineSummarizer,
    PreparedSummaries, Strategy,
};
use serde_json::{Value, json};

const BUDGET: Budget = Budget {
    window: 10_000,
    reserve: 0,
};

/// The offline summarizer, counting its calls.
#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
    offline: OfflineSummarizer,
}

impl Counting {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Summarizer for Counting {
    fn id(&self) -> String {
        self.offline.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.offline.summarize(request)
    }
}

/// Exchange `i`: a call of a tool ② may not compact and its result, the same size for
/// every `i` (only digits change).
fn exchange(i: usize) -> [Value; 2] {
    let id = format!("call_{i:04}");
    let output = format!("record {i:04}: status nominal, checksum {:08}\n", i * 7919).repeat(72);
    [
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "lookup", "arguments": format!("{{\"record\":{i:04}}}")}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": output}),
    ]
}

/// A task whose first message takes most of the window (no strategy may remove it, so ③
/// cannot get under its target and ④ is needed), then `exchanges` exchanges.
fn session(exchanges: usize) -> Conversation {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful agent."}),
        json!({"role": "user", "content": "Audit these records. ".repeat(800)}),
    ];
    for i in 0..exchanges {
        messages.extend(exchange(i));
    }
    let body = json!({"model": "gpt-4o", "messages": messages});
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

/// The largest session under the preemptive threshold, and the next one (one exchange
/// more), which crosses it.
fn before_and_after(manager: &ContextManager) -> (Conversation, Conversation) {
    let threshold = BUDGET.share(manager.config().recovery.preemptive_ratio);
    let mut k = 1;
    while manager.estimate(&session(k + 1)) <= threshold {
        k += 1;
    }
    (session(k), session(k + 1))
}

fn bytes(conversation: &Conversation) -> Vec<u8> {
    format::to_vec(conversation, WriteOptions::default()).unwrap()
}

#[test]
fn the_prepared_summary_is_what_the_synchronous_run_asks_for() {
    let plain_inner = Arc::new(Counting::default());
    let plain = ContextManager::new(CascadeConfig::default()).with_summarizer(plain_inner.clone());
    let inner = Arc::new(Counting::default());
    let prepared = Arc::new(PreparedSummaries::new(inner.clone()));
    let manager = ContextManager::new(CascadeConfig::default()).with_summarizer(prepared.clone());
    let (now, next) = before_and_after(&manager);
    assert!(
        manager.estimate(&now) > BUDGET.share(manager.config().background.summary_ratio),
        "the test session must be past the pre-threshold"
    );

    let summary = pollster::block_on(manager.summarize_ahead(&now, BUDGET, prepared.inner()))
        .unwrap()
        .expect("a summary is prepared");
    assert_eq!(inner.calls(), summary.len());
    prepared.add(summary);
    let calls_ahead = inner.calls();

    // The next request, with the prepared summaries: no call at request time.
    let mut with = next.clone();
    let report = pollster::block_on(manager.prepare(&mut with, BUDGET));
    assert!(
        (report.steps.iter()).any(|s| s.strategy == Strategy::Summarize),
        "④ ran: {}",
        report.summary_line()
    );
    assert_eq!(
        inner.calls(),
        calls_ahead,
        "no summarizer call at request time"
    );

    // The same request without them: the same bytes, from a summarizer call (as many as
    // were served: several forecasts were prepared, one came true).
    let mut without = next.clone();
    let plain_report = pollster::block_on(plain.prepare(&mut without, BUDGET));
    assert!(plain_inner.calls() > 0);
    assert_eq!(prepared.served() as usize, plain_inner.calls());
    assert_eq!(bytes(&with), bytes(&without));
    assert_eq!(report.summary_line(), plain_report.summary_line());
}

#[test]
fn a_history_that_went_another_way_falls_back_to_the_summarizer() {
    let inner = Arc::new(Counting::default());
    let prepared = Arc::new(PreparedSummaries::new(inner.clone()));
    let manager = ContextManager::new(CascadeConfig::default()).with_summarizer(prepared.clone());
    let plain = ContextManager::new(CascadeConfig::default());
    let (now, next) = before_and_after(&manager);
    let summary = pollster::block_on(manager.summarize_ahead(&now, BUDGET, prepared.inner()))
        .unwrap()
        .expect("a summary is prepared");
    prepared.add(summary);
    let calls_ahead = inner.calls();

    // The client rewrote an early tool result (to one of the same size) that ④ removes
    // (exchange 0 is the current turn's first answer, kept): not what was prepared.
    let mut body: Value = serde_json::from_slice(&bytes(&next)).unwrap();
    body["messages"][5]["content"] = body["messages"][7]["content"].clone();
    let diverged = format::parse(body.to_string().as_bytes(), None).unwrap();
    let mut with = diverged.clone();
    pollster::block_on(manager.prepare(&mut with, BUDGET));
    assert!(inner.calls() > calls_ahead, "the real summarizer was asked");
    assert_eq!(prepared.served(), 0);
    let mut without = diverged;
    pollster::block_on(plain.prepare(&mut without, BUDGET));
    assert_eq!(bytes(&with), bytes(&without));
}

#[test]
fn nothing_is_prepared_below_the_pre_threshold() {
    let manager = ContextManager::new(CascadeConfig::default());
    let inner = Arc::new(Counting::default());
    let small = session(1);
    assert!(manager.estimate(&small) <= BUDGET.share(0.8));
    let ahead = pollster::block_on(manager.summarize_ahead(&small, BUDGET, inner.clone()));
    assert_eq!(ahead, Ok(None));
    assert_eq!(inner.calls(), 0);
}

/// `prepared_summary_gap`: a request for a range that goes past a prepared one by at most
/// that share is answered with the prepared summary (a stand-in); further, or with the gap
/// at 0, the real summarizer is asked.
#[test]
fn a_prepared_summary_stands_in_for_a_slightly_longer_range_when_allowed() {
    let inner = Arc::new(Counting::default());
    let manager = ContextManager::new(CascadeConfig::default());
    let (now, _) = before_and_after(&manager);
    let summary = pollster::block_on(manager.summarize_ahead(&now, BUDGET, inner.clone()))
        .unwrap()
        .expect("a summary is prepared");
    let made_for = (summary.requests())
        .find(|r| !r.is_merge() && r.messages().len() > 2)
        .cloned()
        .expect("a request with messages");
    let longer = |extra: usize| {
        let mut messages = made_for.messages().to_vec();
        messages.extend(
            session(extra + 1).messages[2..]
                .iter()
                .take(2 * extra)
                .cloned(),
        );
        SummaryRequest::Summarize {
            messages,
            previous_summary: made_for.previous_summary().map(str::to_owned),
            max_tokens: made_for.max_tokens(),
        }
    };
    let exact = Arc::new(PreparedSummaries::new(inner.clone()));
    let tolerant = Arc::new(PreparedSummaries::new(inner.clone()).with_gap_share(0.5));
    exact.add(summary.clone());
    tolerant.add(summary.clone());
    let calls = inner.calls();

    // One exchange past the prepared range: a stand-in when allowed.
    let answer = pollster::block_on(tolerant.summarize(&longer(1))).unwrap();
    assert_eq!(Some(answer.as_str()), summary.answer(&made_for));
    assert_eq!((tolerant.served(), tolerant.stood_in()), (1, 1));
    assert_eq!(inner.calls(), calls, "no summarizer call");
    // The exact range itself is served as before, and is no stand-in.
    pollster::block_on(tolerant.summarize(&made_for)).unwrap();
    assert_eq!((tolerant.served(), tolerant.stood_in()), (2, 1));

    // Without the gap allowed, the summarizer is asked.
    pollster::block_on(exact.summarize(&longer(1))).unwrap();
    assert_eq!(inner.calls(), calls + 1);
    assert_eq!(exact.served(), 0);

    // A gap larger than half the range: the summarizer is asked too.
    let far = made_for.messages().len();
    pollster::block_on(tolerant.summarize(&longer(far))).unwrap();
    assert_eq!(inner.calls(), calls + 2);
    assert_eq!(tolerant.stood_in(), 1);
}
