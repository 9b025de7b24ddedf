#![allow(clippy::unwrap_used, dead_code)] // a development tool: a failure ends the run; each example uses part of it

//! What the latency examples (`proxy_latency`, `route_latency`, `sticky_latency`) share: a
//! proxy in this process, the scripted upstream, the real session they replay, one timed
//! request, a counter read from `/metrics`, and the command line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use context_cascade::Role;
use serde_json::Value;

use crate::scripted;

/// The real session of about 100K tokens the route and sticky examples replay.
pub(crate) const SESSION: &str = "transcripts/claude-code__spotter__ae4a77f8-main.json";

/// One proxy in this process, in front of `upstream`; returns its base URL.
pub(crate) async fn start_proxy(
    upstream: &str,
    fast_path: bool,
    windows: &[(String, u64)],
) -> String {
    let mut config = cascade_proxy::ProxyConfig::new(upstream.to_owned());
    config.window.models = windows.iter().cloned().collect();
    config.requests.fast_path = fast_path;
    serve(config).await
}

/// A proxy in this process with `config`, with an in-memory store, no window discovery and
/// room for the largest bodies; returns its base URL.
pub(crate) async fn serve(mut config: cascade_proxy::ProxyConfig) -> String {
    config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.window.discover = false;
    config.limits.max_request_bytes = 64 << 20;
    let px = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", px.local_addr().unwrap());
    tokio::spawn(async move {
        if let Err(e) = cascade_proxy::serve(config, px).await {
            eprintln!("proxy: {e}");
        }
    });
    url
}

/// A `cascade proxy` process (the binary at `binary`: its own allocator, its SQLite file in
/// a fresh folder) in front of `upstream` with the windows of `windows`, discovery off and
/// room for the largest bodies, once `/healthz` answers. Dropping it ends the process and
/// removes the folder.
pub(crate) async fn spawn_binary(
    binary: &str,
    upstream: &str,
    windows: &[(String, u64)],
) -> ProxyProcess {
    let dir = std::env::temp_dir().join(format!("cascade-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let models = (windows.iter())
        .map(|(m, w)| format!("\"{m}\" = {w}"))
        .collect::<Vec<_>>()
        .join(", ");
    let config = format!(
        "[window]\ndiscover = false\nmodels = {{ {models} }}\n[limits]\nmax_request_bytes = {}\n",
        64 << 20
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = dir.join(format!("state-{port}.db"));
    let mut child = std::process::Command::new(binary)
        .args(["proxy", "--upstream", upstream, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(dir.join("config.toml"))
        .arg("--db")
        .arg(db)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client.get(format!("{url}/healthz")).send().await.is_ok() {
            return ProxyProcess { url, child, dir };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{binary} proxy did not answer /healthz within 5 s");
}

/// A `cascade proxy` process started by [`spawn_binary`].
pub(crate) struct ProxyProcess {
    pub(crate) url: String,
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The scripted upstream in this process, its usage reports off (a fixed calibration: the
/// same decision on every request); its script, base URL, and the task serving it.
pub(crate) async fn scripted_upstream() -> (
    Arc<scripted::Script>,
    String,
    cascade_test_support::upstream::Upstream,
) {
    let mut script = scripted::Script::new(u64::MAX);
    script.report_usage = false;
    let script = Arc::new(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    let serving = scripted::serve(script.clone(), listener);
    (script, upstream, serving)
}

/// [`SESSION`]'s messages, and the points where its agent called the model.
pub(crate) fn session() -> (Vec<Value>, Vec<usize>) {
    let path = cascade_test_support::fixture(SESSION);
    let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let messages = fixture["messages"].as_array().unwrap().clone();
    let roles = (messages.iter()).map(|m| Role::parse(m["role"].as_str().unwrap()).unwrap());
    let points = context_cascade::replay::call_points(roles);
    (messages, points)
}

/// POSTs `body` (JSON) to `url`, reads the answer whole; the time it took.
pub(crate) async fn send(client: &reqwest::Client, url: &str, body: &[u8]) -> Duration {
    let start = Instant::now();
    let response = (client.post(url))
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await;
    match response {
        Ok(r) if r.status().is_success() => {
            let _ = r.bytes().await;
        }
        Ok(r) => eprintln!("latency: HTTP {} from {url}", r.status()),
        Err(e) => eprintln!("latency: {e}"),
    }
    start.elapsed()
}

/// The counter `name` of the proxy at `proxy` (`/metrics`), 0 when it cannot be read.
pub(crate) async fn counter(client: &reqwest::Client, proxy: &str, name: &str) -> u64 {
    let text = match client.get(format!("{proxy}/metrics")).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    (text.lines())
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Requests the proxy at `proxy` sent on its fast path so far.
pub(crate) async fn fast_path_taken(client: &reqwest::Client, proxy: &str) -> u64 {
    counter(client, proxy, "cascade_fast_path_total").await
}

/// The `p` quantile of sorted times, in milliseconds.
pub(crate) fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len().max(1) - 1) as f64 * p).round() as usize;
    sorted.get(index).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// The number after `name` on the command line, or `default`.
pub(crate) fn arg(args: &[String], name: &str, default: usize) -> usize {
    (args.iter().position(|a| a == name))
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}
