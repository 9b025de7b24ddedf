//! The fault matrix's shared pieces: the two API shapes, a proxy in front of a scripted
//! upstream, and the checks on an error answer's shape.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub, dead_code)] // test code

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;
use serde_json::{Value, json};

/// The two API shapes every fault is tried in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
}

pub const SHAPES: [Shape; 2] = [Shape::OpenAi, Shape::Anthropic];

impl Shape {
    pub fn path(self) -> &'static str {
        match self {
            Shape::OpenAi => "/v1/chat/completions",
            Shape::Anthropic => "/v1/messages",
        }
    }

    /// A small request; `stream` asks for SSE.
    pub fn body(self, text: &str, stream: bool) -> Value {
        let messages = json!([{"role": "user", "content": text}]);
        match self {
            Shape::OpenAi => json!({"model": "gpt-4o", "stream": stream, "messages": messages}),
            Shape::Anthropic => json!({"model": "claude-sonnet-4-5", "max_tokens": 64,
                "stream": stream, "messages": messages}),
        }
    }

    /// Asserts `text` is this shape's error body and returns its message.
    pub fn error_message(self, text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let message = match self {
            Shape::OpenAi => &v["error"]["message"],
            Shape::Anthropic => {
                assert_eq!(v["type"], "error", "{text}");
                &v["error"]["message"]
            }
        };
        message
            .as_str()
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned()
    }
}

/// A proxy in front of `upstream` with an in-memory store, no discovery, `configure` on top.
pub async fn proxy(upstream: &str, configure: impl FnOnce(&mut ProxyConfig)) -> String {
    let mut config = ProxyConfig::new(upstream);
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    configure(&mut config);
    crate::common::start_proxy(config).await.0
}

/// POSTs `body` to the proxy at `path`.
pub async fn send(proxy: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{proxy}{path}"))
        .header("authorization", "Bearer sk-fault")
        .json(body)
        .send()
        .await
        .unwrap()
}
