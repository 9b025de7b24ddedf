//! One message: its role, blocks and wire fields, with its token counts cached.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::{Block, Role, Shape, ToolCall, ToolResult, join_text};
use crate::counts::ClassCounts;

/// One message. Its token counts are computed once and cached; every mutable access to the
/// blocks clears the cache, which is why the blocks are reached through methods.
///
/// A clone shares the message's contents until one of the two is changed (copy on write):
/// the escalation ladder keeps snapshots of a whole request to roll back to, and the
/// messages no strategy touches are then shared instead of copied (cloning and freeing
/// them was a tenth of a one-shot `compact` of a 1.2 MB request that needs ③).
#[derive(Debug, Clone)]
pub struct Message {
    inner: Arc<Inner>,
}

/// What a message holds, shared by its clones until one of them changes it.
#[derive(Debug, Clone)]
struct Inner {
    role: Role,
    blocks: Vec<Block>,
    shape: Shape,
    pinned: bool,
    fields: Map<String, Value>,
    counts: OnceLock<ClassCounts>,
    /// The exact token count under one counter (its key, the count), computed once.
    exact: OnceLock<(usize, u64)>,
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&*self.inner, &*other.inner);
        // A clone not changed since is the same message.
        Arc::ptr_eq(&self.inner, &other.inner)
            || (a.role == b.role
                && a.blocks == b.blocks
                && a.shape == b.shape
                && a.pinned == b.pinned
                && a.fields == b.fields)
    }
}

impl Message {
    /// A message from its parts. `fields` holds the other wire keys in order (known keys may
    /// be present as placeholders to keep their position).
    pub fn new(role: Role, blocks: Vec<Block>, shape: Shape, fields: Map<String, Value>) -> Self {
        let pinned = fields.get("_pin").and_then(Value::as_bool).unwrap_or(false);
        let inner = Inner {
            role,
            blocks,
            shape,
            pinned,
            fields,
            counts: OnceLock::new(),
            exact: OnceLock::new(),
        };
        Message {
            inner: Arc::new(inner),
        }
    }

    /// A message with one text block written as string content.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message::new(role, vec![Block::text(text)], Shape::String, Map::new())
    }

    /// Who wrote the message.
    pub fn role(&self) -> Role {
        self.inner.role
    }

    /// The content blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.inner.blocks
    }

    /// Mutable access to the blocks; clears the cached token counts.
    pub fn blocks_mut(&mut self) -> &mut Vec<Block> {
        let inner = self.own();
        inner.counts.take();
        inner.exact.take();
        &mut inner.blocks
    }

    /// The contents, no longer shared with a clone (copied if they were).
    fn own(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    /// Mutable access to the blocks for what counts ignore (a result's tool name), keeping
    /// the cached counts.
    pub(super) fn blocks_mut_uncounted(&mut self) -> &mut Vec<Block> {
        &mut self.own().blocks
    }

    /// How the content was written on the wire.
    pub fn shape(&self) -> Shape {
        self.inner.shape
    }

    /// Sets how the content is written (used when a block list changes kind).
    pub fn set_shape(&mut self, shape: Shape) {
        self.own().shape = shape;
    }

    /// `"_pin": true` on the wire, or pinned by the cascade (remember requests).
    pub fn is_pinned(&self) -> bool {
        self.inner.pinned
    }

    /// Pins the message: strategies ②–⑤ will neither compact nor remove it.
    pub fn pin(&mut self) {
        self.own().pinned = true;
    }

    /// The other wire keys of the message, in order.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.inner.fields
    }

    /// Mutable access to the other wire keys; clears the cached token counts.
    pub fn fields_mut(&mut self) -> &mut Map<String, Value> {
        let inner = self.own();
        inner.counts.take();
        inner.exact.take();
        &mut inner.fields
    }

    /// The cached character-class counts of this message (computed on first use).
    pub fn counts(&self) -> ClassCounts {
        *self
            .inner
            .counts
            .get_or_init(|| ClassCounts::of_message(self))
    }

    /// Whether the exact count under the counter `key` is cached.
    pub(crate) fn has_exact_tokens(&self, key: usize) -> bool {
        self.inner
            .exact
            .get()
            .is_some_and(|&(cached, _)| cached == key)
    }

    /// The exact token count under the counter `key`, computed by `count` on first use
    /// and cached (a count under another counter is computed, not cached).
    pub fn exact_tokens(&self, key: usize, count: impl FnOnce() -> u64) -> u64 {
        match self.inner.exact.get() {
            Some(&(cached, tokens)) if cached == key => tokens,
            Some(_) => count(),
            None => self.inner.exact.get_or_init(|| (key, count())).1,
        }
    }

    /// All text of the message's text blocks (not tool results), joined by newlines.
    pub fn text_content(&self) -> String {
        join_text(&self.inner.blocks)
    }

    /// The tool calls this message makes.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.inner.blocks.iter().filter_map(|b| match b {
            Block::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// The tool results this message carries.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.inner.blocks.iter().filter_map(|b| match b {
            Block::ToolResult(r) => Some(r),
            _ => None,
        })
    }

    /// True when the message holds tool results and nothing else.
    pub fn is_only_tool_results(&self) -> bool {
        !self.inner.blocks.is_empty()
            && (self.inner.blocks.iter()).all(|b| matches!(b, Block::ToolResult(_)))
    }

    /// Whether an `is_error` flag is set on the message or on one of its results.
    pub fn is_error(&self) -> bool {
        let flag =
            |m: &Map<String, Value>| m.get("is_error").and_then(Value::as_bool) == Some(true);
        flag(&self.inner.fields) || self.tool_results().any(|r| flag(&r.fields))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    /// A clone shares its contents until one of the two changes; a change, by any of the
    /// mutating methods, reaches that one alone, and its counts follow it.
    #[test]
    fn a_clone_is_copied_when_changed_and_only_then() {
        let original = Message::text(Role::User, "read src/lib.rs and fix the test");
        let counts = original.counts();
        let changes: [fn(&mut Message); 4] = [
            |m| *m.blocks_mut() = vec![Block::text("shorter")],
            |m| {
                m.fields_mut().insert("name".into(), "x".into());
            },
            Message::pin,
            |m| m.set_shape(Shape::Parts),
        ];
        for change in changes {
            let mut copy = original.clone();
            assert!(Arc::ptr_eq(&copy.inner, &original.inner));
            assert_eq!(copy, original);
            change(&mut copy);
            assert!(!Arc::ptr_eq(&copy.inner, &original.inner));
            assert_ne!(copy, original);
            assert_eq!(original.text_content(), "read src/lib.rs and fix the test");
            assert!(!original.is_pinned() && original.fields().is_empty());
            assert_eq!(original.shape(), Shape::String);
            assert_eq!(original.counts(), counts);
        }
        let mut copy = original.clone();
        *copy.blocks_mut() = vec![Block::text("shorter")];
        assert_ne!(copy.counts(), counts);
        // Equal contents in two allocations are still equal.
        assert_eq!(
            Message::text(Role::User, "same"),
            Message::text(Role::User, "same")
        );
    }
}
