//! What a sticky prefix costs when it is read back from the store instead of memory: two
//! proxies in this process, one with `limits.sticky_memory_mb = 8` and one at the default,
//! 0 (every conversation's prefix decoded from SQLite on its next request), in front of the
//! scripted upstream. A real session of about 100K tokens
//! (`claude-code__spotter__ae4a77f8-main`, as Chat bodies) is replayed call by call, each
//! request extending the previous one, with `gpt-4o`'s window set to 64K so that every
//! request is compacted and the next one re-applies it. "Added" is each proxy's time minus
//! the direct call's, the three interleaved request by request; a pause after each lets the
//! background write of its record land, as between an agent's calls. Not a test: numbers for
//! docs/benchmarks.md.
//!
//! ```text
//! cargo run --release -p cascade-proxy --example sticky_latency [-- --runs 3 --n 60]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // a development tool: a failure ends the run

#[path = "../tests/common/scripted.rs"]
mod scripted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use context_cascade::Role;
use serde_json::{Value, json};

const FIXTURE: &str = "transcripts/claude-code__spotter__ae4a77f8-main.json";

/// A proxy in this process keeping `memory_mb` of sticky prefixes; its base URL.
async fn start_proxy(upstream: &str, memory_mb: u64) -> String {
    let mut config = cascade_proxy::ProxyConfig::new(upstream.to_owned());
    config.window.models = [("gpt-4o".to_owned(), 64_000)].into_iter().collect();
    config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.window.discover = false;
    config.limits.max_request_bytes = 64 << 20;
    config.limits.sticky_memory_mb = memory_mb;
    let px = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", px.local_addr().unwrap());
    tokio::spawn(async move {
        if let Err(e) = cascade_proxy::serve(config, px).await {
            eprintln!("proxy: {e}");
        }
    });
    url
}

async fn send(client: &reqwest::Client, url: &str, body: &[u8]) -> Duration {
    let start = Instant::now();
    let response = (client.post(format!("{url}/v1/chat/completions")))
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await;
    match response {
        Ok(r) if r.status().is_success() => {
            let _ = r.bytes().await;
        }
        Ok(r) => eprintln!("sticky_latency: HTTP {} from {url}", r.status()),
        Err(e) => eprintln!("sticky_latency: {e}"),
    }
    start.elapsed()
}

/// `cascade_prefix_reused_total` of the proxy at `url`.
async fn reused(client: &reqwest::Client, url: &str) -> u64 {
    let text = match client.get(format!("{url}/metrics")).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    (text.lines())
        .find_map(|l| l.strip_prefix("cascade_prefix_reused_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len().max(1) - 1) as f64 * p).round() as usize;
    sorted.get(index).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    (args.iter().position(|a| a == name))
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (runs, n) = (arg(&args, "--runs", 3), arg(&args, "--n", 60));
    let fixture: Value =
        serde_json::from_slice(&std::fs::read(cascade_test_support::fixture(FIXTURE)).unwrap())
            .unwrap();
    let messages = fixture["messages"].as_array().unwrap().clone();
    let roles = messages
        .iter()
        .map(|m| Role::parse(m["role"].as_str().unwrap()).unwrap());
    let points = context_cascade::replay::call_points(roles);

    let mut script = scripted::Script::new(u64::MAX);
    script.report_usage = false; // a fixed calibration: the same decision on every request
    let script = Arc::new(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    let _upstream = scripted::serve(script.clone(), listener);
    let client = reqwest::Client::new();

    println!(
        "| run | direct p50 | 8 MiB in memory: added p50 / p99 | from the store (0, the default): added p50 / p99 | prefixes re-applied (memory, store) |"
    );
    println!("|---|---|---|---|---|");
    for run in 1..=runs {
        let memory = start_proxy(&upstream, 8).await;
        let store = start_proxy(&upstream, 0).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let warm = 3;
        let ends = &points[points.len().saturating_sub(n + warm)..];
        let mut times: [Vec<Duration>; 3] = Default::default();
        for (i, &end) in ends.iter().enumerate() {
            let mut window = messages[..end].to_vec();
            if let Some(m) = window.iter_mut().find(|m| m["role"] == "user")
                && let Some(text) = m["content"].as_str()
            {
                m["content"] = json!(format!("[run {run}] {text}"));
            }
            let body = serde_json::to_vec(&json!({"model": "gpt-4o", "max_tokens": 4096,
                "messages": window}))
            .unwrap();
            let d = send(&client, &upstream, &body).await;
            let a = send(&client, &memory, &body).await;
            let b = send(&client, &store, &body).await;
            if i >= warm {
                times[0].push(d);
                times[1].push(a.max(d) - d);
                times[2].push(b.max(d) - d);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        script.seen.lock().unwrap().clear();
        for list in &mut times {
            list.sort();
        }
        println!(
            "| {run} | {:.2} ms | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {}, {} of {} |",
            percentile(&times[0], 0.5),
            percentile(&times[1], 0.5),
            percentile(&times[1], 0.99),
            percentile(&times[2], 0.5),
            percentile(&times[2], 0.99),
            reused(&client, &memory).await,
            reused(&client, &store).await,
            ends.len(),
        );
    }
}
