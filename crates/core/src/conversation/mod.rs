//! The provider-neutral conversation: messages made of content blocks.
//!
//! Both wire formats (OpenAI Chat Completions, Anthropic Messages) read into this model and
//! write back out of it losslessly. Everything the cascade does not understand is kept as it
//! came, in `fields` maps that also remember the original key order: a known key keeps its
//! place there with a `null` placeholder, and the writer fills in the current value.

use serde_json::{Map, Value};

use crate::counts::{ClassCounts, add_json};

mod block;
mod message;

pub(crate) use block::join_text;
pub use block::{Block, Opaque, Role, Shape, TextBlock, ToolCall, ToolResult};
pub use message::Message;

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

    /// Index of the first user message, which the cascade always keeps. A notice or summary
    /// the cascade wrote is not it: when a strategy replaced messages before the first user
    /// message, its notice takes their place, and counting the notice as the first user
    /// message would leave the real one unprotected in the next step (a fuzz finding).
    pub fn first_user_index(&self) -> Option<usize> {
        let only_notices = |m: &Message| {
            (m.blocks().iter())
                .all(|b| matches!(b, Block::Text(t) if crate::markers::is_cascade_notice(&t.text)))
        };
        self.messages
            .iter()
            .position(|m| m.role() == Role::User && !m.is_only_tool_results() && !only_notices(m))
            .or_else(|| self.messages.iter().position(|m| m.role() == Role::User))
    }

    /// Sets the tool name of every result from its call (`tool_call_id` → `tool_calls`).
    pub fn resolve_tool_names(&mut self) {
        // Looked up on borrowed ids first, then written: no id or name is copied for the map.
        let mut resolved: Vec<(usize, usize, String)> = Vec::new();
        {
            let mut names: std::collections::HashMap<&str, &str> = Default::default();
            for (m, message) in self.messages.iter().enumerate() {
                for (b, block) in message.blocks().iter().enumerate() {
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
            if let Some(Block::ToolResult(result)) =
                self.messages[m].blocks_mut_uncounted().get_mut(b)
            {
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
