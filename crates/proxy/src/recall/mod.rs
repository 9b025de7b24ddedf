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

use context_cascade::recall::{self, Chunk, Index, RecallCall, Recalled, Removal};

use crate::state::sealing::RecallKey;
use crate::state::store::{StateStore, StoreResult};

/// Sealed bytes a recall opens at most (the newest first): a bound on the memory and time
/// one recall takes, whatever a conversation has accumulated.
pub(crate) const MAX_OPENED_BYTES: usize = 32 << 20;

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
