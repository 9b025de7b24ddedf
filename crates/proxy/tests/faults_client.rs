//! The fault matrix, client and store side, in both API shapes: a client that goes away
//! cancels its upstream request, 100 MB gets 413, a slow client is cut at the body
//! timeout, and an unusable database leaves requests served and `/healthz` degraded.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
mod faults;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cascade_test_support::upstream::{self, Answer};
use faults::{SHAPES, Shape, proxy, send};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Counts the upstream handlers dropped before they answered.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_request() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let counter = dropped.clone();
    let up = upstream::start_async(move |_, _| {
        let guard = Dropped(counter.clone());
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(guard);
            upstream::not_found()
        }) as Answer
    })
    .await;
    let proxy = proxy(&up.base, |_| {}).await;
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let body = shape.body("hi", false);
        let request = send(&proxy, shape.path(), &body);
        // The client gives up (drops its connection) while the upstream is thinking: once
        // the request is there (the first one may wait for a tokenizer's tables to load).
        let reached = async {
            while up.hits() <= i {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            _ = request => panic!("{shape:?}: answered while the upstream was thinking"),
            reached = tokio::time::timeout(Duration::from_secs(30), reached) => {
                assert!(reached.is_ok(), "{shape:?}: the request never reached the upstream");
            }
        }
        let mut cancelled = false;
        for _ in 0..250 {
            if dropped.load(Ordering::SeqCst) > i {
                cancelled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            cancelled,
            "{shape:?}: the upstream request outlived the client"
        );
    }
    assert_eq!(up.hits(), 2);
}

/// Sends a raw request head (and `body`) and returns what the proxy answers.
async fn raw(proxy: &str, head: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    // Until the answer's body is in (the proxy closes, or the JSON is complete).
    while let Ok(Ok(n)) =
        tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await
    {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..n]);
        if answer.ends_with(b"}") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

fn json_of(answer: &str) -> &str {
    answer.split("\r\n\r\n").nth(1).unwrap_or("")
}

#[tokio::test]
async fn a_100_mb_body_gets_413() {
    let up =
        upstream::start(|_, _| upstream::json(200, upstream::openai_completion("ok", 5))).await;
    let proxy = proxy(&up.base, |_| {}).await;
    for shape in SHAPES {
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            shape.path(),
            100 * 1024 * 1024
        );
        let answer = raw(&proxy, &head, b"{\"model\":").await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{shape:?}: {answer}");
        let message = shape.error_message(json_of(&answer));
        assert!(message.contains("limit"), "{message}");
    }
    assert_eq!(up.hits(), 0);
}

#[tokio::test]
async fn a_slow_client_is_cut_at_the_body_timeout() {
    let up =
        upstream::start(|_, _| upstream::json(200, upstream::openai_completion("ok", 5))).await;
    let proxy = proxy(&up.base, |c| {
        c.limits.body_read_timeout = Duration::from_millis(800)
    })
    .await;
    for shape in SHAPES {
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n",
            shape.path()
        );
        // A tenth of the body, then nothing.
        let started = std::time::Instant::now();
        let answer = raw(&proxy, &head, &[b' '; 50]).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(answer.starts_with("HTTP/1.1 408"), "{shape:?}: {answer}");
        let message = shape.error_message(json_of(&answer));
        assert!(message.contains("did not arrive"), "{message}");
    }
    assert_eq!(up.hits(), 0);
}

#[tokio::test]
async fn an_unusable_database_still_serves_and_health_says_degraded() {
    let dir = std::env::temp_dir().join(format!("cascade-fault-db-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = dir.join("cascade.db");
    let up = upstream::start(|_, r| {
        if r.path == "/v1/messages" {
            upstream::json(200, upstream::anthropic_message("ok", 50))
        } else {
            upstream::json(200, upstream::openai_completion("ok", 50))
        }
    })
    .await;
    let path = db.clone();
    let proxy = proxy(&up.base, move |c| c.state.path = path).await;
    let health = || async {
        reqwest::get(format!("{proxy}/healthz"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    assert_eq!(health().await, "ok\n");
    // Someone else breaks the database under the running proxy.
    let other = rusqlite::Connection::open(&db).unwrap();
    other
        .execute_batch(
            "DROP TABLE facts; DROP TABLE sessions; DROP TABLE summaries; DROP TABLE calibration;",
        )
        .unwrap();
    drop(other);
    for shape in SHAPES {
        let body = shape.body("Please remember that the deploy key is K-42.", false);
        let response = send(&proxy, shape.path(), &body).await;
        assert_eq!(response.status(), 200, "{shape:?}");
        let health = health().await;
        assert!(health.starts_with("degraded"), "{shape:?}: {health}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shapes_cover_both_apis() {
    assert_eq!(
        SHAPES.map(Shape::path),
        ["/v1/chat/completions", "/v1/messages"]
    );
}
