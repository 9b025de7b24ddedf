//! A model's first request counted by the llama.cpp server that serves it.
//!
//! Until the upstream's first usage report, the estimate is the prior alone, off by 6–14%
//! on a Llama model's first requests (docs/benchmarks.md §11); later requests are calibrated by
//! the usage each answer reports, within 0.2% median. A llama.cpp server (found by window
//! discovery, `GET /props`) can count the first one itself: `POST /apply-template` renders
//! the request with the model's chat template, `POST /tokenize` counts it, and the count
//! is folded in as a calibration observation before the cascade decides, so the first
//! estimate is the server's own count (on SmolLM2 it equals the `prompt_tokens` the server
//! then bills). Two calls per model, once; not on later requests, where the whole prompt
//! would cost a round trip and a full tokenization every time, and per-message counts
//! would miss the template's framing.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// How long each of the two calls may take (the request waits for them): a slow server
/// is estimated by the prior.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The tokens llama.cpp at `base` counts for the chat request `body` (OpenAI Chat: its
/// `messages` and `tools`), rendered as the server would render it; `None` when the server
/// does not answer both calls as llama.cpp does.
pub(crate) async fn prompt_tokens(
    client: &reqwest::Client,
    base: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<u64> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let mut request = json!({ "messages": body.get("messages")? });
    if let Some(tools) = body.get("tools") {
        request["tools"] = tools.clone();
    }
    let post = |path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .headers(headers.clone())
            .timeout(TIMEOUT)
            .json(&body)
            .send()
    };
    let rendered = answer(post("/apply-template", request).await).await?;
    let prompt = rendered.get("prompt")?.as_str()?;
    // As the server tokenizes a chat prompt: with its special tokens, parsed as such.
    let tokenize = json!({"content": prompt, "add_special": true, "parse_special": true});
    let tokens = answer(post("/tokenize", tokenize).await).await?;
    Some(tokens.get("tokens")?.as_array()?.len() as u64)
}

async fn answer(response: reqwest::Result<reqwest::Response>) -> Option<Value> {
    let response = response.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json::<Value>().await.ok()
}
