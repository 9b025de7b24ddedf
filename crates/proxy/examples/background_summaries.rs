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
//! library's replay of the same session (or `--window`). Besides the latency: how many ④
//! turns still waited for a summary, and what the background cost (summarizer calls and
//! their input, over the whole session, beside the calls of the run without).
//!
//! `--forecasts N` sets `background.forecasts`, `--ratio X` `background.summary_ratio`,
//! `--gap X` `prepared_summary_gap` (stand-ins; the proxy's summary cache serves them),
//! `--no-fast-path` sets `fast_path = false`.
//! `--sweep` measures the
//! library alone instead (no HTTP, no waiting, `--forecasts 1,2,4` a list): for each bound,
//! the ④ turns that still asked the summarizer, the calls made ahead, and whether every
//! request came out byte-identical to the synchronous run's.
//!
//! ```text
//! cargo run --release -p cascade-proxy --example background_summaries \
//!     [-- --fixture examples/claude-code-session.json --window 24000 --summary-ms 2000]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a development tool: a failure ends the run

#[path = "../tests/common/summaries.rs"]
mod summaries;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cascade_proxy::BackgroundStats;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, Provider, ProxyConfig, REPORT_HEADER, serve_state};
use cascade_test_support::upstream::{Answer, start_async};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{
    BoxFuture, Budget, CascadeConfig, ContextManager, Conversation, PreparedSummaries, Role,
    Strategy, format, replay,
};
use serde_json::Value;
use summaries::{answer, nine_sections};

const SUMMARY_MODEL: &str = "summary-model";
const CANDIDATE_WINDOWS: [u64; 5] = [16_000, 24_000, 32_000, 48_000, 64_000];

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
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
        _: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(Ok(nine_sections())))
    }
}

fn summarized(report: &context_cascade::Report) -> bool {
    (report.steps.iter()).any(|s| matches!(s.strategy, Strategy::Summarize | Strategy::Degrade))
}

/// The library alone, without HTTP or waiting (`--sweep`): the transcript replayed as the
/// proxy does it, `summarize_ahead` on each request sent before the next comes (through
/// the prepared summaries, which answer a request already prepared as the proxy's summary
/// cache does), for each bound on forecasts. Per bound: ④ turns, those that still asked
/// the summarizer, the summarizer calls made ahead and at ④ turns, the calls of the run
/// without, and whether every request came out byte-identical to that run's.
async fn sweep(transcript: &Conversation, budget: Budget, bounds: &[usize], ratio: f64, gap: f64) {
    println!(
        "| forecasts | ④ turns | waited | stood in | calls ahead | calls at ④ turns | calls without | identical |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &forecasts in bounds {
        let mut config = CascadeConfig::default();
        config.background.forecasts = forecasts;
        config.background.summary_ratio = ratio;
        config.experimental.prepared_summary_gap = gap;
        let inner = Arc::new(Scripted::default());
        let prepared = Arc::new(PreparedSummaries::new(inner.clone()).with_gap_share(gap));
        // Counted as the proxy counts (exactly for an OpenAI model id).
        let counters = Arc::new(context_cascade::estimate::exact::counter_for_model);
        let manager = ContextManager::new(config.clone())
            .with_token_counters(counters.clone())
            .with_summarizer(prepared.clone());
        let plain_inner = Arc::new(Scripted::default());
        let plain = ContextManager::new(config)
            .with_token_counters(counters)
            .with_summarizer(plain_inner.clone());
        let (mut turns, mut waited, mut ahead, mut at_turns, mut identical) = (0, 0, 0, 0, true);
        let mut carried = Conversation {
            format: transcript.format,
            messages: Vec::new(),
            envelope: transcript.envelope.clone(),
        };
        let (mut next, mut sent, mut waits) = (0, 0, Vec::new());
        let points = replay::call_points(transcript.messages.iter().map(|m| m.role()));
        for (call, end) in points.into_iter().enumerate() {
            (carried.messages).extend(transcript.messages[next..end].iter().cloned());
            let added = end - next;
            next = end;
            let mut alone = carried.clone();
            let calls = inner.0.load(Ordering::SeqCst);
            let report = manager.prepare(&mut carried, budget).await;
            let calls = inner.0.load(Ordering::SeqCst) - calls;
            plain.prepare(&mut alone, budget).await;
            identical &= format::to_vec(&alone, Default::default()).unwrap()
                == format::to_vec(&carried, Default::default()).unwrap();
            if summarized(&report) {
                turns += 1;
                waited += usize::from(calls > 0);
                at_turns += calls;
            }
            if summarized(&report) && calls > 0 {
                let share = |tokens: u64| 100.0 * tokens as f64 / budget.effective() as f64;
                waits.push(format!(
                    "call {}: the previous request went up at {:.0}% of E, this one came at {:.0}% ({added} new messages)",
                    call + 1,
                    share(sent),
                    share(report.tokens_before),
                ));
            }
            sent = manager.estimate(&carried);
            let before = inner.0.load(Ordering::SeqCst);
            let ahead_of = manager.summarize_ahead(&carried, budget, prepared.clone());
            if let Ok(Some(summary)) = ahead_of.await {
                prepared.add(summary);
            }
            ahead += inner.0.load(Ordering::SeqCst) - before;
        }
        println!(
            "| {forecasts} | {turns} | {waited} | {} | {ahead} | {at_turns} | {} | {identical} |",
            prepared.stood_in(),
            plain_inner.0.load(Ordering::SeqCst)
        );
        if Some(&forecasts) == bounds.last() {
            waits.iter().for_each(|wait| println!("waited at {wait}"));
        }
    }
}

/// One turn of a replay through the proxy.
struct Turn {
    latency: Duration,
    /// ④ ran (or ⑤, which also asks the summarizer).
    summarized: bool,
    /// Summarizer calls made while the request was in the proxy.
    calls: usize,
}

/// What the scripted upstream counted of the summarizer: calls, and their request bytes.
#[derive(Default)]
struct Counted {
    calls: AtomicUsize,
    bytes: AtomicUsize,
}

/// How a replay's proxy is set up.
struct Setup<'a> {
    upstream: &'a str,
    window: u64,
    background: bool,
    forecasts: Option<usize>,
    ratio: Option<f64>,
    gap: Option<f64>,
}

/// One replay through a fresh proxy: its turns and its background jobs' counters.
async fn run(
    setup: &Setup<'_>,
    counted: &Counted,
    body: &Value,
    points: &[usize],
) -> (Vec<Turn>, Option<BackgroundStats>) {
    let mut config = ProxyConfig::new(setup.upstream);
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(setup.window);
    config.summarizer.background = setup.background;
    config.requests.fast_path = !std::env::args().any(|a| a == "--no-fast-path");
    if let Some(forecasts) = setup.forecasts {
        config.cascade.background.forecasts = forecasts;
    }
    if let Some(ratio) = setup.ratio {
        config.cascade.background.summary_ratio = ratio;
    }
    if let Some(gap) = setup.gap {
        config.cascade.experimental.prepared_summary_gap = gap;
    }
    config.summarizer.endpoint = setup.upstream.to_owned();
    config.summarizer.protocol = Some(Provider::OpenAi);
    config.summarizer.model = Some(SUMMARY_MODEL.into());
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
        let before = counted.calls.load(Ordering::SeqCst);
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
        turns.push(Turn {
            latency,
            summarized: report.contains("summarize") || report.contains("degrade"),
            calls: counted.calls.load(Ordering::SeqCst) - before,
        });
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
    let forecasts: Vec<usize> = arg("--forecasts")
        .map(|list| list.split(',').map(|n| n.parse().unwrap()).collect())
        .unwrap_or_default();
    let ratio: Option<f64> = arg("--ratio").map(|r| r.parse().unwrap());
    let gap: Option<f64> = arg("--gap").map(|r| r.parse().unwrap());
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
        println!(
            "fixture {fixture}: {} calls, window {window}, the library alone",
            points.len()
        );
        let bounds = if forecasts.is_empty() {
            vec![1, 2, 3, 4, 6]
        } else {
            forecasts
        };
        let budget = Budget::new(window, transcript.output_reserve());
        let ratio = ratio.unwrap_or(CascadeConfig::default().background.summary_ratio);
        sweep(&transcript, budget, &bounds, ratio, gap.unwrap_or(0.0)).await;
        return;
    }

    let counted = Arc::new(Counted::default());
    let counter = counted.clone();
    let delay = Duration::from_millis(summary_ms);
    let upstream = start_async(move |_, request| {
        let counter = counter.clone();
        Box::pin(async move {
            if request.body["model"] == SUMMARY_MODEL {
                counter.calls.fetch_add(1, Ordering::SeqCst);
                counter
                    .bytes
                    .fetch_add(request.bytes.len(), Ordering::SeqCst);
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
        "| background | ④ turns | waited | ④ turn p50 ms | ④ turn worst ms | other turns p50 ms | summarizer calls / input kB | jobs started / prepared / failed / re-run | forecasts prepared |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for background in [false, true] {
        let setup = Setup {
            upstream: &upstream.base,
            window,
            background,
            forecasts: forecasts.first().copied(),
            ratio,
            gap,
        };
        let (calls, bytes) = (
            counted.calls.load(Ordering::SeqCst),
            counted.bytes.load(Ordering::SeqCst),
        );
        let (turns, stats) = run(&setup, &counted, &body, &points).await;
        let calls = counted.calls.load(Ordering::SeqCst) - calls;
        let kb = (counted.bytes.load(Ordering::SeqCst) - bytes) as f64 / 1e3;
        let of = |summarized: bool| {
            let mut latencies: Vec<Duration> = (turns.iter())
                .filter(|t| t.summarized == summarized)
                .map(|t| t.latency)
                .collect();
            latencies.sort();
            latencies
        };
        let (compaction, other) = (of(true), of(false));
        let waited = turns.iter().filter(|t| t.summarized && t.calls > 0).count();
        let jobs = stats.map_or("-".to_owned(), |s| {
            format!(
                "{} / {} / {} / {}",
                s.started, s.prepared, s.failed, s.rerun
            )
        });
        let prepared = stats.map_or("-".to_owned(), |s| s.forecasts.to_string());
        println!(
            "| {} | {} | {waited} | {:.1} | {:.1} | {:.2} | {calls} / {kb:.0} | {jobs} | {prepared} |",
            if background { "on" } else { "off" },
            compaction.len(),
            ms(percentile(&compaction, 0.5)),
            ms(compaction.last().copied().unwrap_or_default()),
            ms(percentile(&other, 0.5)),
        );
    }
}
