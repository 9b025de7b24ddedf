//! OpenAI Chat Completions messages: reading into the neutral model.

use serde_json::{Map, Value};

use super::{JsonPath, kind_of, read_each};
use crate::conversation::{
    Block, Conversation, Format, Message, Opaque, Role, Shape, TextBlock, ToolCall, ToolResult,
};
use crate::error::ParseError;

/// Keys of a message that the model owns (written back from the model, in place).
pub(super) const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "function_call",
];

pub(super) fn read_body(mut body: Map<String, Value>) -> Result<Conversation, ParseError> {
    let items = match body.get_mut("messages").map(Value::take) {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ParseError::new(
                "$.messages",
                format!("expected an array of messages, found {}", kind_of(&other)),
            ));
        }
        None => {
            return Err(ParseError::new("$", "expected a \"messages\" array"));
        }
    };
    let messages = read_messages(items, JsonPath::Root("$.messages"))?;
    Ok(Conversation {
        format: Format::OpenAi,
        messages,
        envelope: body,
    })
}

pub(super) fn read_bare(items: Vec<Value>) -> Result<Conversation, ParseError> {
    Ok(Conversation {
        format: Format::Bare,
        messages: read_messages(items, JsonPath::Root("$"))?,
        envelope: Map::new(),
    })
}

fn read_messages(items: Vec<Value>, base: JsonPath<'_>) -> Result<Vec<Message>, ParseError> {
    let mut messages = Vec::with_capacity(items.len());
    // The pairing key of the latest legacy `function_call`, for the `function` message after it.
    let mut legacy_call: Option<String> = None;
    for (index, item) in items.into_iter().enumerate() {
        let message = read_message(item, &base.index(index), index, &mut legacy_call)?;
        messages.push(message);
    }
    Ok(messages)
}

fn read_message(
    item: Value,
    path: &JsonPath<'_>,
    index: usize,
    legacy_call: &mut Option<String>,
) -> Result<Message, ParseError> {
    let Value::Object(mut fields) = item else {
        return Err(ParseError::new(
            path,
            format!("expected a message object, found {}", kind_of(&item)),
        ));
    };
    let role = read_role(&fields, path)?;
    // One pass over the keys rather than a hashed lookup for each key the model owns; the
    // taken values leave `null` placeholders that keep the keys' places for writing.
    let (mut content, mut tool_call_id, mut tool_calls, mut function_call) =
        (None, None, None, None);
    for (key, value) in fields.iter_mut() {
        match key.as_str() {
            "content" => content = Some(value.take()),
            "tool_call_id" if role == Role::Tool => tool_call_id = Some(value.take()),
            "tool_calls" => tool_calls = Some(value.take()),
            "function_call" => function_call = Some(value.take()),
            _ => {}
        }
    }
    let (content, shape) = match content {
        None => (Vec::new(), Shape::Absent),
        Some(value) => read_content(value, &path.key("content"))?,
    };
    let mut blocks = content;

    if role == Role::Tool {
        let call_id = match tool_call_id {
            Some(Value::String(id)) => id,
            Some(other) => {
                return Err(ParseError::new(
                    path.key("tool_call_id"),
                    format!("expected a string, found {}", kind_of(&other)),
                ));
            }
            None => {
                return Err(ParseError::new(
                    path,
                    "tool message without \"tool_call_id\" (expected the id of the call it answers)",
                ));
            }
        };
        blocks = vec![Block::ToolResult(ToolResult {
            call_id,
            tool_name: None,
            content: blocks,
            shape,
            fields: Map::new(),
        })];
    } else if role == Role::Function {
        let name = fields
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let call_id = legacy_call
            .take()
            .unwrap_or_else(|| format!("legacy-function-{index}"));
        blocks = vec![Block::ToolResult(ToolResult {
            call_id,
            tool_name: name,
            content: blocks,
            shape,
            fields: Map::new(),
        })];
    }

    if let Some(calls) = tool_calls {
        let path = path.key("tool_calls");
        let Value::Array(calls) = calls else {
            return Err(ParseError::new(
                path,
                format!("expected an array of tool calls, found {}", kind_of(&calls)),
            ));
        };
        for (i, call) in calls.into_iter().enumerate() {
            blocks.push(Block::ToolCall(read_tool_call(call, &path.index(i))?));
        }
    }
    if let Some(call) = function_call {
        let id = format!("legacy-function-{index}");
        let mut call = read_function(call, &path.key("function_call"))?;
        call.id = id.clone();
        call.legacy = true;
        *legacy_call = Some(id);
        blocks.push(Block::ToolCall(call));
    }
    Ok(Message::new(role, blocks, shape, fields))
}

fn read_role(fields: &Map<String, Value>, path: &JsonPath<'_>) -> Result<Role, ParseError> {
    match fields.get("role") {
        Some(Value::String(name)) => Role::parse(name).ok_or_else(|| {
            ParseError::new(
                path.key("role"),
                format!(
                    "unknown role \"{name}\" (expected system, developer, user, assistant, tool or function)"
                ),
            )
        }),
        Some(other) => Err(ParseError::new(
            path.key("role"),
            format!("expected a role string, found {}", kind_of(other)),
        )),
        None => Err(ParseError::new(path, "message without \"role\"")),
    }
}

/// Reads OpenAI content: a string, an array of parts, or null.
pub(super) fn read_content(
    value: Value,
    path: &JsonPath<'_>,
) -> Result<(Vec<Block>, Shape), ParseError> {
    match value {
        Value::String(text) => Ok((vec![Block::text(text)], Shape::String)),
        Value::Null => Ok((Vec::new(), Shape::Null)),
        Value::Array(parts) => Ok((read_each(parts, path, read_part)?, Shape::Parts)),
        other => Err(ParseError::new(
            path,
            format!(
                "expected a string, an array of content parts or null, found {}",
                kind_of(&other)
            ),
        )),
    }
}

fn read_part(part: Value, path: &JsonPath<'_>) -> Result<Block, ParseError> {
    let Value::Object(mut fields) = part else {
        return Err(ParseError::new(
            path,
            format!("expected a content part object, found {}", kind_of(&part)),
        ));
    };
    let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" | "input_text" | "output_text" => match fields.get_mut("text").map(Value::take) {
            Some(Value::String(text)) => Ok(Block::Text(TextBlock { text, fields })),
            other => Err(ParseError::new(
                path.key("text"),
                format!(
                    "expected a string, found {}",
                    other.as_ref().map_or("nothing", kind_of)
                ),
            )),
        },
        "image_url" | "input_image" | "input_audio" | "file" | "image" | "audio" => {
            Ok(Block::Binary(Opaque {
                raw: Value::Object(fields),
            }))
        }
        _ => Ok(Block::Other(Opaque {
            raw: Value::Object(fields),
        })),
    }
}

fn read_tool_call(call: Value, path: &JsonPath<'_>) -> Result<ToolCall, ParseError> {
    let Value::Object(mut fields) = call else {
        return Err(ParseError::new(
            path,
            format!("expected a tool call object, found {}", kind_of(&call)),
        ));
    };
    let id = match fields.get_mut("id").map(Value::take) {
        Some(Value::String(id)) => id,
        _ => {
            return Err(ParseError::new(
                path.key("id"),
                "expected the tool call's id (a string)",
            ));
        }
    };
    let Some(function) = fields.get_mut("function").map(Value::take) else {
        return Err(ParseError::new(
            path,
            "tool call without \"function\" (expected {\"name\", \"arguments\"})",
        ));
    };
    let mut call = read_function(function, &path.key("function"))?;
    call.id = id;
    call.fields = fields;
    Ok(call)
}

fn read_function(function: Value, path: &JsonPath<'_>) -> Result<ToolCall, ParseError> {
    let Value::Object(mut function_fields) = function else {
        return Err(ParseError::new(
            path,
            format!("expected an object, found {}", kind_of(&function)),
        ));
    };
    let name = match function_fields.get_mut("name").map(Value::take) {
        Some(Value::String(name)) => name,
        _ => {
            return Err(ParseError::new(
                path.key("name"),
                "expected the function's name (a string)",
            ));
        }
    };
    let arguments = function_fields
        .get_mut("arguments")
        .map(Value::take)
        .unwrap_or(Value::Null);
    Ok(ToolCall {
        id: String::new(),
        name,
        arguments,
        fields: Map::new(),
        function_fields,
        legacy: false,
    })
}
