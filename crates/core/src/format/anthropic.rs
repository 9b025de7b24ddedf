//! Anthropic Messages bodies: reading into the neutral model.
//!
//! The top-level `system` becomes a leading system message; tool results are blocks of user
//! messages, as on the wire. A user message that carries the cascade's own notices is split
//! into them and the rest (see `merge`).

use serde_json::{Map, Value};

use super::{JsonPath, kind_of, read_each};
use crate::conversation::{
    Block, Conversation, Format, Message, Opaque, Role, Shape, TextBlock, ToolCall, ToolResult,
};
use crate::error::ParseError;

pub(super) fn read(mut body: Map<String, Value>) -> Result<Conversation, ParseError> {
    let mut messages = Vec::new();
    if let Some(system) = body.get_mut("system").map(Value::take) {
        let (blocks, shape) = read_blocks(system, &JsonPath::Root("$.system"))?;
        messages.push(Message::new(Role::System, blocks, shape, Map::new()));
    }
    let items = match body.get_mut("messages").map(Value::take) {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ParseError::new(
                "$.messages",
                format!("expected an array of messages, found {}", kind_of(&other)),
            ));
        }
        None => return Err(ParseError::new("$", "expected a \"messages\" array")),
    };
    messages.reserve(items.len());
    let base = JsonPath::Root("$.messages");
    for (index, item) in items.into_iter().enumerate() {
        messages.push(read_message(item, &base.index(index))?);
    }
    Ok(Conversation {
        format: Format::Anthropic,
        messages: super::merge::split_markers(messages),
        envelope: body,
    })
}

fn read_message(item: Value, path: &JsonPath<'_>) -> Result<Message, ParseError> {
    let Value::Object(mut fields) = item else {
        return Err(ParseError::new(
            path,
            format!("expected a message object, found {}", kind_of(&item)),
        ));
    };
    let role = match fields.get("role") {
        Some(Value::String(name)) => match name.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            // Claude Code puts a system message inside `messages` (its environment block);
            // it stays there on writing (its `role` key marks where it came from).
            "system" => Role::System,
            other => {
                return Err(ParseError::new(
                    path.key("role"),
                    format!("unknown role \"{other}\" (expected user, assistant or system)"),
                ));
            }
        },
        Some(other) => {
            return Err(ParseError::new(
                path.key("role"),
                format!("expected a role string, found {}", kind_of(other)),
            ));
        }
        None => return Err(ParseError::new(path, "message without \"role\"")),
    };
    let (blocks, shape) = match fields.get_mut("content").map(Value::take) {
        Some(content) => read_blocks(content, &path.key("content"))?,
        None => {
            return Err(ParseError::new(
                path,
                "message without \"content\" (expected a string or an array of blocks)",
            ));
        }
    };
    Ok(Message::new(role, blocks, shape, fields))
}

/// Reads content that is a string or an array of blocks.
fn read_blocks(value: Value, path: &JsonPath<'_>) -> Result<(Vec<Block>, Shape), ParseError> {
    match value {
        Value::String(text) => Ok((vec![Block::text(text)], Shape::String)),
        Value::Array(items) => Ok((read_each(items, path, read_block)?, Shape::Parts)),
        other => Err(ParseError::new(
            path,
            format!(
                "expected a string or an array of content blocks, found {}",
                kind_of(&other)
            ),
        )),
    }
}

fn take_string(
    fields: &mut Map<String, Value>,
    key: &'static str,
    path: &JsonPath<'_>,
) -> Result<String, ParseError> {
    match fields.get_mut(key).map(Value::take) {
        Some(Value::String(s)) => Ok(s),
        other => Err(ParseError::new(
            path.key(key),
            format!(
                "expected a string, found {}",
                other.as_ref().map_or("nothing", kind_of)
            ),
        )),
    }
}

fn read_block(item: Value, path: &JsonPath<'_>) -> Result<Block, ParseError> {
    let Value::Object(mut fields) = item else {
        return Err(ParseError::new(
            path,
            format!("expected a content block object, found {}", kind_of(&item)),
        ));
    };
    let kind = match fields.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        _ => {
            return Err(ParseError::new(
                path.key("type"),
                "expected the block's type (a string)",
            ));
        }
    };
    Ok(match kind.as_str() {
        "text" => {
            let text = take_string(&mut fields, "text", path)?;
            Block::Text(TextBlock { text, fields })
        }
        "tool_use" => {
            let id = take_string(&mut fields, "id", path)?;
            let name = take_string(&mut fields, "name", path)?;
            let arguments = fields
                .get_mut("input")
                .map(Value::take)
                // Absent stays absent on writing (see ordered.rs); `null` reads as no arguments.
                .unwrap_or(Value::Null);
            Block::ToolCall(ToolCall {
                id,
                name,
                arguments,
                fields,
                function_fields: Map::new(),
                legacy: false,
            })
        }
        "tool_result" => {
            let call_id = take_string(&mut fields, "tool_use_id", path)?;
            let (content, shape) = match fields.get_mut("content").map(Value::take) {
                None => (Vec::new(), Shape::Absent),
                Some(content) => read_blocks(content, &path.key("content"))?,
            };
            Block::ToolResult(ToolResult {
                call_id,
                tool_name: None,
                content,
                shape,
                fields,
            })
        }
        "thinking" | "redacted_thinking" => Block::Thinking(Opaque {
            raw: Value::Object(fields),
        }),
        "image" | "document" | "file" | "audio" => Block::Binary(Opaque {
            raw: Value::Object(fields),
        }),
        _ => Block::Other(Opaque {
            raw: Value::Object(fields),
        }),
    })
}
