//! # context_cascade
//!
//! Keeps a long LLM agent conversation inside the model's context window without losing
//! what matters. Five strategies, cheapest first; each is a plain function over a
//! [`Conversation`] and a [`Budget`] that reports what it did as a [`report::Step`]:
//!
//! ```text
//!  before every call (Layer 1)          E = window − output reserve
//!  ┌──────────────────────────────┐
//!  │ ① truncate one tool result   │  a result over 0.5·E is cut (truncate.rs)
//!  │ ② compact old tool results   │  over 0.75·E, oldest first down to 0.6·E (compact_tools.rs)
//!  └──────────────┬───────────────┘
//!                 │ still over 0.9·E, or the provider says "prompt is too long"
//!  ┌──────────────▼───────────────┐
//!  │ ③ prune the middle           │  keep system, first user, pins, recent, current (prune.rs)
//!  │ ④ summarize the middle       │  nine sections, chunked, via a Summarizer (summarize.rs)
//!  │ ⑤ degrade                    │  partial summary → small messages → bare notice (degrade.rs)
//!  └──────────────┬───────────────┘
//!                 │ call again: at most 5 calls, escalating (retry.rs)
//!                 ▼
//!  calibrate the estimate from the tokens the provider reports (calibrate.rs)
//! ```
//!
//! [`ContextManager`] (engine.rs) composes them: `prepare` before each call, `call` for the
//! whole retry loop over an [`llm::Llm`]. The core does no I/O: summaries go through the
//! [`summarizer::Summarizer`] trait (the deterministic [`offline::OfflineSummarizer`] ships
//! here; an LLM-backed one lives in `cascade-llm`).
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

pub mod calibrate;
pub mod catalog;
pub mod compact_tools;
pub mod config;
pub mod conversation;
pub mod degrade;
pub mod engine;
pub mod error;
pub mod estimate;
pub mod format;
pub mod llm;
pub mod markers;
pub mod middle;
pub mod offline;
pub mod overflow;
pub mod prune;
pub mod remember;
pub mod repair;
pub mod report;
pub mod retry;
pub mod step;
pub mod summarize;
pub mod summarizer;
pub mod tool_names;
mod trail;
pub mod truncate;

pub use config::{Budget, CascadeConfig};
pub use conversation::{Block, Conversation, Format, Message, Role, Shape, ToolCall, ToolResult};
pub use engine::ContextManager;
pub use error::{Error, ParseError};
pub use report::{Report, Step, Strategy};
pub use retry::{CallError, Called, Recovery};
