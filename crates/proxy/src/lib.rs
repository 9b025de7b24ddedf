//! # cascade-proxy
//!
//! An HTTP proxy that gives the context cascade to any agent, in any language: point the
//! agent's base URL at it, and long sessions stop dying on "prompt is too long".
//!
//! - `POST /v1/chat/completions` (OpenAI-compatible) and `POST /v1/messages` (Anthropic):
//!   parsed, compacted for the model's window, forwarded with the client's headers; an
//!   overflow answer from the upstream runs the engine's retry loop (at most 5 calls);
//!   streaming answers are passed through as they arrive.
//! - `POST /v1/responses` (OpenAI Responses API) the same way; a request whose history the
//!   provider holds (`previous_response_id`, `conversation`) is forwarded untouched.
//! - Every other path and method is forwarded untouched.
//! - `GET /metrics` (Prometheus text) and `GET /healthz`.
//! - SQLite (or Redis, shared by replicas: `--state redis://...`): a summary cache, the
//!   token calibration per model, remembered facts per conversation, and the sticky prefix
//!   that keeps the provider's prompt cache hitting.
//! - `GET /`: the operator's status page ([`status`]; loopback only unless an admin token
//!   is set).
//!
//! ```no_run
//! # async fn run() -> Result<(), cascade_proxy::ProxyError> {
//! let config = cascade_proxy::ProxyConfig::new("http://127.0.0.1:8080");
//! let listener = tokio::net::TcpListener::bind(config.listen).await?;
//! cascade_proxy::serve(config, listener).await
//! # }
//! ```

// Unit tests may unwrap: a failure there is a test failure.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod ahead;
pub mod config;
pub mod error;
mod ops;
mod route;
mod state;
mod window;

// The paths the CLI, the tests and the examples use (narrowed in the next step).
pub use ahead::background;
pub use ops::{limits, metrics, status};
pub use route::{cut, responses, stream, upstream};
pub use state::{decisions, identity, memory, shared, stability, store, summary_cache, tenancy};
pub use window::{discovery, labels};

pub use cascade_llm::{EndpointSpec, Provider, SummarizerSpec};
pub use config::ProxyConfig;
pub use error::ProxyError;
pub use route::{AppState, REPORT_HEADER, router, serve, serve_state};
