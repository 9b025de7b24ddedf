//! Recall on the manager: handles in the markers, the removed originals kept in a store,
//! and the tool an agent running its own loop offers its model.

use std::sync::Arc;

use serde_json::Value;

use super::ContextManager;
use crate::conversation::Format;
use crate::recall::{self, RecallCall, RecallError, RecallStore, Recalled, Scope, tool};
use crate::report::Report;

/// Where the manager keeps what its steps remove (`None`: the caller keeps it, reading
/// `Step::removed`).
#[derive(Clone)]
pub(super) struct Recall {
    kept: Option<(Arc<dyn RecallStore>, Scope)>,
    answer_tokens: u64,
    chunk_chars: usize,
}

impl ContextManager {
    /// Turns recall on: every removal's marker carries a handle on the line after it, what
    /// each step removes is kept in `store` under `scope` (chunked), and
    /// [`ContextManager::recall`] answers the model's calls of the tool
    /// [`ContextManager::recall_tool`] defines. One manager, one scope: an agent with several
    /// conversations uses a manager per conversation, or [`ContextManager::with_recall_handles`]
    /// and a store of its own.
    pub fn with_recall(mut self, store: Arc<dyn RecallStore>, scope: Scope) -> Self {
        self.recall = Some(Recall {
            kept: Some((store, scope)),
            answer_tokens: recall::ANSWER_TOKENS,
            chunk_chars: recall::CHUNK_CHARS,
        });
        self
    }

    /// Handles in the markers and the removed originals in each step's `removed`, kept by
    /// the caller (the proxy keeps them per tenant, encrypted).
    pub fn with_recall_handles(mut self) -> Self {
        self.recall = Some(Recall {
            kept: None,
            answer_tokens: recall::ANSWER_TOKENS,
            chunk_chars: recall::CHUNK_CHARS,
        });
        self
    }

    /// Whether markers carry handles.
    pub fn recall_on(&self) -> bool {
        self.recall.is_some()
    }

    /// The recall tool's definition for `format`'s `tools` (named [`tool::RECALL_TOOL`]; a
    /// client with a tool of that name takes [`tool::name_among`]'s). `None` when recall
    /// is off.
    pub fn recall_tool(&self, format: Format) -> Option<Value> {
        self.recall
            .as_ref()
            .map(|_| tool::definition(format, tool::RECALL_TOOL))
    }

    /// Answers a call of the recall tool from the manager's store, within the answer's
    /// token budget ([`recall::ANSWER_TOKENS`]).
    pub fn recall(&self, call: &RecallCall) -> Result<Recalled, RecallError> {
        let recall = self.recall.as_ref().ok_or(RecallError::Off)?;
        let (store, scope) = recall.kept.as_ref().ok_or(RecallError::Off)?;
        store.recall(scope, call, recall.answer_tokens)
    }

    /// Keeps what the report's steps removed in the manager's store (nothing when the
    /// caller keeps it). A removal kept before is kept once.
    pub(super) fn keep_removed(&self, report: &Report) {
        let Some(Recall {
            kept: Some((store, scope)),
            chunk_chars,
            ..
        }) = &self.recall
        else {
            return;
        };
        let chunks: Vec<_> = (report.steps.iter())
            .flat_map(|step| &step.removed)
            .flat_map(|removal| removal.chunks(*chunk_chars))
            .collect();
        if chunks.is_empty() {
            return;
        }
        if let Err(error) = store.put(scope, chunks) {
            // The request goes on without it: a recall of it will say nothing is kept.
            tracing::warn!(%error, "recall: removed content not kept");
        }
    }
}
