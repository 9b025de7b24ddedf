//! Reading and writing the wire formats, losslessly.
//!
//! [`parse`] auto-detects an OpenAI Chat Completions body, an Anthropic Messages body, an
//! OpenAI Responses body or a bare array of OpenAI-style messages; [`to_vec`] writes a
//! conversation back in the format it came in. A round trip with nothing changed gives
//! semantically equal JSON, in the original key order (unknown keys included).
//! In Anthropic form the cascade's notices and summaries are merged into the adjacent user
//! message on writing and split out on reading, so that turns alternate on the wire while the
//! model keeps them as their own messages.

mod anthropic;
pub mod compaction;
mod fields;
mod json_path;
mod merge;
pub mod message_facts;
mod openai;
mod ordered;
mod responses;
mod unique_keys;

use serde_json::Value;

use crate::conversation::{Conversation, Format};
use crate::error::{Error, ParseError};
use json_path::JsonPath;

/// The UTF-8 encoding of U+FEFF, which JSON parsers reject as a value's first character.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// How to write a conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Drop `_pin` markers (providers reject unknown message fields).
    pub strip_pins: bool,
    /// Indent the JSON.
    pub pretty: bool,
}

/// Reads a request body (or a bare message array) from bytes. `format` forces a format;
/// `None` auto-detects it. A leading UTF-8 byte order mark (editors on Windows save one) is
/// skipped.
pub fn parse(bytes: &[u8], format: Option<Format>) -> Result<Conversation, ParseError> {
    let value: Value = read_json(json_text(bytes)?).map_err(invalid_json)?;
    parse_value(value, format)
}

/// serde_json's reading of `bytes`. Text that is UTF-8 (checked once, over the whole body)
/// is read as a `str`, whose strings serde_json then takes as they are instead of checking
/// each on its own (one pass instead of one call per string: −0.7 to −1.2% of a whole
/// `compact`'s instructions on the 0.1–1.2 MB fixtures); other bytes are read as bytes, for
/// serde_json's error and its position.
fn read_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match utf8(bytes) {
        Some(text) => serde_json::from_str(text),
        None => serde_json::from_slice(bytes),
    }
}

/// `bytes` as text when they are UTF-8, checked with SIMD where the CPU has it (the same
/// answer as `std::str::from_utf8`, whose check read a request at ~2 instructions a byte).
/// Check a body once with it and parse the text with `serde_json::from_str`: the parser then
/// checks no string again.
///
/// ```
/// use context_cascade::format::utf8;
///
/// assert_eq!(utf8("héllo".as_bytes()), Some("héllo"));
/// assert_eq!(utf8(b"\xff"), None);
/// ```
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    simdutf8::basic::from_utf8(bytes).ok()
}

/// [`parse`], refusing a body in which a JSON object repeats a key (`{"model":"a",
/// "model":"b"}`): parsers disagree on which value such a body means, and one written back
/// holds one value where its sender wrote two. The error names the object's JSON path.
/// Text that is not JSON is reported as such first.
///
/// ```
/// use context_cascade::format;
///
/// let body = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"a","content":"b"}]}"#;
/// assert!(format::parse(body, None).is_ok());
/// let refused = format::parse_strict(body, None).unwrap_err();
/// assert_eq!(refused.path, "$.messages[0]");
/// assert!(refused.problem.starts_with("duplicate key \"content\""));
/// ```
pub fn parse_strict(bytes: &[u8], format: Option<Format>) -> Result<Conversation, ParseError> {
    let value = unique_keys::from_slice(json_text(bytes)?).map_err(|refused| match refused {
        unique_keys::Refused::Json(error) => invalid_json(error),
        unique_keys::Refused::RepeatedKey { path, key } => ParseError::new(
            path,
            format!(
                "duplicate key {key}: a JSON object must not repeat a key (which value was meant?)"
            ),
        ),
    })?;
    parse_value(value, format)
}

/// The JSON text of a body: without a leading byte order mark; an error when it is empty.
fn json_text(bytes: &[u8]) -> Result<&[u8], ParseError> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ParseError::new(
            "$",
            "empty input: expected a JSON request body",
        ));
    }
    Ok(bytes)
}

/// A JSON syntax error, with its line and column.
fn invalid_json(error: serde_json::Error) -> ParseError {
    ParseError::new(
        format!("line {}, column {}", error.line(), error.column()),
        format!("invalid JSON: {}", strip_position(&error.to_string())),
    )
}

/// Reads a request body already parsed as JSON.
pub fn parse_value(value: Value, format: Option<Format>) -> Result<Conversation, ParseError> {
    let format = match format {
        Some(f) => f,
        None => detect(&value)?,
    };
    let mut conversation = match (format, value) {
        (Format::Anthropic, Value::Object(body)) => anthropic::read(body)?,
        (Format::OpenAi, Value::Object(body)) => openai::read_body(body)?,
        (Format::Bare, Value::Array(items)) => openai::read_bare(items)?,
        (Format::Responses, Value::Object(body)) => responses::read(body)?,
        (Format::Bare, _) => {
            return Err(ParseError::new("$", "expected a JSON array of messages"));
        }
        (_, Value::Array(items)) if format == Format::OpenAi => openai::read_bare(items)?,
        (_, other) => {
            return Err(ParseError::new(
                "$",
                format!("expected a request body object, found {}", kind_of(&other)),
            ));
        }
    };
    conversation.resolve_tool_names();
    Ok(conversation)
}

/// Writes a conversation in its format.
pub fn to_vec(conversation: &Conversation, options: WriteOptions) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    to_writer(conversation, options, &mut out)?;
    Ok(out)
}

/// [`to_vec`] into `writer`. A caller that knows about how long the body will be (the
/// request it read, say) can write into a buffer of that size: a buffer that grows copies
/// itself at each doubling and touches about twice the pages.
pub fn to_writer(
    conversation: &Conversation,
    options: WriteOptions,
    writer: impl std::io::Write,
) -> Result<(), Error> {
    let view = ordered::View {
        conversation,
        options,
    };
    let result = if options.pretty {
        serde_json::to_writer_pretty(writer, &view)
    } else {
        serde_json::to_writer(writer, &view)
    };
    result.map_err(|e| Error::Write(e.to_string()))
}

/// Writes a conversation as a JSON value (for callers that edit it further).
pub fn to_value(conversation: &Conversation, options: WriteOptions) -> Result<Value, Error> {
    serde_json::to_value(ordered::View {
        conversation,
        options,
    })
    .map_err(|e| Error::Write(e.to_string()))
}

/// Decides the format of a parsed body.
///
/// An array is a bare message list. An object with `input` (a string or an array) and no
/// `messages` is an OpenAI Responses body. An object with `messages` is Anthropic when it has a
/// top-level `system`, or a message uses Anthropic-only block types (`tool_use`,
/// `tool_result`, `thinking`, an `image` with a `source`, ...); otherwise OpenAI, which is
/// also the right reading of plain text-only messages in either format.
pub fn detect(value: &Value) -> Result<Format, ParseError> {
    let body = match value {
        Value::Array(_) => return Ok(Format::Bare),
        Value::Object(body) => body,
        other => {
            return Err(ParseError::new(
                "$",
                format!(
                    "expected an OpenAI or Anthropic request body or an array of messages, found {}",
                    kind_of(other)
                ),
            ));
        }
    };
    if !body.contains_key("messages")
        && matches!(body.get("input"), Some(Value::String(_) | Value::Array(_)))
    {
        return Ok(Format::Responses);
    }
    let Some(messages) = body.get("messages") else {
        return Err(ParseError::new(
            "$",
            "expected a request body with a \"messages\" array (OpenAI or Anthropic)",
        ));
    };
    let Value::Array(messages) = messages else {
        return Err(ParseError::new(
            "$.messages",
            format!("expected an array of messages, found {}", kind_of(messages)),
        ));
    };
    if body.contains_key("system") || body.contains_key("anthropic_version") {
        return Ok(Format::Anthropic);
    }
    let anthropic_block = |block: &Value| {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        matches!(
            kind,
            "tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "document"
        ) || (kind == "image" && block.get("source").is_some())
    };
    for message in messages {
        if message.get("tool_calls").is_some() || message.get("tool_call_id").is_some() {
            return Ok(Format::OpenAi);
        }
        if let Some(Value::Array(blocks)) = message.get("content")
            && blocks.iter().any(anthropic_block)
        {
            return Ok(Format::Anthropic);
        }
    }
    Ok(Format::OpenAi)
}

/// "a string", "an object", ... for error messages.
/// Reads every item of a JSON array with `read`, naming each by its index in errors.
pub(crate) fn read_each<T>(
    items: Vec<Value>,
    path: &JsonPath<'_>,
    read: impl Fn(Value, &JsonPath<'_>) -> Result<T, ParseError>,
) -> Result<Vec<T>, ParseError> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        out.push(read(item, &path.index(i))?);
    }
    Ok(out)
}

pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at])
}
