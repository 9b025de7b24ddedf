//! The provider-neutral conversation: messages made of content blocks.
//!
//! Both wire formats (OpenAI Chat Completions, Anthropic Messages) read into this model and
//! write back out of it losslessly. Everything the cascade does not understand is kept as it
//! came, in `fields` maps that also remember the original key order: a known key keeps its
//! place there with a `null` placeholder, and the writer fills in the current value.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::counts::{ClassCounts, add_json};

/// Who speaks a message. `Developer` (OpenAI's newer name for system) and `Function` (the
/// legacy OpenAI function-result role) are kept apart so that they round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A system message (Anthropic's top-level `system` is read as one).
    System,
    /// An OpenAI developer message (a system message by another name).
    Developer,
    /// A user message (Anthropic tool results come as user messages).
    User,
    /// An assistant message, with its tool calls.
    Assistant,
    /// An OpenAI `tool` message: one tool result.
    Tool,
    /// A legacy OpenAI `function` message: one function result.
    Function,
}

impl Role {
    /// Parses a wire role name.
    pub fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => return None,
        })
    }

    /// The wire name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
        }
    }

    /// System and developer messages are instructions: never removed, never summarized.
    pub fn is_system(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }

    /// Roles whose messages carry tool results (OpenAI form).
    pub fn is_tool_result(self) -> bool {
        matches!(self, Role::Tool | Role::Function)
    }
}

/// How a content value was written on the wire, so that it is written back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// `"content": "text"`: exactly one text block.
    String,
    /// `"content": [ ...parts or blocks... ]`
    #[default]
    Parts,
    /// `"content": null`
    Null,
    /// no `content` key at all
    Absent,
}

/// A text block (OpenAI text part, Anthropic text block, or string content).
#[derive(Debug, Clone, PartialEq)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Other keys of the part (`type`, `cache_control`, `citations`, ...), in order.
    pub fields: Map<String, Value>,
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id the result answers.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// OpenAI: the raw `arguments` string (kept as a `Value::String`, byte for byte, even if
    /// it is not valid JSON). Anthropic: the `input` object.
    pub arguments: Value,
    /// Other keys of the call (`type`, `cache_control`, keys of `function`), in order.
    pub fields: Map<String, Value>,
    /// Keys of the OpenAI `function` object other than `name` and `arguments`.
    pub function_fields: Map<String, Value>,
    /// An OpenAI legacy `function_call` (no id on the wire; `id` is an internal pairing key).
    pub legacy: bool,
}

impl ToolCall {
    /// The arguments as JSON text (for estimation and for summaries).
    pub fn arguments_text(&self) -> std::borrow::Cow<'_, str> {
        match &self.arguments {
            Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
            other => std::borrow::Cow::Owned(other.to_string()),
        }
    }

    /// The arguments as a JSON value (parsing the OpenAI string form).
    pub fn arguments_value(&self) -> Option<Value> {
        match &self.arguments {
            Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        }
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call it answers (`tool_call_id` / `tool_use_id`).
    pub call_id: String,
    /// The tool's name, resolved from the matching call when the conversation was read.
    pub tool_name: Option<String>,
    /// The result's content blocks (text, images, ...).
    pub content: Vec<Block>,
    /// How the content was written.
    pub shape: Shape,
    /// Other keys (`type`, `is_error`, `cache_control`, ...), in order. In OpenAI form the
    /// message-level keys live on the message instead.
    pub fields: Map<String, Value>,
}

impl ToolResult {
    /// A new result holding one text block.
    pub fn text(call_id: impl Into<String>, tool_name: Option<String>, text: String) -> Self {
        ToolResult {
            call_id: call_id.into(),
            tool_name,
            content: vec![Block::text(text)],
            shape: Shape::String,
            fields: Map::new(),
        }
    }

    /// All the text of the result, parts joined by newlines.
    pub fn joined_text(&self) -> String {
        join_text(&self.content)
    }
}

/// A block the cascade does not look into, kept exactly as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct Opaque {
    /// The block exactly as it came, written back unchanged.
    pub raw: Value,
}

/// One content block.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text.
    Text(TextBlock),
    /// A tool call of an assistant message.
    ToolCall(ToolCall),
    /// A tool result.
    ToolResult(ToolResult),
    /// Images, documents, audio, files: estimated as one binary block each.
    Binary(Opaque),
    /// `thinking` / `redacted_thinking`: kept untouched, text counted.
    Thinking(Opaque),
    /// Anything else (unknown block or part types).
    Other(Opaque),
}

impl Block {
    /// A plain text block with no other fields.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(TextBlock {
            text: text.into(),
            fields: Map::new(),
        })
    }

    /// The block's text if it is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// Joins the text blocks of a block list with newlines.
pub(crate) fn join_text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for text in blocks.iter().filter_map(Block::as_text) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(text);
    }
    out
}

/// One message. Its token counts are computed once and cached; every mutable access to the
/// blocks clears the cache, which is why the blocks are reached through methods.
#[derive(Debug, Clone)]
pub struct Message {
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

/// The wire format a conversation was read from and is written back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// An OpenAI Chat Completions request body (`{"model", "messages", ...}`).
    OpenAi,
    /// An Anthropic Messages request body (`{"model", "system", "messages", ...}`).
    Anthropic,
    /// A bare JSON array of OpenAI-style messages.
    Bare,
    /// An OpenAI Responses request body (`{"model", "instructions", "input", ...}`).
    Responses,
}

impl Format {
    /// The format's name, as reports and the CLI write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Bare => "bare",
            Format::Responses => "responses",
        }
    }

    /// Messages in this format follow OpenAI's rules (tool results as `tool` messages).
    pub fn is_openai_like(self) -> bool {
        !matches!(self, Format::Anthropic)
    }
}

/// A whole request: its messages plus every other top-level field, kept in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The wire format the request was read from.
    pub format: Format,
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// Top-level keys of the request body other than the messages (`model`, `tools`,
    /// `max_tokens`, ...), in order; `messages` (and Anthropic's `system`) keep their place
    /// as placeholders. Empty for a bare array.
    pub envelope: Map<String, Value>,
}

impl Conversation {
    /// An empty conversation in a format.
    pub fn new(format: Format) -> Self {
        Conversation {
            format,
            messages: Vec::new(),
            envelope: Map::new(),
        }
    }

    /// The request's `model`, when it names one.
    pub fn model(&self) -> Option<&str> {
        self.envelope.get("model").and_then(Value::as_str)
    }

    /// The output reserve the request asks for (`max_completion_tokens`, `max_tokens`).
    pub fn output_reserve(&self) -> u64 {
        ["max_completion_tokens", "max_tokens", "max_output_tokens"]
            .iter()
            .find_map(|k| self.envelope.get(*k).and_then(Value::as_u64))
            .unwrap_or(0)
    }

    /// Whether the provider holds earlier turns (a Responses `previous_response_id` or
    /// `conversation`): the body is then only the newest part and must go upstream untouched.
    pub fn holds_history_upstream(&self) -> bool {
        self.format == Format::Responses
            && ["previous_response_id", "conversation"]
                .iter()
                .any(|k| self.envelope.get(*k).is_some_and(|v| !v.is_null()))
    }

    /// The `tools` definitions of the request, when present.
    pub fn tools(&self) -> Option<&Value> {
        self.envelope.get("tools")
    }

    /// Index of the first user message, which the cascade always keeps.
    pub fn first_user_index(&self) -> Option<usize> {
        self.messages
            .iter()
            .position(|m| m.role() == Role::User && !m.is_only_tool_results())
            .or_else(|| self.messages.iter().position(|m| m.role() == Role::User))
    }

    /// Sets the tool name of every result from its call (`tool_call_id` → `tool_calls`).
    pub fn resolve_tool_names(&mut self) {
        // Looked up on borrowed ids first, then written: no id or name is copied for the map.
        let mut resolved: Vec<(usize, usize, String)> = Vec::new();
        {
            let mut names: std::collections::HashMap<&str, &str> = Default::default();
            for (m, message) in self.messages.iter().enumerate() {
                for (b, block) in message.blocks.iter().enumerate() {
                    match block {
                        Block::ToolCall(call) => {
                            names.insert(&call.id, &call.name);
                        }
                        Block::ToolResult(result) if result.tool_name.is_none() => {
                            if let Some(name) = names.get(result.call_id.as_str()) {
                                resolved.push((m, b, (*name).to_owned()));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        for (m, b, name) in resolved {
            if let Some(Block::ToolResult(result)) = self.messages[m].blocks.get_mut(b) {
                result.tool_name = Some(name);
            }
        }
    }
}

impl ClassCounts {
    /// The counts of one message: its texts, tool calls, results and opaque blocks.
    pub fn of_message(message: &Message) -> ClassCounts {
        let mut counts = ClassCounts {
            messages: 1,
            ..ClassCounts::default()
        };
        add_blocks(&mut counts, message.blocks());
        counts
    }

    /// The counts of some content blocks (a tool result's content, say).
    pub fn of_blocks(blocks: &[Block]) -> ClassCounts {
        let mut counts = ClassCounts::default();
        add_blocks(&mut counts, blocks);
        counts
    }

    /// The counts of a whole request: messages plus `tools` definitions.
    pub fn of_conversation(conversation: &Conversation) -> ClassCounts {
        let mut total = conversation
            .messages
            .iter()
            .fold(ClassCounts::default(), |acc, m| acc + m.counts());
        if let Some(tools) = conversation.tools() {
            total += ClassCounts::of_json(tools);
        }
        total
    }
}

fn add_blocks(counts: &mut ClassCounts, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Text(t) => *counts += ClassCounts::of_str(&t.text),
            Block::ToolCall(call) => {
                *counts += ClassCounts::of_str(&call.name);
                match &call.arguments {
                    Value::String(s) => *counts += ClassCounts::of_str(s),
                    other => add_json(counts, other),
                }
            }
            Block::ToolResult(result) => add_blocks(counts, &result.content),
            Block::Binary(_) => counts.binary_blocks += 1,
            Block::Thinking(o) | Block::Other(o) => add_json(counts, &o.raw),
        }
    }
}
