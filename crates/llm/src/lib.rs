//! # cascade-llm
//!
//! HTTP clients for the two wire protocols the cascade speaks — OpenAI-compatible Chat
//! Completions and Anthropic Messages — with and without streaming, the core's
//! [`context_cascade::Llm`] trait on top of them, and [`LlmSummarizer`], the
//! LLM-backed summarizer of strategy ④.
//!
//! [`ChatClient::complete`] and [`ChatClient::stream`] need a Tokio runtime (the proxy's).
//! The trait implementations (`Llm` for [`ChatClient`], `Summarizer` for [`LlmSummarizer`])
//! run on the runtime the client's [`Executor`] names: the current one by default, or one
//! given by handle or started for the client ([`Executor::Dedicated`]), which lets any
//! executor — the CLI's `pollster::block_on` included — await them. No runtime is started
//! behind the caller's back.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cascade_llm::{ChatClient, ClientConfig, LlmSummarizer, Provider};
//! let client = ChatClient::new(
//!     ClientConfig::new(Provider::OpenAi, "http://127.0.0.1:8080").model("qwen3-8b"),
//! )?;
//! let answer = client
//!     .complete(serde_json::json!({"messages": [{"role": "user", "content": "hi"}]}))
//!     .await?;
//! println!("{} prompt tokens", answer.prompt_tokens.unwrap_or(0));
//! let summarizer = LlmSummarizer::new(client);
//! # let _ = summarizer;
//! # Ok(()) }
//! ```

// Unit tests may unwrap: a failure there is a test failure.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod client;
pub mod endpoint;
pub mod error;
pub mod executor;
pub mod http;
pub mod provider;
pub mod stream;
pub mod summarizer;

pub use client::{ChatClient, ClientConfig};
pub use endpoint::{EndpointSpec, SummarizerSpec};
pub use error::ClientError;
pub use executor::Executor;
pub use http::{header_pairs, transport_error};
pub use provider::{
    Provider, is_truncated, provider_compacted, response_text, responses_failure, usage_from_body,
    usage_from_response, usage_from_sse_event,
};
pub use stream::{SseEvent, SseStream, UsageProbe, UsageScanner};
pub use summarizer::prompt::TranscriptLimits;
pub use summarizer::{LlmSummarizer, SUMMARIZER_KEY_ENV, SummarizerPolicy};
