//! Writing a Responses body straight to a serializer: every item back in its place, with
//! its own keys in their original order.

use std::collections::HashMap;

use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::{ARGUMENT_KEYS, INSTRUCTIONS, LAYOUT, OBJECT_OUTPUT, is_plain_part, shape_of};
use crate::conversation::{Block, Conversation, Message, Role, Shape, ToolCall, ToolResult};
use crate::format::WriteOptions;
use crate::format::fields::{Seq, write_fields};

/// A whole Responses request body.
pub(in crate::format) struct Body<'a>(
    pub(in crate::format) &'a Conversation,
    pub(in crate::format) WriteOptions,
);

fn is_instructions(message: &Message) -> bool {
    message.role() == Role::System && message.fields().contains_key(INSTRUCTIONS)
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let instructions = c.messages.iter().find(|m| is_instructions(m));
        // The type of every call by its id: a result added by a repair (no keys of its own)
        // is written as the output type of its call.
        let mut kinds: HashMap<&str, &str> = HashMap::new();
        for call in c.messages.iter().flat_map(Message::tool_calls) {
            let kind = call.fields.get("type").and_then(Value::as_str);
            kinds.insert(&call.id, kind.unwrap_or("function_call"));
        }
        let input = Input {
            messages: c.messages.iter().filter(|m| !is_instructions(m)).collect(),
            options: self.1,
            kinds,
        };
        let mut map = serializer.serialize_map(None)?;
        write_fields(
            &mut map,
            &c.envelope,
            &["instructions", "input"],
            false,
            |key, map| match (key, instructions, c.envelope.get(key)) {
                ("instructions", Some(m), _) => map.serialize_entry(key, &m.text_content()),
                ("instructions", None, Some(raw)) => map.serialize_entry(key, raw),
                ("input", _, Some(_)) => map.serialize_entry(key, &input),
                ("input", _, None) if !input.messages.is_empty() => {
                    map.serialize_entry(key, &input)
                }
                _ => Ok(()),
            },
        )?;
        map.end()
    }
}

/// The `input`: a string when it was one, else the items of every message in order.
struct Input<'a> {
    messages: Vec<&'a Message>,
    options: WriteOptions,
    kinds: HashMap<&'a str, &'a str>,
}

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let [only] = self.messages.as_slice()
            && let Some(text) = string_input(only)
        {
            return serializer.serialize_str(text);
        }
        let mut seq = serializer.serialize_seq(None)?;
        let mut items = Vec::new();
        for message in &self.messages {
            items.clear();
            items_of(message, &mut items);
            for item in &items {
                seq.serialize_element(&ItemView(item, self))?;
            }
        }
        seq.end()
    }
}

/// The text of a message that stands for `"input": "text"` (one user message with no keys).
fn string_input(message: &Message) -> Option<&str> {
    match message.blocks() {
        [Block::Text(t)]
            if message.role() == Role::User
                && message.shape() == Shape::String
                && message.fields().is_empty()
                && t.fields.is_empty() =>
        {
            Some(&t.text)
        }
        _ => None,
    }
}

/// One input item, borrowed from the model.
enum Item<'a> {
    /// Reasoning, built-in and unknown items: exactly as they came.
    Raw(&'a Value),
    Call(&'a ToolCall),
    Output(Option<&'a Map<String, Value>>, &'a ToolResult),
    /// A `message` item: role, its keys, its content parts and how they were written.
    Message(Role, Option<&'a Map<String, Value>>, Vec<&'a Block>, Shape),
}

/// A block that is an item of its own in an assistant message (everything but parts).
fn single(block: &Block) -> Item<'_> {
    match block {
        Block::ToolCall(call) => Item::Call(call),
        Block::ToolResult(result) => Item::Output(None, result),
        Block::Binary(o) | Block::Thinking(o) | Block::Other(o) => Item::Raw(&o.raw),
        Block::Text(_) => Item::Message(Role::Assistant, None, vec![block], Shape::Parts),
    }
}

fn items_of<'a>(message: &'a Message, out: &mut Vec<Item<'a>>) {
    let role = message.role();
    if role.is_tool_result() {
        let mut fields = Some(message.fields());
        for block in message.blocks() {
            match block {
                Block::ToolResult(result) => out.push(Item::Output(fields.take(), result)),
                other => out.push(single(other)),
            }
        }
    } else if role == Role::Assistant {
        if !by_layout(message, out) {
            by_runs(message, out);
        }
    } else if role == Role::User && by_layout(message, out) {
        // Consecutive user items, each written back as it came.
    } else {
        // User, system, developer: the content parts as one message, then any calls or
        // results a strategy put there as items of their own.
        let (parts, rest): (Vec<&Block>, Vec<&Block>) = message
            .blocks()
            .iter()
            .partition(|b| !matches!(b, Block::ToolCall(_) | Block::ToolResult(_)));
        if !parts.is_empty() || rest.is_empty() {
            // A layout that no longer matches is not a wire key: the parts go out as one
            // message with the keys a new one gets.
            let fields = (!message.fields().contains_key(LAYOUT)).then(|| message.fields());
            out.push(Item::Message(role, fields, parts, message.shape()));
        }
        out.extend(rest.into_iter().map(single));
    }
}

/// Writes a message of several items (assistant, or user) by its layout; `false` when it has none or the blocks no
/// longer match it (nothing is written then).
fn by_layout<'a>(message: &'a Message, out: &mut Vec<Item<'a>>) -> bool {
    let Some(Value::Array(entries)) = message.fields().get(LAYOUT) else {
        return false;
    };
    let blocks = message.blocks();
    let mut items = Vec::with_capacity(entries.len());
    let mut at = 0;
    for entry in entries {
        let rest = blocks.get(at..);
        let Some((item, used)) = rest.and_then(|rest| layout_item(message.role(), entry, rest))
        else {
            return false;
        };
        at += used;
        items.push(item);
    }
    if at != blocks.len() {
        return false;
    }
    out.extend(items);
    true
}

/// The item a layout entry stands for, read from the blocks it starts at, and how many
/// blocks it takes.
fn layout_item<'a>(role: Role, entry: &'a Value, blocks: &'a [Block]) -> Option<(Item<'a>, usize)> {
    match entry {
        Value::Null => blocks
            .first()
            .filter(|b| !is_plain_part(b))
            .map(|b| (single(b), 1)),
        Value::Object(entry) => {
            let item = entry.get("item")?.as_object()?;
            let shape = shape_of(entry.get("shape")?.as_str()?);
            let count = usize::try_from(entry.get("parts")?.as_u64()?).ok()?;
            let run = blocks.get(..count)?;
            run.iter()
                .all(|b| is_plain_part(b) || matches!(b, Block::Other(_)))
                .then(|| {
                    let parts = run.iter().collect();
                    (Item::Message(role, Some(item), parts, shape), count)
                })
        }
        _ => None,
    }
}

/// Writes an assistant message without a layout: runs of text and binary parts are
/// message items (the first one with the message's own keys), other blocks items of their
/// own.
fn by_runs<'a>(message: &'a Message, out: &mut Vec<Item<'a>>) {
    let mut own = (!message.fields().contains_key(LAYOUT)).then(|| message.fields());
    let mut shape = message.shape();
    let mut run: Vec<&Block> = Vec::new();
    let mut flush = |run: &mut Vec<&'a Block>, out: &mut Vec<Item<'a>>| {
        if !run.is_empty() {
            out.push(Item::Message(
                Role::Assistant,
                own.take(),
                std::mem::take(run),
                shape,
            ));
            shape = Shape::Parts;
        }
    };
    for block in message.blocks() {
        if is_plain_part(block) {
            run.push(block);
        } else {
            flush(&mut run, out);
            out.push(single(block));
        }
    }
    flush(&mut run, out);
    if message.blocks().is_empty() {
        out.push(Item::Message(Role::Assistant, own, Vec::new(), shape));
    }
}

struct ItemView<'a, 'b>(&'b Item<'a>, &'b Input<'a>);

impl Serialize for ItemView<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let strip = self.1.options.strip_pins;
        let empty = Map::new();
        match self.0 {
            Item::Raw(raw) => match raw {
                Value::Object(fields) if strip && fields.contains_key("_pin") => {
                    serializer.collect_map(fields.iter().filter(|(k, _)| *k != "_pin"))
                }
                raw => raw.serialize(serializer),
            },
            Item::Call(call) => {
                let kind = call.fields.get("type").and_then(Value::as_str);
                let mut keys = vec!["type", "call_id"];
                if kind.is_none() || call.fields.contains_key("name") {
                    keys.push("name");
                }
                match ARGUMENT_KEYS.iter().find(|k| call.fields.contains_key(**k)) {
                    Some(key) => keys.push(key),
                    None if kind.is_none() => keys.push("arguments"),
                    None => {}
                }
                let mut map = serializer.serialize_map(None)?;
                write_fields(&mut map, &call.fields, &keys, strip, |key, map| match key {
                    "type" => map.serialize_entry(key, kind.unwrap_or("function_call")),
                    "call_id" => map.serialize_entry(key, &call.id),
                    "name" => map.serialize_entry(key, &call.name),
                    _ => map.serialize_entry(key, &call.arguments),
                })?;
                map.end()
            }
            Item::Output(fields, result) => {
                let fields = fields.unwrap_or(&empty);
                let kind = match fields.get("type").and_then(Value::as_str) {
                    Some(kind) => kind.to_owned(),
                    None => match self.1.kinds.get(result.call_id.as_str()) {
                        Some(call) => format!("{call}_output"),
                        None => "function_call_output".to_owned(),
                    },
                };
                let id_key = if !fields.contains_key("call_id") && kind == "local_shell_call_output"
                {
                    "id"
                } else {
                    "call_id"
                };
                let mut map = serializer.serialize_map(None)?;
                write_fields(
                    &mut map,
                    fields,
                    &["type", id_key, "output"],
                    strip,
                    |key, map| match key {
                        "type" => map.serialize_entry(key, &kind),
                        "output" => write_output(map, fields.get("output"), result),
                        _ => map.serialize_entry(key, &result.call_id),
                    },
                )?;
                map.end()
            }
            Item::Message(role, fields, parts, shape) => {
                let default_type = if *role == Role::Assistant {
                    "output_text"
                } else {
                    "input_text"
                };
                let mut map = serializer.serialize_map(None)?;
                write_fields(
                    &mut map,
                    fields.unwrap_or(&empty),
                    &["role", "content"],
                    strip,
                    |key, map| {
                        if key == "role" {
                            map.serialize_entry(key, role.as_str())
                        } else {
                            write_content(map, "content", parts, *shape, default_type)
                        }
                    },
                )?;
                map.end()
            }
        }
    }
}

/// Writes an output item's `output`; `original` is the item's own, kept when it was one
/// object.
fn write_output<M: SerializeMap>(
    map: &mut M,
    original: Option<&Value>,
    result: &ToolResult,
) -> Result<(), M::Error> {
    if result.fields.contains_key(OBJECT_OUTPUT) {
        return match (result.content.as_slice(), original) {
            ([Block::Binary(o) | Block::Other(o)], _) => map.serialize_entry("output", &o.raw),
            // Compacted to text, which the API refuses there: the object as it came.
            (_, Some(original)) => map.serialize_entry("output", original),
            (_, None) => map.serialize_entry("output", &Value::Null),
        };
    }
    let parts: Vec<&Block> = result.content.iter().collect();
    write_content(map, "output", &parts, result.shape, "input_text")
}

/// Writes content (or an output) as it was: a string, null, nothing, or an array of parts.
fn write_content<M: SerializeMap>(
    map: &mut M,
    key: &str,
    parts: &[&Block],
    shape: Shape,
    default_type: &'static str,
) -> Result<(), M::Error> {
    match (shape, parts) {
        (Shape::Absent, []) => Ok(()),
        (Shape::Null, []) => map.serialize_entry(key, &Value::Null),
        (Shape::String, []) => map.serialize_entry(key, ""),
        (Shape::String, [Block::Text(t)]) => map.serialize_entry(key, &t.text),
        _ => map.serialize_entry(key, &Seq(parts.iter().map(|b| Part(b, default_type)))),
    }
}

/// One content part: text written from the model, anything else as it came.
struct Part<'a>(&'a Block, &'static str);

impl Serialize for Part<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Block::Text(t) => {
                let mut map = serializer.serialize_map(None)?;
                write_fields(&mut map, &t.fields, &["type", "text"], false, |key, map| {
                    if key == "text" {
                        map.serialize_entry(key, &t.text)
                    } else {
                        match t.fields.get("type").filter(|v| !v.is_null()) {
                            Some(kind) => map.serialize_entry(key, kind),
                            None => map.serialize_entry(key, self.1),
                        }
                    }
                })?;
                map.end()
            }
            Block::Binary(o) | Block::Thinking(o) | Block::Other(o) => o.raw.serialize(serializer),
            Block::ToolCall(_) | Block::ToolResult(_) => Err(S::Error::custom(
                "a tool call or result inside message content",
            )),
        }
    }
}
