//! Who speaks and what a message is made of: roles, wire shapes and content blocks.

use serde_json::{Map, Value};

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
