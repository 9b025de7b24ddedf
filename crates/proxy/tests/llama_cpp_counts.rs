//! A model served by llama.cpp (found by window discovery, `GET /props`) has its first
//! request counted by the server itself (`POST /apply-template`, then `POST /tokenize`):
//! the cascade decides on that count, not on the uncalibrated prior. A scripted upstream
//! answers as llama.cpp does and counts twice the prior's estimate, so the first request,
//! which the prior says fits, is compacted; without those endpoints it goes as it came.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod common;

use std::sync::Arc;

use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, ProxyConfig, REPORT_HEADER};
use cascade_test_support::upstream::{Upstream, json, not_found, openai_completion, start};
use context_cascade::{Budget, CascadeConfig, ContextManager, format};
use serde_json::{Value, json};

const N_CTX: u64 = 16_000;
const MODEL: &str = "smollm2";

/// A session the prior puts at about 70% of E at `N_CTX` (under every threshold).
fn body() -> Value {
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(N_CTX, 1_000);
    let mut messages = vec![json!({"role": "user", "content": "Look at the logs."})];
    for i in 0.. {
        let id = format!("call_{i}");
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
        );
        let output = format!("line {i}: nothing to report here\n").repeat(60);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        let body = json!({"model": MODEL, "max_tokens": 1_000, "messages": messages});
        let conversation = format::parse(body.to_string().as_bytes(), None).unwrap();
        if manager.estimate(&conversation) > budget.share(0.7) {
            return body;
        }
    }
    unreachable!()
}

/// llama.cpp's endpoints (when `counts` is some: the tokenizer's count), answers without usage.
async fn llama_cpp(counts: Option<u64>) -> Upstream {
    start(move |_, request| match (request.path.as_str(), counts) {
        ("/props", _) => json(
            200,
            json!({"default_generation_settings": {"n_ctx": N_CTX}}),
        ),
        ("/apply-template", Some(_)) => json(
            200,
            json!({"prompt": "<|im_start|>user\nLook at the logs."}),
        ),
        ("/tokenize", Some(tokens)) => json(200, json!({"tokens": vec![1; tokens as usize]})),
        ("/v1/chat/completions", _) => {
            let mut answer = openai_completion("ok", 0);
            answer.as_object_mut().unwrap().remove("usage");
            json(200, answer)
        }
        _ => not_found(),
    })
    .await
}

async fn proxy(upstream: &str) -> (String, Arc<AppState>) {
    let mut config = ProxyConfig::new(upstream);
    config.state.path = IN_MEMORY_DB.into();
    common::start_proxy(config).await
}

/// Sends `body` twice; returns the report header of each answer.
async fn twice(proxy: &str, body: &Value) -> Vec<String> {
    let client = reqwest::Client::new();
    let mut reports = Vec::new();
    for _ in 0..2 {
        let response = common::send_chat(&client, proxy, body).await;
        assert!(response.status().is_success());
        reports.push(
            (response.headers().get(REPORT_HEADER))
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
        );
    }
    reports
}

#[tokio::test]
async fn the_first_request_is_decided_on_the_llama_cpp_count() {
    let body = body();
    let conversation = format::parse(body.to_string().as_bytes(), None).unwrap();
    let estimate = ContextManager::new(CascadeConfig::default()).estimate(&conversation);
    let upstream = llama_cpp(Some(2 * estimate)).await;
    let (proxy, state) = proxy(&upstream.base).await;
    let reports = twice(&proxy, &body).await;
    assert!(
        !reports[0].is_empty(),
        "the first request was not compacted"
    );
    let paths = upstream.paths();
    let counted = |path: &str| paths.iter().filter(|p| *p == path).count();
    assert_eq!((counted("/apply-template"), counted("/tokenize")), (1, 1));
    let scale = state.manager().calibration().get(MODEL).unwrap();
    assert_eq!(scale.observations, 1);
    let metrics = reqwest::get(format!("{proxy}/metrics")).await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(
        metrics.contains("cascade_llama_cpp_counts_total 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn without_the_tokenizer_endpoints_the_prior_decides() {
    let body = body();
    let upstream = llama_cpp(None).await;
    let (proxy, state) = proxy(&upstream.base).await;
    let reports = twice(&proxy, &body).await;
    assert_eq!(reports, ["", ""], "the prior says the request fits");
    assert!(state.manager().calibration().get(MODEL).is_none());
}
