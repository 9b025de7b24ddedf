//! Recall in the proxy: what the cascade removes from a request is kept per tenant and
//! conversation, sealed, in the state store (SQLite or Redis, under the store's time to
//! live and size cap), and a recall call is answered from it.
//!
//! Search over sealed chunks: the database holds no text and no handle, so it cannot
//! search; SQLite's FTS5 over ciphertext finds nothing, and an index of plain terms would
//! reveal the text it indexes. A recall call therefore opens the conversation's chunks in
//! memory with the request's key and ranks them with the core's BM25 index
//! ([`context_cascade::recall::Index`]), bounded: at most [`MAX_OPENED_BYTES`] of the
//! newest chunks are opened. Recalls are rare (a model's tool call), and a conversation's
//! removed content is a few MB at most (the fixtures: 26 KB – 650 KB at a tenth).

pub(crate) mod turn;

use std::sync::Arc;

use bytes::Bytes;
use context_cascade::recall::{self, Chunk, Index, RecallCall, Recalled, Removal, tool};
use context_cascade::{Block, Conversation, Format, LlmError};
use serde_json::Value;

use crate::state::sealing::RecallKey;
use crate::state::store::{StateStore, StoreResult};

/// Sealed bytes a recall opens at most (the newest first): a bound on the memory and time
/// one recall takes, whatever a conversation has accumulated.
pub(crate) const MAX_OPENED_BYTES: usize = 32 << 20;

/// What a handle line starts with (`context_cascade::recall::handle_line`).
const HANDLE_LINE: &str = "recall handle: ";

/// Recall rounds one client request may run.
pub(crate) const MAX_ROUNDS: usize = 3;

/// Keeps and answers from one store.
#[derive(Clone)]
pub(crate) struct Recaller {
    store: Arc<dyn StateStore>,
}

impl Recaller {
    pub(crate) fn new(store: Arc<dyn StateStore>) -> Self {
        Recaller { store }
    }

    /// Keeps `removals` for the conversation `scoped` (the tenant's conversation key),
    /// sealed under `key`.
    pub(crate) async fn keep(
        &self,
        key: &RecallKey,
        scoped: &str,
        removals: &[&Removal],
    ) -> StoreResult<usize> {
        let mut rows = Vec::new();
        for removal in removals {
            for chunk in removal.chunks(recall::CHUNK_CHARS) {
                let tag = key.tag(&format!("{}/{}", chunk.handle, chunk.part));
                // A chunk is plain data: serializing it cannot fail.
                let plain = serde_json::to_vec(&chunk).unwrap_or_default();
                rows.push((tag, key.seal(&plain)));
            }
        }
        let kept = rows.len();
        if kept > 0 {
            self.store.put_recall(scoped, rows).await?;
        }
        Ok(kept)
    }

    /// Answers `call` from the conversation `scoped`'s chunks that open under `key`,
    /// within `max_tokens`.
    pub(crate) async fn answer(
        &self,
        key: &RecallKey,
        scoped: &str,
        call: &RecallCall,
        max_tokens: u64,
    ) -> StoreResult<Recalled> {
        let rows = self.store.recall_rows(scoped).await?;
        let chunks = open_newest(key, &rows);
        Ok(recall::answer(&Index::build(chunks), call, max_tokens))
    }

    /// The answer to each recall call of `asked`: `(call id, text)`; a call that cannot be
    /// read or answered gets a line saying why (the model reads it as the tool's result).
    pub(crate) async fn answer_all(
        &self,
        key: &RecallKey,
        scoped: &str,
        asked: &turn::Asked,
    ) -> Vec<(String, String)> {
        let mut results = Vec::with_capacity(asked.recall.len());
        for site in &asked.recall {
            let text = match RecallCall::from_arguments(&site.arguments) {
                Ok(call) => match self.answer(key, scoped, &call, recall::ANSWER_TOKENS).await {
                    Ok(found) => found.text,
                    Err(error) => format!("[recall failed: {error}]"),
                },
                Err(error) => format!("[recall: {error}]"),
            };
            results.push((site.id.clone(), text));
        }
        results
    }
}

/// Whether a conversation carries removed content: a marker with its handle line.
pub(crate) fn has_removed(conversation: &Conversation) -> bool {
    let holds = |text: &str| text.contains(HANDLE_LINE);
    (conversation.messages.iter()).any(|message| {
        (message.blocks().iter()).any(|block| match block {
            Block::Text(text) => holds(&text.text),
            Block::ToolResult(result) => {
                (result.content.iter()).any(|b| matches!(b, Block::Text(t) if holds(&t.text)))
            }
            _ => false,
        })
    })
}

/// `body` (a request of `format`) with the recall tool after the client's tools, named
/// so that it takes no client tool's name.
pub(crate) fn with_tool(format: Format, body: &[u8]) -> Result<Bytes, LlmError> {
    let unwritable = |e: serde_json::Error| LlmError::Local(format!("recall tool: {e}"));
    let mut request: Value = serde_json::from_slice(body).map_err(unwritable)?;
    let names = client_tool_names(&request);
    let name = tool::name_among(names.iter().map(String::as_str));
    turn::add_tool(&mut request, tool::definition(format, &name));
    serde_json::to_vec(&request)
        .map(Bytes::from)
        .map_err(unwritable)
}

/// The tool names a request declares (Chat's under `function`).
fn client_tool_names(request: &Value) -> Vec<String> {
    let tools = request.get("tools").and_then(Value::as_array);
    (tools.into_iter().flatten())
        .filter_map(|t| {
            (t.get("name").or_else(|| t.pointer("/function/name"))).and_then(Value::as_str)
        })
        .map(str::to_owned)
        .collect()
}

/// The recall tool's name in a request the proxy offered it in (the last tool, with the
/// tool's description), `None` when it was not offered.
pub(crate) fn offered_tool(request: &Value) -> Option<String> {
    let last = request.get("tools")?.as_array()?.last()?;
    let described =
        |v: &Value| v.get("description").and_then(Value::as_str) == Some(tool::DESCRIPTION);
    let named = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
    match last.get("function") {
        Some(function) if described(function) => named(function),
        None if described(last) => named(last),
        _ => None,
    }
}

/// The chunks of `rows` that open under `key`, the newest within [`MAX_OPENED_BYTES`], in
/// the order they were kept.
fn open_newest(key: &RecallKey, rows: &[Vec<u8>]) -> Vec<Chunk> {
    let mut budget = MAX_OPENED_BYTES;
    let mut chunks: Vec<Chunk> = Vec::new();
    for sealed in rows.iter().rev() {
        let Some(rest) = budget.checked_sub(sealed.len()) else {
            break;
        };
        budget = rest;
        let opened = key.open(sealed).ok();
        if let Some(chunk) = opened.and_then(|plain| serde_json::from_slice(&plain).ok()) {
            chunks.push(chunk);
        }
    }
    chunks.reverse();
    chunks
}

#[cfg(test)]
mod tests;
