//! Serves a scripted model that calls `context_recall` once when a request offers it (then
//! says the line it found), with the proxy in front of it in the same process, recall on
//! and a window of 8,000 tokens (in-memory database): the SDK check's recall part
//! (`scripts/ci-proxy-sdk.sh`). Chat Completions, Messages and Responses, plain and
//! streaming (the model is `crates/proxy/tests/recall_stream/script.rs`).
//!
//! ```text
//! cargo run -p cascade-proxy --example recall_upstream -- --port 9103 --proxy-port 9104
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // a development tool: a failure ends the run

#[allow(dead_code)] // the tests' helpers for building requests are not needed here
#[path = "../tests/recall_stream/script.rs"]
mod script;

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;

fn port(args: &[String], name: &str) -> u16 {
    let value = (args.iter().position(|a| a == name)).and_then(|i| args.get(i + 1));
    match value.map(|v| v.parse()) {
        Some(Ok(port)) => port,
        _ => {
            eprintln!("recall_upstream: {name} PORT is required");
            std::process::exit(2);
        }
    }
}

async fn bind(port: u16) -> tokio::net::TcpListener {
    match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("recall_upstream: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (port, proxy_port) = (port(&args, "--port"), port(&args, "--proxy-port"));
    let listener = bind(port).await;
    let upstream = cascade_test_support::upstream::serve_on(listener, |_, request| {
        Box::pin(async move { script::answer(script::Mode::Once, &request) })
    });
    let mut config = ProxyConfig::new(upstream.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(8_000);
    config.requests.recall = true;
    // The SDK tests check the usage summed over the rounds, as the upstream reported it
    // (the default gauge rescales a Responses answer to the client's size).
    config.requests.gauge = cascade_proxy::config::Gauge::Upstream;
    let proxy_listener = bind(proxy_port).await;
    println!(
        "recalling model on {}, proxy on http://127.0.0.1:{proxy_port}",
        upstream.base
    );
    if let Err(e) = cascade_proxy::serve(config, proxy_listener).await {
        eprintln!("recall_upstream: proxy: {e}");
        std::process::exit(1);
    }
}
