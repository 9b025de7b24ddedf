//! OpenAI Responses request bodies (`POST /v1/responses`): reading into the neutral model.
//!
//! The mapping, chosen so that the strategies work unchanged:
//! - `instructions` (a string) becomes a leading system message, marked so that the writer
//!   puts it back into the envelope: never removed, always counted.
//! - `input` as a string is one user message; as an item list, each `message` item of role
//!   system or developer is one message, and consecutive user items of `"type": "message"`
//!   are one (Codex sends its context, AGENTS.md and the task as separate items of one turn:
//!   the first user message, which the cascade always keeps, then holds the task).
//! - A call item (`function_call`, `custom_tool_call`, `local_shell_call`, `computer_call`,
//!   any `*_call` with a `call_id`) is a tool call keyed by its `call_id`; its output item
//!   (`<type>_output` with the same `call_id`; `id` for `local_shell_call_output`) is a
//!   `tool` message, so a pair is kept or removed whole like an OpenAI pair.
//! - Consecutive model-side items (`reasoning`, assistant `message`s, calls, built-in tool
//!   items, unknown items) form one assistant message, in order: a `reasoning` item is a
//!   thinking block kept byte for byte beside the call or message it precedes, so no strategy
//!   separates them. The items' own keys are kept in a private layout entry of that message
//!   and the items are written back separately, in their order.

mod write;

use serde_json::{Map, Value};

pub(super) use write::Body;

use super::kind_of;
use crate::conversation::{
    Block, Conversation, Format, Message, Opaque, Role, Shape, TextBlock, ToolCall, ToolResult,
};
use crate::error::ParseError;

/// Marks the system message that holds the body's `instructions` (never written as a key).
const INSTRUCTIONS: &str = "_responses_instructions";
/// The layout of an assistant message made of several items (never written as a key): one
/// entry per item, `null` for an item held by one block, or `{"item", "shape", "parts"}`
/// for an assistant `message` item (its keys, how its content was written, how many of
/// the message's blocks are its parts).
const LAYOUT: &str = "_responses_items";
/// Marks a tool result whose `output` was one object (a computer screenshot, say): its
/// item keeps the original, which is written when the content is no longer one object.
const OBJECT_OUTPUT: &str = "_responses_object_output";
/// The keys that may hold a call's arguments, by item type (`function_call`,
/// `custom_tool_call`, `local_shell_call` / `computer_call`, `apply_patch_call`).
const ARGUMENT_KEYS: &[&str] = &["arguments", "input", "action", "operation"];

pub(super) fn read(mut body: Map<String, Value>) -> Result<Conversation, ParseError> {
    let mut messages = Vec::new();
    if let Some(slot) = body.get_mut("instructions")
        && let Value::String(text) = slot.take()
    {
        let mut fields = Map::new();
        fields.insert(INSTRUCTIONS.into(), Value::Bool(true));
        messages.push(Message::new(
            Role::System,
            vec![Block::text(text)],
            Shape::String,
            fields,
        ));
    }
    match body.get_mut("input").map(Value::take) {
        Some(Value::String(text)) => messages.push(Message::text(Role::User, text)),
        Some(Value::Array(items)) => read_items(items, &mut messages)?,
        Some(other) => {
            return Err(ParseError::new(
                "$.input",
                format!(
                    "expected a string or an array of input items, found {}",
                    kind_of(&other)
                ),
            ));
        }
        None => {}
    }
    Ok(Conversation {
        format: Format::Responses,
        messages,
        envelope: body,
    })
}

/// Consecutive items being gathered into one message: model-side items into one assistant
/// message, or consecutive user items of `"type": "message"` (Codex sends its context, the
/// AGENTS.md text and the task as separate items of one turn) into one user message.
struct Group {
    role: Role,
    /// Every item so far says `"type": "message"`: only then may a user item join. The
    /// cascade writes its notices and summaries without it, so they stay messages of their
    /// own when a compacted body is read again.
    typed: bool,
    blocks: Vec<Block>,
    layout: Vec<Value>,
    pinned: bool,
}

impl Group {
    fn new(role: Role) -> Self {
        Group {
            role,
            typed: false,
            blocks: Vec::new(),
            layout: Vec::new(),
            pinned: false,
        }
    }

    /// Makes the group one of `role`, writing out what it held when that changes it.
    fn become_role(&mut self, role: Role, out: &mut Vec<Message>) {
        if self.role != role {
            self.flush(out);
            self.role = role;
        }
    }

    fn push_one(&mut self, block: Block, pinned: bool) {
        self.blocks.push(block);
        self.layout.push(Value::Null);
        self.pinned |= pinned;
    }

    fn push_message(&mut self, item: Map<String, Value>, blocks: Vec<Block>, shape: Shape) {
        let mut entry = Map::new();
        entry.insert("item".into(), Value::Object(item));
        entry.insert("shape".into(), Value::from(shape_name(shape)));
        entry.insert("parts".into(), Value::from(blocks.len()));
        self.blocks.extend(blocks);
        self.layout.push(Value::Object(entry));
    }

    fn flush(&mut self, out: &mut Vec<Message>) {
        if self.blocks.is_empty() && self.layout.is_empty() {
            return;
        }
        let role = self.role;
        let mut group = std::mem::replace(self, Group::new(role));
        // One message item whose parts the writer cannot mistake for items of their own:
        // a message like any other, no layout needed.
        let plain = role == Role::User || group.blocks.iter().all(is_plain_part);
        let single = match group.layout.as_mut_slice() {
            [Value::Object(entry)] if plain => {
                let shape = entry.get("shape").and_then(Value::as_str).map(shape_of);
                match (entry.get_mut("item").map(Value::take), shape) {
                    (Some(Value::Object(item)), Some(shape)) => Some((item, shape)),
                    _ => None,
                }
            }
            _ => None,
        };
        let mut message = match single {
            Some((item, shape)) => Message::new(role, group.blocks, shape, item),
            None => {
                let mut fields = Map::new();
                fields.insert(LAYOUT.into(), Value::Array(group.layout));
                Message::new(role, group.blocks, Shape::Parts, fields)
            }
        };
        if group.pinned {
            message.pin();
        }
        out.push(message);
    }
}

fn is_plain_part(block: &Block) -> bool {
    matches!(block, Block::Text(_) | Block::Binary(_))
}

fn read_items(items: Vec<Value>, out: &mut Vec<Message>) -> Result<(), ParseError> {
    out.reserve(items.len());
    let mut group = Group::new(Role::Assistant);
    for (index, item) in items.into_iter().enumerate() {
        let Value::Object(fields) = item else {
            return Err(ParseError::new(
                format!("$.input[{index}]"),
                format!("expected an input item object, found {}", kind_of(&item)),
            ));
        };
        let pinned = fields.get("_pin").and_then(Value::as_bool) == Some(true);
        match read_item(fields) {
            Item::Turn(message) => {
                group.flush(out);
                out.push(message);
            }
            Item::Message(role, item, blocks, shape) => {
                let typed = item.get("type").and_then(Value::as_str) == Some("message");
                if role == Role::User && !(typed && group.typed) {
                    group.flush(out);
                }
                group.become_role(role, out);
                group.typed = typed;
                group.pinned |= pinned;
                group.push_message(item, blocks, shape);
            }
            Item::Block(block) => {
                group.become_role(Role::Assistant, out);
                group.push_one(block, pinned);
            }
        }
    }
    group.flush(out);
    Ok(())
}

/// What one input item reads as.
enum Item {
    /// A message of its own: system or developer input, or a tool output.
    Turn(Message),
    /// A user or assistant `message` item: its role, its keys (content taken), its parts,
    /// their shape.
    Message(Role, Map<String, Value>, Vec<Block>, Shape),
    /// A model-side item held by one block (reasoning, a call, anything opaque).
    Block(Block),
}

fn read_item(fields: Map<String, Value>) -> Item {
    let kind = fields
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match kind.as_deref() {
        None | Some("message") => read_message(fields),
        Some("reasoning") => Item::Block(Block::Thinking(Opaque {
            raw: Value::Object(fields),
        })),
        Some(kind) if kind.ends_with("_call_output") => match output_key(kind, &fields) {
            Some(key) => read_output(key, fields),
            None => opaque(fields),
        },
        Some(kind) if kind.ends_with("_call") => read_call(kind, fields),
        Some(_) => opaque(fields),
    }
}

fn opaque(fields: Map<String, Value>) -> Item {
    Item::Block(Block::Other(Opaque {
        raw: Value::Object(fields),
    }))
}

/// The key of an output item that names its call: `call_id`, or for a
/// `local_shell_call_output` without one, `id`. `None` when it holds no string.
fn output_key(kind: &str, fields: &Map<String, Value>) -> Option<&'static str> {
    let key = if fields.contains_key("call_id") || kind != "local_shell_call_output" {
        "call_id"
    } else {
        "id"
    };
    fields.get(key).is_some_and(Value::is_string).then_some(key)
}

/// Reads an output item as a `tool` message; an `output` the model cannot hold (a number,
/// say) leaves the item opaque.
fn read_output(key: &str, mut fields: Map<String, Value>) -> Item {
    let (content, shape, object) = match fields.get_mut("output").map(Value::take) {
        None => (Vec::new(), Shape::Absent, false),
        Some(Value::Object(object)) => {
            // The API takes only this object here (a screenshot): the original stays with
            // the item, to be written even when a strategy compacts the result's content.
            fields.insert("output".into(), Value::Object(object.clone()));
            (vec![read_part(object)], Shape::Parts, true)
        }
        Some(output) => match read_content(output) {
            Ok((content, shape)) => (content, shape, false),
            Err(output) => {
                // Back in its place (an existing key keeps its position).
                fields.insert("output".into(), output);
                return opaque(fields);
            }
        },
    };
    let call_id = match fields.get_mut(key).map(Value::take) {
        Some(Value::String(id)) => id,
        _ => String::new(),
    };
    let mut result_fields = Map::new();
    if object {
        result_fields.insert(OBJECT_OUTPUT.into(), Value::Bool(true));
    }
    let result = ToolResult {
        call_id,
        tool_name: None,
        content,
        shape,
        fields: result_fields,
    };
    Item::Turn(Message::new(
        Role::Tool,
        vec![Block::ToolResult(result)],
        shape,
        fields,
    ))
}

fn read_call(kind: &str, mut fields: Map<String, Value>) -> Item {
    let pairable = fields.get("call_id").is_some_and(Value::is_string)
        && fields.get("name").is_none_or(Value::is_string);
    if !pairable {
        return opaque(fields);
    }
    let take_string =
        |fields: &mut Map<String, Value>, key: &str| match fields.get_mut(key).map(Value::take) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
    let id = take_string(&mut fields, "call_id").unwrap_or_default();
    // Built-in calls have no name on the wire: the type stands for it ("local_shell").
    let name = take_string(&mut fields, "name")
        .unwrap_or_else(|| kind.trim_end_matches("_call").to_owned());
    let arguments = ARGUMENT_KEYS
        .iter()
        .find_map(|k| fields.get_mut(*k).map(Value::take))
        .unwrap_or(Value::Null);
    Item::Block(Block::ToolCall(ToolCall {
        id,
        name,
        arguments,
        fields,
        function_fields: Map::new(),
        legacy: false,
    }))
}

fn read_message(mut fields: Map<String, Value>) -> Item {
    let role = fields
        .get("role")
        .and_then(Value::as_str)
        .and_then(Role::parse)
        .filter(|r| r.is_system() || matches!(r, Role::User | Role::Assistant));
    let Some(role) = role else {
        return opaque(fields);
    };
    let (blocks, shape) = match fields.get_mut("content").map(Value::take) {
        None => (Vec::new(), Shape::Absent),
        Some(content) => match read_content(content) {
            Ok(read) => read,
            Err(content) => {
                fields.insert("content".into(), content);
                return opaque(fields);
            }
        },
    };
    if matches!(role, Role::User | Role::Assistant) {
        Item::Message(role, fields, blocks, shape)
    } else {
        Item::Turn(Message::new(role, blocks, shape, fields))
    }
}

/// Reads message content or a tool output: a string, an array of parts, or null; anything
/// else is handed back.
fn read_content(value: Value) -> Result<(Vec<Block>, Shape), Value> {
    match value {
        Value::String(text) => Ok((vec![Block::text(text)], Shape::String)),
        Value::Null => Ok((Vec::new(), Shape::Null)),
        Value::Array(parts) => {
            let blocks = parts
                .into_iter()
                .map(|part| match part {
                    Value::Object(part) => read_part(part),
                    other => Block::Other(Opaque { raw: other }),
                })
                .collect();
            Ok((blocks, Shape::Parts))
        }
        other => Err(other),
    }
}

fn read_part(mut fields: Map<String, Value>) -> Block {
    let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "input_text" | "output_text" | "text"
            if fields.get("text").is_some_and(Value::is_string) =>
        {
            match fields.get_mut("text").map(Value::take) {
                Some(Value::String(text)) => Block::Text(TextBlock { text, fields }),
                _ => Block::Other(Opaque {
                    raw: Value::Object(fields),
                }),
            }
        }
        "input_image" | "input_file" | "input_audio" | "computer_screenshot" => {
            Block::Binary(Opaque {
                raw: Value::Object(fields),
            })
        }
        _ => Block::Other(Opaque {
            raw: Value::Object(fields),
        }),
    }
}

fn shape_name(shape: Shape) -> &'static str {
    match shape {
        Shape::String => "string",
        Shape::Parts => "parts",
        Shape::Null => "null",
        Shape::Absent => "absent",
    }
}

fn shape_of(name: &str) -> Shape {
    match name {
        "string" => Shape::String,
        "null" => Shape::Null,
        "absent" => Shape::Absent,
        _ => Shape::Parts,
    }
}
