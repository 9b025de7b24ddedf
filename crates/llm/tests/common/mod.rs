//! The shared scripted upstream (cascade-test-support) in the shapes these tests use.

#![allow(dead_code, unused_imports, unreachable_pub)] // each test file uses a different part

use std::time::Duration;

use axum::response::Response;
use cascade_test_support::OverflowKind;
use serde_json::Value;

pub use cascade_test_support::upstream::{
    Recorded, Upstream, json, stalled_stream, start, start_silent,
};

/// An SSE answer sent in the given chunks, 5 ms apart so that they really arrive separately.
pub fn sse(chunks: Vec<String>) -> Response {
    cascade_test_support::upstream::sse(chunks, Duration::from_millis(5))
}

/// A loopback address nothing listens on.
pub async fn refused_base() -> String {
    cascade_test_support::upstream::refused_base()
}

/// OpenAI's overflow body (from the fixtures), for a window of 8192 tokens and 9000 sent.
pub fn openai_overflow() -> Value {
    overflow(OverflowKind::OpenAi, 8192, 9000)
}

/// A provider's overflow body (from the fixtures) with the test's sizes.
pub fn overflow(kind: OverflowKind, window: u64, prompt: u64) -> Value {
    let (_, body) = cascade_test_support::overflow_body_sized(kind, window, prompt);
    serde_json::from_str(&body).expect("the fixture body is JSON")
}
