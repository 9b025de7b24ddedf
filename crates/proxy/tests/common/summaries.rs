//! What a scripted LLM summarizer answers: a chat completion with nine short sections.
//! Shared by the background summary test and its example (which includes this file).

#![allow(dead_code, unreachable_pub)] // each includer uses part of it

use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A nine-section summary, short enough for any room the cascade leaves.
pub fn nine_sections() -> String {
    (context_cascade::SUMMARY_SECTIONS.iter().enumerate())
        .map(|(i, title)| format!("## {}. {title}\n- noted", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A chat completion answering `text`, without usage (so that it calibrates nothing).
pub fn answer(text: &str) -> Response {
    axum::Json(
        json!({"choices": [{"message": {"role": "assistant", "content": text},
        "finish_reason": "stop"}]}),
    )
    .into_response()
}
