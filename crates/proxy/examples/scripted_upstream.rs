//! Serves the scripted upstream of the tests on a port, for the SDK check
//! (`scripts/ci-proxy-sdk.sh`): an OpenAI- and Anthropic-compatible server that enforces a
//! context limit with real-looking overflow errors and answers with usage.
//!
//! ```text
//! cargo run -p cascade-proxy --example scripted_upstream -- --port 9101 --limit 6000
//! ```

#[path = "../tests/common/scripted.rs"]
mod scripted;

use std::sync::Arc;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = arg(&args, "--port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(9101);
    let limit: u64 = arg(&args, "--limit")
        .and_then(|p| p.parse().ok())
        .unwrap_or(6000);
    let script = Arc::new(scripted::Script::new(limit));
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("scripted_upstream: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    println!("scripted upstream on http://127.0.0.1:{port} (limit {limit} tokens)");
    scripted::serve(script, listener).await;
}
