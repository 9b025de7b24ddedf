//! Serves the scripted upstream of the tests on a port, for the SDK check
//! (`scripts/ci-proxy-sdk.sh`): an OpenAI- (Chat Completions and Responses) and
//! Anthropic-compatible server that enforces a context limit with real-looking overflow
//! errors and answers with usage.
//!
//! ```text
//! cargo run -p cascade-proxy --example scripted_upstream -- --port 9101 --limit 6000
//! ```
//!
//! With `--proxy-port P` it also runs the proxy in front of it in the same process (window
//! `--window N`, default 128000; in-memory database), for when the `cascade` binary is not
//! at hand.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a development tool: a failure ends the run

#[path = "../tests/common/scripted.rs"]
mod scripted;

use std::sync::Arc;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn number<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match arg(args, name) {
        None => default,
        Some(text) => text.parse().unwrap_or_else(|_| {
            eprintln!("scripted_upstream: {name} {text:?} is not a number");
            std::process::exit(2);
        }),
    }
}

async fn bind(port: u16) -> tokio::net::TcpListener {
    match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("scripted_upstream: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = number(&args, "--port", 9101);
    let limit: u64 = number(&args, "--limit", 6000);
    let script = Arc::new(scripted::Script::new(limit));
    let listener = bind(port).await;
    println!("scripted upstream on http://127.0.0.1:{port} (limit {limit} tokens)");
    if arg(&args, "--proxy-port").is_some() {
        let proxy_port: u16 = number(&args, "--proxy-port", 0);
        let mut config = cascade_proxy::ProxyConfig::new(format!("http://127.0.0.1:{port}"));
        config.window.force = Some(number(&args, "--window", 128_000));
        config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
        config.window.discover = false;
        let proxy_listener = bind(proxy_port).await;
        println!("proxy on http://127.0.0.1:{proxy_port}");
        tokio::spawn(async move {
            if let Err(e) = cascade_proxy::serve(config, proxy_listener).await {
                eprintln!("proxy: {e}");
                std::process::exit(1);
            }
        });
    }
    let _upstream = scripted::serve(script, listener);
    // The server runs in the background; serve until killed, as before.
    std::future::pending::<()>().await;
}
