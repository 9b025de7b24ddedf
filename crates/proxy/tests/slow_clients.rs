//! Slow clients cannot hold the proxy: a request head or body that trickles in is cut at
//! its read timeout, and connections beyond the limit are answered 503 with `retry-after`
//! until a slot frees (connection_admission.rs has the hostile cases).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::time::{Duration, Instant};

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_test_support::upstream;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn proxy(configure: impl FnOnce(&mut ProxyConfig)) -> String {
    let up =
        upstream::start(|_, _| upstream::json(200, upstream::openai_completion("ok", 9))).await;
    let mut config = ProxyConfig::new(up.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    configure(&mut config);
    common::start_proxy(config).await.0
}

/// Writes `bytes` one at a time, `pause` apart, until the proxy closes the connection;
/// returns how long that took (or `None` when every byte went out).
async fn trickle(stream: &mut TcpStream, bytes: &[u8], pause: Duration) -> Option<Duration> {
    let started = Instant::now();
    for byte in bytes {
        if stream.write_all(&[*byte]).await.is_err() {
            return Some(started.elapsed());
        }
        let mut buffer = [0u8; 512];
        // The proxy closing (or answering 408) shows up as a readable socket.
        if let Ok(read) = tokio::time::timeout(pause, stream.read(&mut buffer)).await {
            let _ = read;
            return Some(started.elapsed());
        }
    }
    None
}

#[tokio::test]
async fn a_trickling_request_head_is_cut_at_the_header_timeout() {
    let proxy = proxy(|c| c.limits.header_read_timeout = Duration::from_secs(2)).await;
    let address = proxy.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let cut = trickle(&mut stream, head, Duration::from_millis(500)).await;
    let cut = cut.expect("the connection stayed open");
    assert!(
        cut >= Duration::from_millis(1500) && cut < Duration::from_secs(5),
        "{cut:?}"
    );
}

#[tokio::test]
async fn a_trickling_body_is_cut_at_the_body_timeout() {
    let proxy = proxy(|c| c.limits.body_read_timeout = Duration::from_secs(2)).await;
    let address = proxy.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let body =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "x".repeat(200)}]})
            .to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let cut = trickle(&mut stream, body.as_bytes(), Duration::from_millis(500)).await;
    cut.expect("the connection stayed open");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn connections_beyond_the_limit_are_told_to_retry_until_a_slot_frees() {
    let proxy = proxy(|c| {
        c.limits.max_connections = 2;
        // Both held connections are this client's unfinished heads: a quarter of 2 would
        // let the request close them (connection_admission.rs tests that).
        c.limits.max_unfinished_heads_per_peer = Some(8);
    })
    .await;
    let address = proxy.trim_start_matches("http://").to_owned();
    let held = vec![
        TcpStream::connect(&address).await.unwrap(),
        TcpStream::connect(&address).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    let client = reqwest::Client::new();
    let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let send = || {
        client
            .post(format!("{proxy}/v1/chat/completions"))
            .timeout(Duration::from_secs(5))
            .json(&body)
            .send()
    };
    let refused = send().await.unwrap();
    assert_eq!(refused.status(), 503, "a third connection was served");
    assert_eq!(refused.headers()["retry-after"], "1");
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(send().await.unwrap().status(), 200);
}
