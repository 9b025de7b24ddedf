//! Recall: nothing the cascade removes is lost.
//!
//! Whatever a step removes — ①'s cut tail, ②'s compacted result, the ranges ③, ④ and ⑤
//! take out — is kept as a [`Removal`] under a short [`Handle`], and the marker left in
//! its place carries that handle on its own line after the marker text. A model gets it
//! back with one tool, `context_recall` ([`tool`]): by handle, or by a search over every
//! removed chunk of its conversation (BM25, [`Index`]) within a token budget.
//!
//! The strategies stay pure: each returns what it removed in its [`crate::Step`]
//! (`Step::removed`), and whoever holds a store keeps it — [`crate::ContextManager`] with a
//! [`RecallStore`] (in memory by default, [`MemoryStore`]), or the proxy in its own
//! encrypted, per-tenant state.
//!
//! ```
//! use std::sync::Arc;
//! use context_cascade::recall::{MemoryStore, RecallCall, Scope};
//! use context_cascade::{Budget, CascadeConfig, ContextManager, format};
//!
//! let log = (0..4000).map(|i| format!("step {i}: ok\n")).collect::<String>()
//!     + "error[E0425]: cannot find value `retry_budget` in this scope\n";
//! let body = serde_json::json!({"model": "gpt-4o", "messages": [
//!     {"role": "user", "content": "build it"},
//!     {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
//!         "function": {"name": "bash", "arguments": "{\"command\":\"cargo build\"}"}}]},
//!     {"role": "tool", "tool_call_id": "1", "content": log},
//!     {"role": "user", "content": "why did it fail?"}]});
//! let mut conversation = format::parse(body.to_string().as_bytes(), None)?;
//! let scope = Scope::new("me", "session-1")?;
//! let manager = ContextManager::new(CascadeConfig::default())
//!     .with_recall(Arc::new(MemoryStore::default()), scope);
//! pollster::block_on(manager.prepare(&mut conversation, Budget::new(8_000, 0)));
//! // The cut result now ends with its marker and, on the next line, its handle.
//! let tool = manager.recall_tool(conversation.format).expect("recall is on");
//! assert_eq!(tool["function"]["name"], "context_recall");
//! let call = RecallCall::from_arguments(&serde_json::json!({"query": "retry_budget"}))?;
//! let answer = manager.recall(&call)?;
//! assert!(answer.text.contains("cannot find value `retry_budget`"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod answer;
mod chunk;
mod handle;
mod memory;
mod rank;
pub mod tool;

pub use answer::{ANSWER_TOKENS, RecallCall, Recalled, answer};
pub(crate) use chunk::call_text;
pub use chunk::{CHUNK_CHARS, Chunk, Removal};
pub use handle::{Handle, HandleRef};
pub use memory::MemoryStore;
pub use rank::Index;

/// How a handle line starts.
pub(crate) const HANDLE_PREFIX: &str = "recall handle: ";

/// The line that carries a removal's handle, after the marker it belongs to.
pub fn handle_line(handle: Handle) -> String {
    format!("{HANDLE_PREFIX}{handle}")
}

/// Whose removed content: a tenant (the client's credential, hashed by whoever holds it)
/// and one of its conversations. A store keeps each scope apart; a recall never reads
/// another scope's chunks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    tenant: String,
    conversation: String,
}

impl Scope {
    /// A scope. Fails closed: without a tenant there is no scope, so nothing is kept or
    /// recalled under a shared, tenantless key.
    pub fn new(
        tenant: impl Into<String>,
        conversation: impl Into<String>,
    ) -> Result<Scope, RecallError> {
        let tenant = tenant.into();
        if tenant.trim().is_empty() {
            return Err(RecallError::NoTenant);
        }
        Ok(Scope {
            tenant,
            conversation: conversation.into(),
        })
    }

    /// The tenant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The conversation.
    pub fn conversation(&self) -> &str {
        &self.conversation
    }
}

/// Why a recall could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecallError {
    /// No tenant: nothing is kept or recalled without one.
    #[error("recall needs a tenant: nothing is kept or recalled without one")]
    NoTenant,
    /// A handle that is not 12 hex digits (optionally `/part`).
    #[error("a recall handle is 12 hex digits, optionally /part, not {0:?}")]
    BadHandle(String),
    /// The tool's arguments hold neither a query nor a handle, or are not an object.
    #[error("context_recall arguments: {0}")]
    BadArguments(String),
    /// The manager has no recall store (`ContextManager::with_recall`).
    #[error("recall is off: the manager has no recall store")]
    Off,
    /// The store failed.
    #[error("recall store: {0}")]
    Store(String),
}

/// Where removed content is kept, per [`Scope`]. [`MemoryStore`] is the default; an agent
/// that wants its originals to outlive the process provides another.
pub trait RecallStore: Send + Sync {
    /// Keeps `chunks` in `scope`. A chunk already kept (same handle and part) is kept once.
    fn put(&self, scope: &Scope, chunks: Vec<Chunk>) -> Result<(), RecallError>;

    /// Answers a call from the chunks of `scope` within `max_tokens` (see [`answer`]).
    fn recall(
        &self,
        scope: &Scope,
        call: &RecallCall,
        max_tokens: u64,
    ) -> Result<Recalled, RecallError>;
}
