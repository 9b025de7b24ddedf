//! Load check: the latency the proxy adds over calling the scripted upstream directly, for
//! 1 kB, 100K-token and 1M-token requests (p50, p99) that need no compaction (repeated, or
//! each extending the previous one) or need ②, with the fast path off (the path before
//! issue 15) and on, side by side; and the requests per second through each with 64
//! concurrent clients. `--breakdown` times the slow path's phases and exact counting on the
//! 100K request instead. Not a test: numbers for docs/benchmarks.md. Every server runs in this
//! process on loopback.
//!
//! ```text
//! cargo run --release -p cascade-proxy --example proxy_latency [-- --scale 0.5 | --breakdown]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a development tool: a failure ends the run

mod latency;
#[path = "../tests/common/scripted.rs"]
mod scripted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use latency::{fast_path_taken, send, start_proxy};
use serde_json::json;

fn prose(n: usize, chars: usize) -> String {
    let base = format!(
        "Message {n}: the build of module {n} failed because the parser rejected an input. "
    );
    base.repeat(chars / base.len() + 1)[..chars].to_string()
}

/// A coding-agent conversation: a task, then `exchanges` tool calls with results of
/// `chars` characters each, for `model`. `task` names the conversation: each scenario is
/// its own, so that one compacted by an earlier scenario (sticky prefix) does not carry
/// its state into the next.
fn body(task: &str, model: &str, exchanges: usize, chars: usize) -> Vec<u8> {
    let mut list = vec![
        json!({"role": "system", "content": "You are a careful coding agent."}),
        json!({"role": "user", "content": format!("Fix the parser: the build fails ({task}).")}),
    ];
    for i in 0..exchanges {
        let id = format!("call_{i}");
        list.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "read_file",
            "arguments": format!("{{\"path\":\"src/module_{i}.rs\"}}")}}]}),
        );
        list.push(json!({"role": "tool", "tool_call_id": id, "content": prose(i, chars)}));
    }
    serde_json::to_vec(&json!({"model": model, "max_tokens": 1024, "messages": list}))
        .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median of `runs` timings of `f`, in ms.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    ms(percentile(&times, 0.5))
}

/// Where the time goes in the proxy's request path, phase by phase, on one body.
fn breakdown(label: &str, bytes: &[u8]) {
    use cascade_proxy::memory;
    use context_cascade::format::{WriteOptions, parse_value, to_vec};
    use context_cascade::{Budget, CascadeConfig, ContextManager, Format};
    let runs = 50;
    let headers = axum::http::HeaderMap::new();
    let policy = CascadeConfig::default().remember;
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let manager = ContextManager::new(CascadeConfig::default());
    let conversation = parse_value(value.clone(), Some(Format::OpenAi)).unwrap();
    let budget = Budget::new(10_000_000, 1024);
    let rows: Vec<(&str, f64)> = vec![
        (
            "serde_json::from_slice (Value)",
            median_ms(runs, || {
                std::hint::black_box(serde_json::from_slice::<serde_json::Value>(bytes).unwrap());
            }),
        ),
        (
            "conversation_key",
            median_ms(runs, || {
                std::hint::black_box(memory::conversation_key(&headers, &value, Format::OpenAi));
            }),
        ),
        (
            "remember_requests + missing_facts",
            median_ms(runs, || {
                std::hint::black_box(memory::remember_requests(&value, Format::OpenAi, &policy));
                std::hint::black_box(memory::missing_facts(&value, Format::OpenAi, &[]));
            }),
        ),
        (
            "parse_value (Value -> Conversation)",
            median_ms(runs, || {
                std::hint::black_box(parse_value(value.clone(), Some(Format::OpenAi)).unwrap());
            }),
        ),
        (
            "  of which value.clone()",
            median_ms(runs, || {
                std::hint::black_box(value.clone());
            }),
        ),
        (
            "conversation.clone() (the untouched original)",
            median_ms(runs, || {
                std::hint::black_box(conversation.clone());
            }),
        ),
        (
            "prepare (nothing to do; counts cached after run 1)",
            median_ms(runs, || {
                let mut c = conversation.clone();
                std::hint::black_box(pollster::block_on(manager.prepare(&mut c, budget)));
            }),
        ),
        (
            "prior (usage observation)",
            median_ms(runs, || {
                std::hint::black_box(manager.prior(&conversation));
            }),
        ),
        (
            "serialize (to_vec, when compacted)",
            median_ms(runs, || {
                let _ = std::hint::black_box(to_vec(&conversation, WriteOptions::default()));
            }),
        ),
    ];
    println!(
        "\n{label} ({} kB): phase medians over {runs} runs",
        bytes.len() / 1000
    );
    let rows = rows
        .into_iter()
        .chain(exact_costs(bytes))
        .collect::<Vec<_>>();
    println!("| phase | ms |\n|---|---|");
    for (phase, t) in rows {
        println!("| {phase} | {t:.3} |");
    }
}

/// The engine's estimate of a body before any calibration (what the proxy starts from).
fn estimate(bytes: &[u8]) -> u64 {
    let conversation = context_cascade::format::parse(bytes, None).unwrap();
    context_cascade::ContextManager::new(context_cascade::CascadeConfig::default())
        .estimate(&conversation)
}

/// One size of request: label, tool exchanges, characters per tool result, requests timed.
const SIZES: [(&str, usize, usize, usize); 3] = [
    ("1 kB", 1, 400, 200),
    ("100K tokens", 125, 3200, 100),
    ("1M tokens", 1250, 3200, 12),
];

/// What counting a request costs, on freshly parsed messages (as the proxy sees every
/// request): the prior, and the exact o200k count on a first request (empty memo) and on
/// a request that extends the previous one by one exchange (memo warm).
fn exact_costs(bytes: &[u8]) -> Vec<(&'static str, f64)> {
    use context_cascade::estimate::exact::{Encoding, ExactCounter};
    use context_cascade::estimate::{ClassCounts, TokenCounter};
    use context_cascade::format::parse;
    let runs = 7;
    let timed = |f: &mut dyn FnMut() -> Duration| {
        let mut times: Vec<Duration> = (0..runs).map(|_| f()).collect();
        times.sort();
        ms(percentile(&times, 0.5))
    };
    let prior = timed(&mut || {
        let conversation = parse(bytes, None).unwrap();
        let start = Instant::now();
        std::hint::black_box(ClassCounts::of_conversation(&conversation));
        start.elapsed()
    });
    let first = timed(&mut || {
        let counter = ExactCounter::new(Encoding::O200kBase).unwrap();
        let conversation = parse(bytes, None).unwrap();
        let start = Instant::now();
        std::hint::black_box(counter.request(&conversation));
        start.elapsed()
    });
    let counter = ExactCounter::new(Encoding::O200kBase).unwrap();
    let mut previous = parse(bytes, None).unwrap();
    previous.messages.truncate(previous.messages.len() - 2);
    counter.request(&previous);
    let extending = timed(&mut || {
        let conversation = parse(bytes, None).unwrap();
        let start = Instant::now();
        std::hint::black_box(counter.request(&conversation));
        start.elapsed()
    });
    vec![
        ("count: prior (class counts, fresh messages)", prior),
        ("count: exact o200k, first request (memo empty)", first),
        (
            "count: exact o200k, request extending the previous by one exchange",
            extending,
        ),
    ]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--breakdown") {
        breakdown("~100K tokens", &body("breakdown", "gpt-4o", 125, 3200));
        return;
    }
    let scale: f64 = args
        .iter()
        .position(|a| a == "--scale")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1.0);

    let mut script = scripted::Script::new(u64::MAX);
    script.report_usage = false; // a fixed calibration: the same decision on every request
    let script = Arc::new(script);
    let up = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", up.local_addr().unwrap());
    let _upstream = scripted::serve(script.clone(), up);
    // `gpt-4o` never needs compaction here; each `needs-2-*` model's window puts its
    // request at 0.8·E, between ②'s headroom (0.75) and the preemptive threshold (0.9).
    let mut windows = vec![("gpt-4o".to_owned(), 100_000_000)];
    for (label, exchanges, chars, _) in SIZES {
        let tokens = estimate(&body(label, "x", exchanges, chars));
        windows.push((
            format!("needs-2-{label}"),
            (tokens as f64 / 0.8) as u64 + 1024,
        ));
    }
    let slow = start_proxy(&upstream, false, &windows).await;
    let fast = start_proxy(&upstream, true, &windows).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let client = reqwest::Client::new();
    let route = "/v1/chat/completions";

    println!(
        "| request | body | direct p50 | before: added p50 / p99 | fast path: added p50 / p99 | on the fast path |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, exchanges, chars, n) in SIZES {
        let n = ((n as f64 * scale) as usize).max(3);
        let scenarios: [(&str, String, bool); 3] = [
            ("no compaction, repeated", "gpt-4o".to_owned(), false),
            (
                "no compaction, extends the previous",
                "gpt-4o".to_owned(),
                true,
            ),
            ("needs ②", format!("needs-2-{label}"), false),
        ];
        for (scenario, model, extends) in scenarios {
            let taken_before = fast_path_taken(&client, &fast).await;
            let warm = 3;
            let (mut direct, mut before, mut after) = (Vec::new(), Vec::new(), Vec::new());
            let mut size = 0;
            for i in 0..warm + n {
                let grown = if extends { exchanges + i } else { exchanges };
                let bytes = body(&format!("{label}, {scenario}"), &model, grown, chars);
                size = bytes.len();
                let d = send(&client, &format!("{upstream}{route}"), &bytes).await;
                let b = send(&client, &format!("{slow}{route}"), &bytes).await;
                let a = send(&client, &format!("{fast}{route}"), &bytes).await;
                if i >= warm {
                    direct.push(d);
                    before.push(d.max(b) - d);
                    after.push(d.max(a) - d);
                }
            }
            script.seen.lock().unwrap().clear();
            for list in [&mut direct, &mut before, &mut after] {
                list.sort();
            }
            let taken = fast_path_taken(&client, &fast).await - taken_before;
            println!(
                "| {label}, {scenario} | {:.1} kB | {:.2} ms | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {taken}/{} |",
                size as f64 / 1000.0,
                ms(percentile(&direct, 0.5)),
                ms(percentile(&before, 0.5)),
                ms(percentile(&before, 0.99)),
                ms(percentile(&after, 0.5)),
                ms(percentile(&after, 0.99)),
                warm + n,
            );
        }
    }

    let small = Arc::new(body("concurrent", "gpt-4o", 1, 400));
    for (label, proxy) in [("before", &slow), ("fast path", &fast)] {
        let total = ((2000.0 * scale) as usize).max(64);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let client = client.clone();
            let url = format!("{proxy}{route}");
            let small = small.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..total / 64 {
                    send(&client, &url, &small).await;
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
        let elapsed = start.elapsed();
        let done = (total / 64) * 64;
        script.seen.lock().unwrap().clear();
        println!(
            "\n64 concurrent clients, 1 kB requests, {label}: {done} in {:.2} s = {:.0} requests/s",
            elapsed.as_secs_f64(),
            done as f64 / elapsed.as_secs_f64()
        );
    }
}
