//! The default recall store: removed chunks in memory, per scope, with the BM25 index of
//! each scope built on the first search after a change.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use super::answer::{RecallCall, Recalled, answer};
use super::chunk::Chunk;
use super::handle::Handle;
use super::rank::Index;
use super::{RecallError, RecallStore, Scope};

/// Removed chunks in memory, per [`Scope`]; gone with the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    scopes: Mutex<HashMap<Scope, Kept>>,
}

#[derive(Debug, Default)]
struct Kept {
    chunks: Vec<Chunk>,
    known: HashSet<(Handle, u32)>,
    /// Built on the first search after a change.
    index: Option<Index>,
}

impl MemoryStore {
    fn lock(&self) -> MutexGuard<'_, HashMap<Scope, Kept>> {
        // The map holds plain data: a panic elsewhere cannot leave it half-written.
        self.scopes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Chunks kept in `scope`.
    pub fn len(&self, scope: &Scope) -> usize {
        self.lock().get(scope).map_or(0, |k| k.chunks.len())
    }

    /// Whether `scope` holds nothing.
    pub fn is_empty(&self, scope: &Scope) -> bool {
        self.len(scope) == 0
    }
}

impl RecallStore for MemoryStore {
    fn put(&self, scope: &Scope, chunks: Vec<Chunk>) -> Result<(), RecallError> {
        let mut scopes = self.lock();
        let kept = scopes.entry(scope.clone()).or_default();
        for chunk in chunks {
            if kept.known.insert((chunk.handle, chunk.part)) {
                kept.chunks.push(chunk);
                kept.index = None;
            }
        }
        Ok(())
    }

    fn recall(
        &self,
        scope: &Scope,
        call: &RecallCall,
        max_tokens: u64,
    ) -> Result<Recalled, RecallError> {
        let mut scopes = self.lock();
        let kept = scopes.entry(scope.clone()).or_default();
        let index = match &mut kept.index {
            Some(index) => index,
            slot => slot.insert(Index::build(kept.chunks.clone())),
        };
        Ok(answer(index, call, max_tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::Removal;

    #[test]
    fn one_scope_never_reads_another() {
        let store = MemoryStore::default();
        let mine = Scope::new("alice", "c").expect("a tenant");
        let theirs = Scope::new("bob", "c").expect("a tenant");
        let removal = Removal {
            handle: crate::recall::Handle::of_result("t", "1", "x"),
            text: "the secret is swordfish\n".into(),
        };
        store.put(&mine, removal.chunks(100)).expect("kept");
        store.put(&mine, removal.chunks(100)).expect("kept once");
        assert_eq!(store.len(&mine), 1);
        let call = RecallCall::Query("secret swordfish".into());
        assert!(
            store
                .recall(&mine, &call, 100)
                .expect("answers")
                .text
                .contains("swordfish")
        );
        let other = store.recall(&theirs, &call, 100).expect("answers");
        assert!(other.chunks.is_empty(), "{}", other.text);
        assert!(other.text.starts_with("[recall: nothing removed matches"));
        assert!(Scope::new(" ", "c").is_err());
    }
}
