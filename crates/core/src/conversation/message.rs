//! One message: its role, blocks and wire fields, with its token counts cached.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::{Block, Role, Shape, ToolCall, ToolResult, join_text};
use crate::counts::ClassCounts;

/// One message. Its token counts are computed once and cached; every mutable access to the
/// blocks clears the cache, which is why the blocks are reached through methods.
#[derive(Debug, Clone)]
pub struct Message {
    role: Role,
    /// Reached directly only by `Conversation`, to resolve tool names (which counts ignore).
    pub(super) blocks: Vec<Block>,
    shape: Shape,
    pinned: bool,
    fields: Map<String, Value>,
    counts: OnceLock<ClassCounts>,
    /// The exact token count under one counter (its key, the count), computed once.
    exact: OnceLock<(usize, u64)>,
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role
            && self.blocks == other.blocks
            && self.shape == other.shape
            && self.pinned == other.pinned
            && self.fields == other.fields
    }
}

impl Message {
    /// A message from its parts. `fields` holds the other wire keys in order (known keys may
    /// be present as placeholders to keep their position).
    pub fn new(role: Role, blocks: Vec<Block>, shape: Shape, fields: Map<String, Value>) -> Self {
        let pinned = fields.get("_pin").and_then(Value::as_bool).unwrap_or(false);
        Message {
            role,
            blocks,
            shape,
            pinned,
            fields,
            counts: OnceLock::new(),
            exact: OnceLock::new(),
        }
    }

    /// A message with one text block written as string content.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message::new(role, vec![Block::text(text)], Shape::String, Map::new())
    }

    /// Who wrote the message.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The content blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Mutable access to the blocks; clears the cached token counts.
    pub fn blocks_mut(&mut self) -> &mut Vec<Block> {
        self.counts.take();
        self.exact.take();
        &mut self.blocks
    }

    /// How the content was written on the wire.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Sets how the content is written (used when a block list changes kind).
    pub fn set_shape(&mut self, shape: Shape) {
        self.shape = shape;
    }

    /// `"_pin": true` on the wire, or pinned by the cascade (remember requests).
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// Pins the message: strategies ②–⑤ will neither compact nor remove it.
    pub fn pin(&mut self) {
        self.pinned = true;
    }

    /// The other wire keys of the message, in order.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// Mutable access to the other wire keys; clears the cached token counts.
    pub fn fields_mut(&mut self) -> &mut Map<String, Value> {
        self.counts.take();
        self.exact.take();
        &mut self.fields
    }

    /// The cached character-class counts of this message (computed on first use).
    pub fn counts(&self) -> ClassCounts {
        *self.counts.get_or_init(|| ClassCounts::of_message(self))
    }

    /// Whether the exact count under the counter `key` is cached.
    pub(crate) fn has_exact_tokens(&self, key: usize) -> bool {
        self.exact.get().is_some_and(|&(cached, _)| cached == key)
    }

    /// The exact token count under the counter `key`, computed by `count` on first use
    /// and cached (a count under another counter is computed, not cached).
    pub fn exact_tokens(&self, key: usize, count: impl FnOnce() -> u64) -> u64 {
        match self.exact.get() {
            Some(&(cached, tokens)) if cached == key => tokens,
            Some(_) => count(),
            None => self.exact.get_or_init(|| (key, count())).1,
        }
    }

    /// All text of the message's text blocks (not tool results), joined by newlines.
    pub fn text_content(&self) -> String {
        join_text(&self.blocks)
    }

    /// The tool calls this message makes.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.blocks.iter().filter_map(|b| match b {
            Block::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// The tool results this message carries.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.blocks.iter().filter_map(|b| match b {
            Block::ToolResult(r) => Some(r),
            _ => None,
        })
    }

    /// True when the message holds tool results and nothing else.
    pub fn is_only_tool_results(&self) -> bool {
        !self.blocks.is_empty()
            && self
                .blocks
                .iter()
                .all(|b| matches!(b, Block::ToolResult(_)))
    }

    /// Whether an `is_error` flag is set on the message or on one of its results.
    pub fn is_error(&self) -> bool {
        let flag =
            |m: &Map<String, Value>| m.get("is_error").and_then(Value::as_bool) == Some(true);
        flag(&self.fields) || self.tool_results().any(|r| flag(&r.fields))
    }
}
