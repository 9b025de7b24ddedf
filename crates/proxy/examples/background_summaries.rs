//! Measure: the latency the compaction turn adds when ④ needs an LLM summary that takes
//! 2 s, with background summaries off and on, in one run.
//!
//! A recorded session (the Claude Code one in `examples/` by default) is replayed turn by
//! turn through the proxy, as the agent sent it: each call point's request is the
//! transcript up to there. The scripted upstream answers chat requests at once and summary
//! requests (the summarizer's model) after `--summary-ms`, so a turn's latency is what the
//! proxy adds. Between turns the replay waits for the proxy's background jobs (at most
//! 10 s): an agent's own turn — its model's answer, then the tools — takes longer than one
//! summary. The window is the one, of a few candidates, where ④ runs most often in the
//! library's replay of the same session (or `--window`).
//!
//! ```text
//! cargo run --release -p cascade-proxy --example background_summaries \
//!     [-- --fixture examples/claude-code-session.json --window 24000 --summary-ms 2000]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a development tool: a failure ends the run

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::response::{IntoResponse, Response};
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, Provider, ProxyConfig, REPORT_HEADER, SummarizerSpec, serve_state};
use cascade_test_support::upstream::{Answer, start_async};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{
    BoxFuture, Budget, CascadeConfig, ContextManager, Conversation, PreparedSummaries, Role,
    Strategy, format, replay,
};
use serde_json::{Value, json};

const SUMMARY_MODEL: &str = "summary-model";
const CANDIDATE_WINDOWS: [u64; 5] = [16_000, 24_000, 32_000, 48_000, 64_000];

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

fn nine_sections() -> String {
    (context_cascade::SUMMARY_SECTIONS.iter().enumerate())
        .map(|(i, title)| format!("## {}. {title}\n- noted", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

fn answer(text: &str) -> Response {
    axum::Json(
        json!({"choices": [{"message": {"role": "assistant", "content": text},
        "finish_reason": "stop"}]}),
    )
    .into_response()
}

/// The window among the candidates where the library's replay runs ④ most often.
async fn busiest_window(transcript: &context_cascade::Conversation, reserve: u64) -> (u64, usize) {
    let mut best = (CANDIDATE_WINDOWS[0], 0);
    for window in CANDIDATE_WINDOWS {
        let manager = ContextManager::new(CascadeConfig::default());
        let mut summaries = 0;
        let run = replay::replay(
            transcript,
            &manager,
            Budget::new(window, reserve),
            |_, _| {},
        )
        .await;
        for call in &run.calls {
            if (call.report.steps.iter()).any(|s| s.strategy == Strategy::Summarize) {
                summaries += 1;
            }
        }
        if summaries > best.1 {
            best = (window, summaries);
        }
    }
    best
}

/// The scripted summarizer of the library sweep: the nine sections at once, counted.
#[derive(Default)]
struct Scripted(AtomicUsize);

impl Summarizer for Scripted {
    fn id(&self) -> String {
        SUMMARY_MODEL.into()
    }

    fn summarize<'a>(
        &'a self,
        r: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        if std::env::var("DIAG").is_ok() {
            eprintln!(
                "    summarizer asked: {} msgs merge={} max={} prev={}",
                r.messages().len(),
                r.is_merge(),
                r.max_tokens(),
                r.previous_summary().is_some()
            );
        }
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(Ok(nine_sections())))
    }
}

fn summarized(report: &context_cascade::Report) -> bool {
    (report.steps.iter()).any(|s| matches!(s.strategy, Strategy::Summarize | Strategy::Degrade))
}

/// The library alone, without HTTP or waiting (`--sweep`): the transcript replayed as the
/// proxy does it, `summarize_ahead` on each request sent before the next comes, for each
/// bound on forecasts. Per bound: ④ turns, those that still asked the summarizer, the
/// summarizer calls made ahead and at request time, and whether every request came out
/// byte-identical to the synchronous run's.
async fn sweep(transcript: &Conversation, budget: Budget) {
    println!(
        "| forecasts | ④ turns | waited | calls ahead | calls at ④ turns | sync run calls | identical |"
    );
    println!("|---|---|---|---|---|---|---|");
    for forecasts in std::env::var("FORECASTS").map_or(vec![1, 2, 3, 4, 5, 6, 8], |v| {
        v.split(',').map(|x| x.parse().unwrap()).collect()
    }) {
        let config = CascadeConfig {
            background_forecasts: forecasts,
            background_cap_ratio: std::env::var("CAP_RATIO").map_or(0.8, |v| v.parse().unwrap()),
            ..CascadeConfig::default()
        };
        let inner = Arc::new(Scripted::default());
        let prepared = Arc::new(PreparedSummaries::new(inner.clone()));
        let manager = ContextManager::new(config.clone()).with_summarizer(prepared.clone());
        let plain_inner = Arc::new(Scripted::default());
        let plain = ContextManager::new(config).with_summarizer(plain_inner.clone());
        let (mut turns, mut waited, mut ahead, mut at_turns, mut identical) = (0, 0, 0, 0, true);
        let mut carried = Conversation {
            format: transcript.format,
            messages: Vec::new(),
            envelope: transcript.envelope.clone(),
        };
        let mut next = 0;
        let points = replay::call_points(transcript.messages.iter().map(|m| m.role()));
        let mut prev_end = 0;
        for end in points {
            if std::env::var("DIAG").is_ok() {
                eprintln!("end={end} sent-est={}", manager.estimate(&carried));
            }
            let _ = prev_end;
            carried
                .messages
                .extend(transcript.messages[next..end].iter().cloned());
            next = end;
            let mut alone = carried.clone();
            let before = inner.0.load(Ordering::SeqCst);
            let report = manager.prepare(&mut carried, budget).await;
            let calls = inner.0.load(Ordering::SeqCst) - before;
            plain.prepare(&mut alone, budget).await;
            identical &= format::to_vec(&alone, Default::default()).unwrap()
                == format::to_vec(&carried, Default::default()).unwrap();
            if summarized(&report) && std::env::var("DIAG").is_ok() {
                eprintln!(
                    "turn end={end} len={} calls={calls} report={} before-est={} E={} new={}",
                    alone.messages.len(),
                    report.summary_line(),
                    report.tokens_before,
                    budget.effective(),
                    end - prev_end
                );
            }
            if summarized(&report) {
                turns += 1;
                waited += usize::from(calls > 0);
                at_turns += calls;
            }
            let before = inner.0.load(Ordering::SeqCst);
            if let Ok(Some(summary)) = manager
                .summarize_ahead(&carried, budget, prepared.clone())
                .await
            {
                if std::env::var("DIAG").is_ok() {
                    let sizes: Vec<String> = summary
                        .requests()
                        .map(|r| {
                            format!(
                                "{}{}",
                                r.messages().len(),
                                if r.is_merge() { "m" } else { "" }
                            )
                        })
                        .collect();
                    eprintln!(
                        "  ahead after end={end} len={} est={} forecasts={} requests {:?}",
                        carried.messages.len(),
                        manager.estimate(&carried),
                        summary.forecasts(),
                        sizes
                    );
                }
                prepared.add(summary);
            }
            ahead += inner.0.load(Ordering::SeqCst) - before;
            prev_end = end;
        }
        println!(
            "| {forecasts} | {turns} | {waited} | {ahead} | {at_turns} | {} | {identical} |",
            plain_inner.0.load(Ordering::SeqCst)
        );
    }
}

/// One replay through a fresh proxy; per turn: (latency, whether ④ ran, summarizer calls
/// during the turn).
async fn run(
    upstream: &str,
    summaries: &AtomicUsize,
    body: &Value,
    points: &[usize],
    window: u64,
    background: bool,
) -> (
    Vec<(Duration, bool, usize)>,
    Option<cascade_proxy::background::BackgroundStats>,
) {
    let mut config = ProxyConfig::new(upstream);
    config.db_path = IN_MEMORY_DB.into();
    config.discover = false;
    config.window = Some(window);
    config.background_summaries = background;
    config.summarizer =
        SummarizerSpec::parse(upstream, Some(Provider::OpenAi), Some(SUMMARY_MODEL.into()));
    let state = AppState::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let served = state.clone();
    tokio::spawn(async move {
        let _ = serve_state(served, listener, std::future::pending()).await;
    });
    let client = reqwest::Client::new();
    let messages = body["messages"].as_array().unwrap();
    let mut turns = Vec::new();
    for &end in points {
        let mut request = body.clone();
        request["messages"] = Value::Array(messages[..end].to_vec());
        let bytes = serde_json::to_vec(&request).unwrap();
        let before = summaries.load(Ordering::SeqCst);
        let start = Instant::now();
        let response = client
            .post(&proxy)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await
            .unwrap();
        let report = (response.headers().get(REPORT_HEADER))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let _ = response.bytes().await;
        let latency = start.elapsed();
        let calls = summaries.load(Ordering::SeqCst) - before;
        // ④ ran (or ⑤, which also asks the summarizer).
        let summarized = report.contains("summarize") || report.contains("degrade");
        turns.push((latency, summarized, calls));
        // The agent's own turn: longer than a summary.
        if let Some(jobs) = state.background() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while jobs.stats().in_flight > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    (turns, state.background().map(|b| b.stats()))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let fixture =
        arg("--fixture").unwrap_or_else(|| format!("{root}/examples/claude-code-session.json"));
    let summary_ms: u64 = arg("--summary-ms").map_or(2_000, |s| s.parse().unwrap());
    let text = std::fs::read(&fixture).unwrap();
    let body: Value = serde_json::from_slice(&text).unwrap();
    let transcript = format::parse(&text, None).unwrap();
    let roles = transcript.messages.iter().map(|m| m.role());
    let points = replay::call_points(roles.collect::<Vec<Role>>());
    let (window, expected) = match arg("--window") {
        Some(w) => (w.parse().unwrap(), 0),
        None => busiest_window(&transcript, transcript.output_reserve()).await,
    };

    if std::env::args().any(|a| a == "--sweep") {
        println!("fixture {fixture}: window {window}, library sweep");
        sweep(
            &transcript,
            Budget::new(window, transcript.output_reserve()),
        )
        .await;
        return;
    }
    let summaries = Arc::new(AtomicUsize::new(0));
    let counter = summaries.clone();
    let delay = Duration::from_millis(summary_ms);
    let upstream = start_async(move |_, request| {
        let counter = counter.clone();
        Box::pin(async move {
            if request.body["model"] == SUMMARY_MODEL {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                return answer(&nine_sections());
            }
            answer("on it")
        }) as Answer
    })
    .await;

    println!(
        "fixture {fixture}: {} calls, window {window} (library replay: ④ on {expected} calls), summarizer {summary_ms} ms",
        points.len()
    );
    println!(
        "| background | ④ turns | ④ turn p50 ms | ④ turn worst ms | summarizer calls at ④ turns | other turns p50 ms | jobs started / prepared / failed |"
    );
    println!("|---|---|---|---|---|---|---|");
    for background in [false, true] {
        let (turns, stats) = run(
            &upstream.base,
            &summaries,
            &body,
            &points,
            window,
            background,
        )
        .await;
        let mut compaction: Vec<Duration> = turns.iter().filter(|t| t.1).map(|t| t.0).collect();
        let mut other: Vec<Duration> = turns.iter().filter(|t| !t.1).map(|t| t.0).collect();
        compaction.sort();
        other.sort();
        let calls: usize = turns.iter().filter(|t| t.1).map(|t| t.2).sum();
        let jobs = stats.map_or("-".to_owned(), |s| {
            format!("{} / {} / {}", s.started, s.prepared, s.failed)
        });
        println!(
            "| {} | {} | {:.1} | {:.1} | {calls} | {:.2} | {jobs} |",
            if background { "on" } else { "off" },
            compaction.len(),
            ms(percentile(&compaction, 0.5)),
            ms(compaction.last().copied().unwrap_or_default()),
            ms(percentile(&other, 0.5)),
        );
    }
}
