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
//! - `GET /metrics` (Prometheus text; loopback only unless an admin token is set, like the
//!   status page) and `GET /healthz` (anyone, even at the connection limit).
//! - SQLite (or Redis, shared by replicas: `--state redis://...`): a summary cache, the
//!   token calibration per model, remembered facts per conversation, and the sticky prefix
//!   that keeps the provider's prompt cache hitting.
//! - `GET /`: the operator's status page (loopback only unless an admin token
//!   is set).
//!
//! Inside, a request on a cascade route goes through typed stages (`route/`): inbound (the
//! body read within limits, the tenant) → admission (the fast path sends it as it came, or
//! it is parsed) → preparation (remembered facts, the sticky prefix, the window's budget)
//! → the upstream call (the engine's retry loop) → outcome (the answer and its report
//! header); then the observers registered at startup (learned windows, the status page,
//! metrics, the sticky prefix, the calibration, background summaries). `state/` keeps what
//! outlives a request (the store), `window/` the model's window and the calibration,
//! `ops/` the operator's views and limits, `ahead/` the background summaries.
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
mod recall;
mod route;
mod state;
mod window;

pub use ahead::background::BackgroundStats;
pub use cascade_llm::{EndpointSpec, Provider, SummarizerSpec};
pub use config::{AdminToken, ProxyConfig};
pub use error::ProxyError;
pub use route::answer::REPORT_HEADER;
pub use route::app::AppState;
pub use route::{router, serve, serve_state, stop_signal};
/// What a conversation asked the proxy to remember (the latency example measures it).
pub use state::memory;
/// The state store: SQLite, or Redis shared by replicas (what the CLI opens and the tests
/// read back).
pub use state::store;
pub use state::tenancy::secret_path;
