//! The fault matrix, upstream side, in both API shapes: errors pass through with
//! `retry-after`, a hang becomes 504 at the configured timeout, a body cut short becomes
//! 502, and an upstream that always overflows gets at most 5 calls. (A cut or stalled
//! stream: `stream_faults.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
mod faults;

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::response::Response;
use cascade_test_support::upstream::{self, Answer};
use cascade_test_support::{OverflowKind, overflow_body};
use faults::{SHAPES, Shape, proxy, send};
use futures::StreamExt;

#[tokio::test]
async fn server_errors_and_rate_limits_pass_through_with_retry_after() {
    for shape in SHAPES {
        for (status, body) in [
            (
                503,
                r#"{"error":{"message":"overloaded","type":"overloaded_error"}}"#,
            ),
            (
                429,
                r#"{"error":{"message":"rate limited","type":"rate_limit_error"}}"#,
            ),
            (500, r#"{"error":{"message":"boom","type":"api_error"}}"#),
        ] {
            let up = upstream::start(move |_, _| {
                let headers = [("retry-after".to_owned(), "7".to_owned())];
                upstream::raw_json(status, body.to_owned(), &headers)
            })
            .await;
            let proxy = proxy(&up.base, |_| {}).await;
            let response = send(&proxy, shape.path(), &shape.body("hi", false)).await;
            assert_eq!(response.status(), status, "{shape:?}");
            assert_eq!(response.headers()["retry-after"], "7", "{shape:?} {status}");
            assert_eq!(response.text().await.unwrap(), body);
            assert_eq!(up.hits(), 1, "{shape:?} {status}: not retried");
        }
    }
}

#[tokio::test]
async fn a_hanging_upstream_gets_504_at_the_timeout() {
    let silent = upstream::start_silent().await;
    let proxy = proxy(&silent, |c| {
        c.limits.upstream_timeout = Duration::from_millis(700)
    })
    .await;
    for shape in SHAPES {
        let started = Instant::now();
        let response = send(&proxy, shape.path(), &shape.body("hi", false)).await;
        let took = started.elapsed();
        assert_eq!(response.status(), 504, "{shape:?}");
        assert!(
            took >= Duration::from_millis(600) && took < Duration::from_secs(5),
            "{took:?}"
        );
        let message = shape.error_message(&response.text().await.unwrap());
        assert!(message.contains("in time"), "{message}");
    }
}

/// An answer that promises 1000 bytes and breaks after a few.
fn cut_body() -> Response {
    let pieces = futures::stream::iter([Ok(Bytes::from_static(b"{\"id\":\"x\",\"cho"))]);
    let cut = futures::stream::once(async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Err::<Bytes, _>(std::io::Error::other("cut"))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("content-length", "1000")
        .body(Body::from_stream(pieces.chain(cut)))
        .unwrap()
}

#[tokio::test]
async fn a_cut_body_gets_502() {
    let up = upstream::start_async(|_, _| Box::pin(async { cut_body() }) as Answer).await;
    let proxy = proxy(&up.base, |_| {}).await;
    for shape in SHAPES {
        let response = send(&proxy, shape.path(), &shape.body("hi", false)).await;
        assert_eq!(response.status(), 502, "{shape:?}");
        let message = shape.error_message(&response.text().await.unwrap());
        assert!(message.contains("upstream"), "{message}");
    }
}

#[tokio::test]
async fn endless_overflow_stops_after_five_upstream_calls() {
    for shape in SHAPES {
        let kind = match shape {
            Shape::OpenAi => OverflowKind::OpenAi,
            Shape::Anthropic => OverflowKind::Anthropic,
        };
        let (status, body) = overflow_body(kind);
        let up = upstream::start(move |_, _| upstream::raw_json(status, body.clone(), &[])).await;
        let proxy = proxy(&up.base, |c| c.window.force = Some(100_000)).await;
        let long = "Message: the build failed because the parser rejected an input. ".repeat(400);
        let response = send(&proxy, shape.path(), &shape.body(&long, false)).await;
        assert_eq!(response.status(), 400, "{shape:?}");
        let message = shape.error_message(&response.text().await.unwrap());
        assert!(message.contains("context window"), "{message}");
        assert!(
            (1..=5).contains(&up.hits()),
            "{shape:?}: {} upstream calls",
            up.hits()
        );
    }
}
