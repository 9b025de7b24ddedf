//! # context_cascade
//!
//! Keeps a long LLM agent conversation inside the model's context window without losing
//! what matters. Five strategies, cheapest first; each is a plain function over a
//! [`Conversation`] and a [`Budget`] that reports what it did as a [`Step`]:
//!
//! ```text
//!  would the cascade change anything? (untouched.rs)  ── no ──▶ sent as it came
//!                 │ yes                     E = window − output reserve
//!  ┌──────────────▼───────────────┐
//!  │ ① truncate one tool result   │  a result over 0.5·E is cut          strategy/truncate.rs
//!  │ ② compact old tool results   │  over 0.75·E, oldest first to 0.6·E  strategy/compact_tools.rs
//!  └──────────────┬───────────────┘  (Layer 1)
//!                 │ still over 0.9·E, or the provider says "prompt is too long"
//!  ┌──────────────▼───────────────┐
//!  │ ③ prune the middle           │  keep system, first user, pins,      strategy/prune.rs
//!  │                              │  recent, current; leave a trail
//!  │ ④ summarize the middle       │  nine sections, chunked, through a   strategy/summarize.rs
//!  │                              │  Summarizer
//!  │ ⑤ degrade                    │  partial summary → small messages    strategy/degrade.rs
//!  │                              │  → bare notice
//!  └──────────────┬───────────────┘  (Layer 2/3: what they share is in middle/)
//!                 │ one attempt at a time up one ladder (escalation.rs, engine/ladder.rs);
//!                 │ call again: at most 5 calls (retry.rs)
//!                 ▼
//!  calibrate the estimate from the tokens the provider reports (calibrate.rs)
//! ```
//!
//! [`ContextManager`] (engine/) only composes them: `prepare` before each call,
//! `compact_with_summary` for a one-off compaction, `compact` for a sync one without a
//! summarizer, `call` for the whole retry loop over an [`Llm`]. All of them walk one
//! escalation ladder: the same [`Recovery`] attempts, and one rule for whether an
//! attempt's rewrite is kept. The core does no I/O: summaries go through the
//! [`summarizer::Summarizer`] trait (the deterministic [`OfflineSummarizer`] ships here; an
//! LLM-backed one lives in `cascade-llm`).
//!
//! ## Where things are
//!
//! ```text
//! engine/     ContextManager: the entry points, the estimate in force, the ladder walk
//! strategy/   ① truncate  ② compact_tools  ③ prune  ④ summarize  ⑤ degrade
//! middle/     what ③–⑤ share: the split of the history, the replacement and its trail,
//!             a summary's plan and the summarizer's call
//! trail/      what a removal leaves behind (files, commands, errors, requests)
//! extract/    what tool calls and outputs name (paths, commands, error ids), read by
//!             the trail and the offline summarizer
//! offline/    the deterministic summarizer
//! ahead/      summaries prepared between turns
//! format/     the wire formats (Chat, Anthropic Messages, Responses), read and written
//! estimate/   the token estimate (and exact counts, feature `exact`)
//! remember/   which user messages ask to be remembered (pinned)
//! recall/     what removals keep: handles, chunks, BM25 ranking, the store, the tool
//! escalation.rs  step.rs  report.rs  untouched.rs  prefix.rs  identity.rs  replay.rs ...
//! ```
//!
//! ## The public surface
//!
//! * At the root: the conversation model ([`Conversation`], [`Message`], [`Block`],
//!   [`Role`], [`Format`], ...), [`Budget`] and [`CascadeConfig`], [`ContextManager`] and
//!   what it returns ([`Report`], [`Step`], [`Strategy`], [`Called`], [`CallError`],
//!   [`Recovery`]), [`Load`] for "would the cascade change anything?"
//!   ([`ContextManager::would_change`], [`CascadeConfig::leaves_untouched`]), [`MessageId`]
//!   (the one identity of a message), the [`Llm`] trait with [`Completion`] and
//!   [`LlmError`], [`classify`] and [`Overflow`] for provider errors, [`Calibration`],
//!   [`RememberPolicy`], [`OfflineSummarizer`], [`BoxFuture`], the errors, and the marker
//!   strings the cascade writes ([`SUMMARY_PREFIX`], [`COMPACTED`], [`TRUNCATED`],
//!   [`RESULT_REMOVED`], [`SUMMARY_SECTIONS`]).
//! * Seven namespaces for concepts with several parts: [`format`](mod@format) (reading and
//!   writing the wire formats), [`estimate`] (the token estimate, and `estimate::exact`
//!   with the `exact` feature), [`summarizer`] (the trait, its request and errors, the
//!   section helpers), [`catalog`] (context windows and token scales of known models),
//!   [`tool_names`] (which tool results ② may compact), [`replay`] (a transcript
//!   replayed as the agent loop that produced it, and prefix comparison) and [`recall`]
//!   (removed content kept under handles and brought back by handle or search).
//!
//! Everything else is private to the crate and reached through [`ContextManager`].
//!
//! ```
//! use context_cascade::{Budget, CascadeConfig, ContextManager, format};
//!
//! let big = "x".repeat(40_000);
//! let body = serde_json::json!({"model": "gpt-4o", "messages": [
//!     {"role": "user", "content": "read the log"},
//!     {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
//!         "function": {"name": "bash", "arguments": "{\"command\":\"cat log\"}"}}]},
//!     {"role": "tool", "tool_call_id": "1", "content": big},
//!     {"role": "user", "content": "what failed?"}]});
//! let mut conversation = format::parse(body.to_string().as_bytes(), None)?;
//! let manager = ContextManager::new(CascadeConfig::default());
//! let report = pollster::block_on(manager.prepare(&mut conversation, Budget::new(8_000, 0)));
//! assert!(report.fits);
//! assert_eq!(report.summary_line(), "truncate_tool_result=1");
//! # Ok::<(), context_cascade::ParseError>(())
//! ```

// The public surface: namespaces for concepts with several parts (and `logged`, the one
// rule for client text in a log line, which every crate of the workspace follows), the rest
// at the root. Every other module is an implementation detail of the cascade.
pub mod catalog;
pub mod cost;
pub mod estimate;
pub mod format;
pub mod logged;
pub mod recall;
pub mod replay;
pub mod settings;
pub mod summarizer;
pub mod tool_names;

mod ahead;
mod balance;
mod calibrate;
mod config;
mod conversation;
mod counts;
mod engine;
mod error;
mod escalation;
mod extract;
mod identity;
mod join;
mod llm;
mod markers;
mod middle;
mod offline;
mod overflow;
mod prefix;
mod remember;
mod repair;
mod report;
mod retry;
mod step;
mod strategy;
mod trail;
mod untouched;

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future (what the async methods of [`summarizer::Summarizer`] and
/// [`Llm`] return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use ahead::{PreparedSummaries, PreparedSummary};
pub use calibrate::{Calibration, Scale};
pub use config::{
    BackgroundConfig, Budget, CalibrationConfig, CascadeConfig, ConfigError, ExperimentalConfig,
    Layer1Config, RecoveryConfig, ToolLists,
};
pub use conversation::{
    Block, Conversation, Format, Message, Opaque, Role, Shape, TextBlock, ToolCall, ToolResult,
};
pub use engine::ContextManager;
pub use error::{Error, ParseError};
pub use escalation::{OldResults, Recovery, Tail};
pub use identity::{BadMessageId, MessageId};
pub use llm::{Completion, Llm, LlmError};
pub use markers::{
    COMPACTED, RESULT_REMOVED, SUMMARY_PREFIX, SUMMARY_SECTIONS, TRUNCATED, is_cascade_notice,
};
pub use offline::{OfflineConfig, OfflineSummarizer};
pub use overflow::{Overflow, classify};
pub use remember::RememberPolicy;
pub use report::{Report, Step, Strategy};
pub use retry::{CallError, Called};
pub use trail::{TrailConfig, TrailStats};
pub use untouched::Load;

/// The README's library example, compiled with the doc tests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExample;
