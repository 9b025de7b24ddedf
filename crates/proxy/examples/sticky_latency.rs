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

mod latency;
#[path = "../tests/common/scripted.rs"]
mod scripted;

use std::time::Duration;

use latency::{arg, percentile_ms as percentile, scripted_upstream, send, session};
use serde_json::json;

/// A proxy in this process keeping `memory_mb` of sticky prefixes, `gpt-4o`'s window 64K;
/// its base URL.
async fn start_proxy(upstream: &str, memory_mb: u64) -> String {
    let mut config = cascade_proxy::ProxyConfig::new(upstream.to_owned());
    config.window.models = [("gpt-4o".to_owned(), 64_000)].into_iter().collect();
    config.limits.sticky_memory_mb = memory_mb;
    latency::serve(config).await
}

/// `cascade_prefix_reused_total` of the proxy at `url`.
async fn reused(client: &reqwest::Client, url: &str) -> u64 {
    latency::counter(client, url, "cascade_prefix_reused_total").await
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (runs, n) = (arg(&args, "--runs", 3), arg(&args, "--n", 60));
    let (messages, points) = session();
    let (script, upstream, _upstream) = scripted_upstream().await;
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
            let d = send(&client, &format!("{upstream}/v1/chat/completions"), &body).await;
            let a = send(&client, &format!("{memory}/v1/chat/completions"), &body).await;
            let b = send(&client, &format!("{store}/v1/chat/completions"), &body).await;
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
