//! Load check: the latency the proxy adds over calling the scripted upstream directly, for a
//! small request and a ~100K-token request that needs no compaction (p50, p99), and the
//! requests per second through the proxy with 64 concurrent clients. Not a test: numbers
//! for the README. Both servers run in this process on loopback.
//!
//! ```text
//! cargo run --release -p cascade-proxy --example proxy_latency [-- --requests 200]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a development tool: a failure ends the run

#[path = "../tests/common/scripted.rs"]
mod scripted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

fn prose(n: usize, chars: usize) -> String {
    let base = format!(
        "Message {n}: the build of module {n} failed because the parser rejected an input. "
    );
    base.repeat(chars / base.len() + 1)[..chars].to_string()
}

/// A conversation of `messages` messages of `chars` characters each.
fn body(messages: usize, chars: usize) -> Vec<u8> {
    let mut list = vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    for i in 0..messages {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        list.push(json!({"role": role, "content": prose(i, chars)}));
    }
    list.push(json!({"role": "user", "content": "Now fix the parser."}));
    serde_json::to_vec(&json!({"model": "gpt-4o", "max_tokens": 1024, "messages": list}))
        .unwrap_or_default()
}

async fn send(client: &reqwest::Client, url: &str, body: &[u8]) -> Duration {
    let start = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await;
    match response {
        Ok(r) if r.status().is_success() => {
            let _ = r.bytes().await;
        }
        Ok(r) => eprintln!("proxy_latency: HTTP {}", r.status()),
        Err(e) => eprintln!("proxy_latency: {e}"),
    }
    start.elapsed()
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

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let requests: usize = args
        .iter()
        .position(|a| a == "--requests")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);

    let script = Arc::new(scripted::Script::new(u64::MAX));
    let Ok(up) = tokio::net::TcpListener::bind("127.0.0.1:0").await else {
        eprintln!("proxy_latency: cannot bind");
        return;
    };
    let upstream = format!(
        "http://{}",
        up.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    let _upstream = scripted::serve(script.clone(), up);
    let mut config = cascade_proxy::ProxyConfig::new(upstream.clone());
    config.window = Some(200_000);
    config.db_path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.discover = false;
    let Ok(px) = tokio::net::TcpListener::bind("127.0.0.1:0").await else {
        eprintln!("proxy_latency: cannot bind");
        return;
    };
    let proxy = format!(
        "http://{}",
        px.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    tokio::spawn(async move {
        if let Err(e) = cascade_proxy::serve(config, px).await {
            eprintln!("proxy: {e}");
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let client = reqwest::Client::new();

    println!(
        "| request | body | direct p50 | proxy p50 | added p50 | direct p99 | proxy p99 | added p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    // ~100K tokens: 250 messages of 1,600 characters of prose (about 400 kB of JSON).
    for (label, bytes) in [("small", body(6, 200)), ("~100K tokens", body(250, 1600))] {
        let direct_url = format!("{upstream}/v1/chat/completions");
        let proxy_url = format!("{proxy}/v1/chat/completions");
        for _ in 0..10 {
            send(&client, &direct_url, &bytes).await;
            send(&client, &proxy_url, &bytes).await;
        }
        let (mut direct, mut via) = (Vec::new(), Vec::new());
        for _ in 0..requests {
            direct.push(send(&client, &direct_url, &bytes).await);
            via.push(send(&client, &proxy_url, &bytes).await);
        }
        direct.sort();
        via.sort();
        let (d50, p50) = (percentile(&direct, 0.5), percentile(&via, 0.5));
        let (d99, p99) = (percentile(&direct, 0.99), percentile(&via, 0.99));
        println!(
            "| {label} | {} kB | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
            bytes.len() / 1000,
            ms(d50),
            ms(p50),
            ms(p50.saturating_sub(d50)),
            ms(d99),
            ms(p99),
            ms(p99.saturating_sub(d99)),
        );
    }

    let small = Arc::new(body(6, 200));
    let total = requests * 20;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let client = client.clone();
        let url = format!("{proxy}/v1/chat/completions");
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
    println!(
        "\n64 concurrent clients, small requests through the proxy: {done} in {:.2} s = {:.0} requests/s",
        elapsed.as_secs_f64(),
        done as f64 / elapsed.as_secs_f64()
    );
}
