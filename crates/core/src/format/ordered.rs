//! Writing a conversation straight to a serializer, in the keys' original order.
//!
//! Every wire object keeps a `fields` map of its original keys. Keys the model owns (text,
//! ids, content, ...) stand there as placeholders, so their value is written from the model
//! at the place the key had; other keys are written as they came. Keys the model owns that
//! were not on the wire are written after the rest. No intermediate `Value` is built.

use serde::ser::{Error as _, SerializeMap};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::WriteOptions;
use super::fields::{Seq, write_fields};
use super::openai::MESSAGE_KEYS;
use crate::conversation::{Block, Conversation, Format, Message, Role, Shape, ToolCall};

pub(super) struct View<'a> {
    pub conversation: &'a Conversation,
    pub options: WriteOptions,
}

impl Serialize for View<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.conversation;
        let opts = self.options;
        match c.format {
            Format::Responses => super::responses::Body(c, opts).serialize(serializer),
            Format::Bare => {
                serializer.collect_seq(c.messages.iter().map(|m| OpenAiMessage(m, opts)))
            }
            Format::OpenAi => {
                let mut map = serializer.serialize_map(None)?;
                let messages = Seq(c.messages.iter().map(|m| OpenAiMessage(m, opts)));
                write_fields(&mut map, &c.envelope, &["messages"], false, |_, map| {
                    map.serialize_entry("messages", &messages)
                })?;
                map.end()
            }
            Format::Anthropic => {
                let mut map = serializer.serialize_map(None)?;
                // The top-level `system` is read into system messages without keys; a
                // system message read from inside `messages` keeps its `role` key and its
                // place there.
                let top_level = |m: &&Message| m.role().is_system() && m.fields().is_empty();
                let system: Vec<&Message> = c.messages.iter().filter(top_level).collect();
                let turns: Vec<&Message> = c.messages.iter().filter(|m| !top_level(m)).collect();
                let groups = super::merge::wire_groups(&turns, opts.strip_pins);
                let messages = Seq(groups
                    .iter()
                    .map(|range| AnthropicTurn(&turns[range.clone()], opts)));
                write_fields(
                    &mut map,
                    &c.envelope,
                    &["system", "messages"],
                    false,
                    |k, map| {
                        if k == "messages" {
                            map.serialize_entry("messages", &messages)
                        } else if !system.is_empty() {
                            map.serialize_entry("system", &AnthropicSystem(&system))
                        } else {
                            Ok(())
                        }
                    },
                )?;
                map.end()
            }
        }
    }
}

struct OpenAiMessage<'a>(&'a Message, WriteOptions);

impl Serialize for OpenAiMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let result = m.tool_results().next();
        let calls: Vec<&ToolCall> = m.tool_calls().filter(|c| !c.legacy).collect();
        let legacy = m.tool_calls().find(|c| c.legacy);
        let mut map = serializer.serialize_map(None)?;
        write_fields(
            &mut map,
            m.fields(),
            MESSAGE_KEYS,
            self.1.strip_pins,
            |key, map| match key {
                "role" => map.serialize_entry("role", m.role().as_str()),
                "content" => match (m.role().is_tool_result(), result) {
                    (true, Some(r)) => write_content(map, &r.content, r.shape, Dialect::OpenAi),
                    _ => {
                        let blocks: Vec<&Block> = m
                            .blocks()
                            .iter()
                            .filter(|b| !matches!(b, Block::ToolCall(_)))
                            .collect();
                        write_content(map, blocks, m.shape(), Dialect::OpenAi)
                    }
                },
                "tool_calls" if !calls.is_empty() || m.fields().contains_key("tool_calls") => {
                    map.serialize_entry("tool_calls", &Seq(calls.iter().map(|c| OpenAiCall(c))))
                }
                "tool_call_id" if m.role() == Role::Tool => match result {
                    Some(r) => map.serialize_entry("tool_call_id", &r.call_id),
                    None => Err(S::Error::custom("tool message without a result")),
                },
                // On any other message the reader leaves the key as it came: write it back.
                "tool_call_id" => match m.fields().get("tool_call_id") {
                    Some(value) => map.serialize_entry("tool_call_id", value),
                    None => Ok(()),
                },
                "function_call" => match legacy {
                    Some(call) => map.serialize_entry("function_call", &OpenAiFunction(call)),
                    None => Ok(()),
                },
                _ => Ok(()),
            },
        )?;
        map.end()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Anthropic,
}

/// Writes a `content` entry: a string, null, nothing, or an array of parts/blocks.
fn write_content<'b, Map: SerializeMap>(
    map: &mut Map,
    blocks: impl IntoIterator<Item = &'b Block, IntoIter: Clone>,
    shape: Shape,
    dialect: Dialect,
) -> Result<(), Map::Error> {
    let blocks = blocks.into_iter();
    let mut peek = blocks.clone();
    let first = peek.next();
    let single = peek.next().is_none();
    match (shape, first) {
        (Shape::Absent, None) => Ok(()),
        (Shape::Null, None) => map.serialize_entry("content", &Value::Null),
        (Shape::String, None) => map.serialize_entry("content", ""),
        (Shape::String, Some(Block::Text(t))) if single => map.serialize_entry("content", &t.text),
        _ => map.serialize_entry("content", &Seq(blocks.map(|b| Part(b, dialect)))),
    }
}

/// One content part (OpenAI) or block (Anthropic).
struct Part<'a>(&'a Block, Dialect);

impl Serialize for Part<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let type_or = |fields: &Map<String, Value>, default: &'static str| -> Value {
            fields
                .get("type")
                .filter(|v| !v.is_null())
                .cloned()
                .unwrap_or_else(|| Value::from(default))
        };
        match self.0 {
            Block::Binary(o) | Block::Thinking(o) | Block::Other(o) => o.raw.serialize(serializer),
            Block::Text(t) => {
                let mut map = serializer.serialize_map(None)?;
                write_fields(&mut map, &t.fields, &["type", "text"], false, |k, map| {
                    if k == "type" {
                        map.serialize_entry("type", &type_or(&t.fields, "text"))
                    } else {
                        map.serialize_entry("text", &t.text)
                    }
                })?;
                map.end()
            }
            Block::ToolCall(call) => {
                let mut map = serializer.serialize_map(None)?;
                write_fields(
                    &mut map,
                    &call.fields,
                    &["type", "id", "name", "input"],
                    false,
                    |k, map| match k {
                        "type" => map.serialize_entry("type", &type_or(&call.fields, "tool_use")),
                        "id" => map.serialize_entry("id", &call.id),
                        "name" => map.serialize_entry("name", &call.name),
                        // A `tool_use` that came without `input` goes back without it.
                        _ if call.arguments.is_null() && !call.fields.contains_key("input") => {
                            Ok(())
                        }
                        _ => map.serialize_entry("input", &call.arguments),
                    },
                )?;
                map.end()
            }
            Block::ToolResult(r) => {
                let mut map = serializer.serialize_map(None)?;
                write_fields(
                    &mut map,
                    &r.fields,
                    &["type", "tool_use_id", "content"],
                    false,
                    |k, map| match k {
                        "type" => map.serialize_entry("type", &type_or(&r.fields, "tool_result")),
                        "tool_use_id" => map.serialize_entry("tool_use_id", &r.call_id),
                        _ => write_content(map, &r.content, r.shape, self.1),
                    },
                )?;
                map.end()
            }
        }
    }
}

struct OpenAiCall<'a>(&'a ToolCall);

impl Serialize for OpenAiCall<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let call = self.0;
        let mut map = serializer.serialize_map(None)?;
        write_fields(
            &mut map,
            &call.fields,
            &["id", "type", "function"],
            false,
            |k, map| match k {
                "id" => map.serialize_entry("id", &call.id),
                // A call that came without `type` goes back without it (lossless).
                "type" => match call.fields.get("type") {
                    None => Ok(()),
                    Some(value) => map.serialize_entry("type", value),
                },
                _ => map.serialize_entry("function", &OpenAiFunction(call)),
            },
        )?;
        map.end()
    }
}

struct OpenAiFunction<'a>(&'a ToolCall);

impl Serialize for OpenAiFunction<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let call = self.0;
        let mut map = serializer.serialize_map(None)?;
        write_fields(
            &mut map,
            &call.function_fields,
            &["name", "arguments"],
            false,
            |k, map| {
                if k == "name" {
                    map.serialize_entry("name", &call.name)
                } else if call.function_fields.contains_key("arguments")
                    || !call.arguments.is_null()
                {
                    map.serialize_entry("arguments", &call.arguments)
                } else {
                    Ok(())
                }
            },
        )?;
        map.end()
    }
}

struct AnthropicMessage<'a>(&'a Message, WriteOptions);

impl Serialize for AnthropicMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let role = match m.role() {
            Role::Assistant => "assistant",
            Role::System => "system",
            _ => "user",
        };
        let mut map = serializer.serialize_map(None)?;
        write_fields(
            &mut map,
            m.fields(),
            &["role", "content"],
            self.1.strip_pins,
            |k, map| {
                if k == "role" {
                    map.serialize_entry("role", role)
                } else {
                    let shape = if m.shape() == Shape::String {
                        Shape::String
                    } else {
                        Shape::Parts
                    };
                    write_content(map, m.blocks(), shape, Dialect::Anthropic)
                }
            },
        )?;
        map.end()
    }
}

/// One Anthropic wire message: a message, or user messages merged into one turn (the
/// cascade's notices with the message next to them). The first of them with wire keys
/// gives the keys; the content is every block in order.
struct AnthropicTurn<'a>(&'a [&'a Message], WriteOptions);

impl Serialize for AnthropicTurn<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let messages = self.0;
        if let [only] = messages {
            return AnthropicMessage(only, self.1).serialize(serializer);
        }
        let blocks = messages.iter().flat_map(|m| m.blocks().iter());
        let empty = Map::new();
        let fields = messages
            .iter()
            .map(|m| m.fields())
            .find(|f| !f.is_empty())
            .unwrap_or(&empty);
        let mut map = serializer.serialize_map(None)?;
        write_fields(
            &mut map,
            fields,
            &["role", "content"],
            self.1.strip_pins,
            |k, map| {
                if k == "role" {
                    map.serialize_entry("role", "user")
                } else {
                    write_content(map, blocks.clone(), Shape::Parts, Dialect::Anthropic)
                }
            },
        )?;
        map.end()
    }
}

/// The top-level `system` of an Anthropic body.
struct AnthropicSystem<'a>(&'a [&'a Message]);

impl Serialize for AnthropicSystem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            [only] if only.shape() == Shape::String && only.blocks().len() == 1 => only.blocks()[0]
                .as_text()
                .unwrap_or_default()
                .serialize(serializer),
            messages => serializer.collect_seq(
                messages
                    .iter()
                    .flat_map(|m| m.blocks().iter())
                    .map(|b| Part(b, Dialect::Anthropic)),
            ),
        }
    }
}
