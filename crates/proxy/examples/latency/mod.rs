#![allow(clippy::unwrap_used)] // a development tool: a failure ends the run

//! What the latency examples (`proxy_latency`, `route_latency`) share: a proxy in this
//! process with windows the caller chooses, and the count of its fast-path requests.

/// One proxy in this process, in front of `upstream`; returns its base URL.
pub(crate) async fn start_proxy(
    upstream: &str,
    fast_path: bool,
    windows: &[(String, u64)],
) -> String {
    let mut config = cascade_proxy::ProxyConfig::new(upstream.to_owned());
    config.window.models = windows.iter().cloned().collect();
    config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.window.discover = false;
    config.requests.fast_path = fast_path;
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

/// Requests the proxy at `proxy` sent on its fast path so far (`/metrics`).
pub(crate) async fn fast_path_taken(client: &reqwest::Client, proxy: &str) -> u64 {
    let text = match client.get(format!("{proxy}/metrics")).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    (text.lines())
        .find_map(|l| l.strip_prefix("cascade_fast_path_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}
