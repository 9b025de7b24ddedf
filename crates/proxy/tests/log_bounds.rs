//! What a client sends cannot flood the log: a model name is logged as a bounded prefix
//! with its length, a warning about one name is logged once a minute however many
//! requests repeat it, and a client naming a new model on every request gets a bounded
//! number of lines. (One 5 MB unknown model name used to write ~10 MB per request; 10,000
//! requests, 20,000 lines.)
//!
//! The requests go through the proxy's router to a scripted upstream, with the CLI's log
//! format (tracing-subscriber's fmt) writing into a buffer, at `info` (the CLI's default is
//! `warn`: this is stricter).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, ProxyConfig, router};
use cascade_test_support::upstream;
use serde_json::json;
use tower::ServiceExt;

/// Everything the subscriber wrote.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

async fn send(app: &axum::Router, model: &str) {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    let request = axum::http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("authorization", "Bearer k")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn long_and_many_unknown_model_names_write_a_bounded_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let up =
        upstream::start(|_, _| upstream::json(200, upstream::openai_completion("ok", 9))).await;
    let mut config = ProxyConfig::new(up.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    let app = router(AppState::new(config).unwrap());

    // One 5 MB name, then a 100 kB name twenty times.
    send(&app, &"m".repeat(5_000_000)).await;
    let repeated = "r".repeat(100_000);
    for _ in 0..20 {
        send(&app, &repeated).await;
    }
    let log = captured.text();
    let about_repeated = log.lines().filter(|l| l.contains("rrrr")).count();
    assert_eq!(about_repeated, 1, "{log}");
    assert!(log.contains("…(5000000 bytes)") && log.contains("…(100000 bytes)"));
    assert!(log.len() < 4 * 1024, "{} bytes logged", log.len());

    // A new name on every request: 300 of them, more than the filter keeps.
    for i in 0..300 {
        send(&app, &format!("junk-{i}-{}", "j".repeat(2_000))).await;
    }
    let log = captured.text();
    let lines = log.lines().count();
    assert!(lines <= 256 + 8, "{lines} lines");
    assert!(log.len() < 256 * 300, "{} bytes logged", log.len());
    let longest = log.lines().map(str::len).max().unwrap();
    eprintln!(
        "{lines} lines, {} bytes; the first:\n{}",
        log.len(),
        log.lines().take(3).collect::<Vec<_>>().join("\n")
    );
    assert!(longest < 400, "a line of {longest} bytes");
}
