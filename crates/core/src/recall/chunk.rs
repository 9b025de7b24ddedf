//! What a removal keeps, and how it is cut into chunks for search.
//!
//! A removal's text is what the removed messages said, in order: each message under a
//! header naming its role (and, for a tool call or result, the tool), tool calls with their
//! arguments, results with their output. Search ranks chunks of it, cut at line ends, so
//! that an answer returns the lines that match and not a whole 50 KB file read.

use super::handle::Handle;
use serde_json::Value;

use crate::conversation::{Block, Message, ToolCall};

/// Characters of a chunk, at most (a line longer than this is cut inside).
pub const CHUNK_CHARS: usize = 1_200;

/// The originals of one removal, under its handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The handle written into the marker that stands where the content was.
    pub handle: Handle,
    /// What was removed, as text (messages under their headers, or a tool result's text).
    pub text: String,
}

impl Removal {
    /// A range of removed messages (③, ④, ⑤).
    pub fn of_messages(messages: &[&Message]) -> Removal {
        let mut text = String::new();
        for message in messages {
            write_message(&mut text, message);
        }
        Removal {
            handle: Handle::of_messages(messages.iter().copied()),
            text,
        }
    }

    /// The chunks of this removal, at most `chunk_chars` characters each, cut at line ends.
    pub fn chunks(&self, chunk_chars: usize) -> Vec<Chunk> {
        let pieces = split_at_lines(&self.text, chunk_chars.max(80));
        let parts = pieces.len() as u32;
        (pieces.into_iter().enumerate())
            .map(|(i, text)| Chunk {
                handle: self.handle,
                part: i as u32 + 1,
                parts,
                text: text.to_owned(),
            })
            .collect()
    }
}

/// One searchable piece of a removal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chunk {
    /// The removal it belongs to.
    pub handle: Handle,
    /// Its place in the removal, from 1.
    pub part: u32,
    /// How many chunks the removal has.
    pub parts: u32,
    /// The text.
    pub text: String,
}

/// Writes one removed message under a header.
fn write_message(text: &mut String, message: &Message) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let role = message.role().as_str();
    for block in message.blocks() {
        match block {
            Block::Text(t) => {
                text.push_str(&format!("[{role}]\n"));
                text.push_str(&t.text);
            }
            Block::ToolCall(call) => text.push_str(&call_text(call)),
            Block::ToolResult(result) => {
                let tool = result.tool_name.as_deref().unwrap_or("tool");
                text.push_str(&format!("[result of {tool}]\n"));
                text.push_str(&result.joined_text());
            }
            Block::Binary(_) => text.push_str(&format!("[{role}: an image or file]")),
            Block::Thinking(_) | Block::Other(_) => continue,
        }
        text.push('\n');
    }
}

/// A tool call as text: its name, then each argument on its own line (`key: value`, a
/// string with its own line breaks), so that a file written by a call is chunked and
/// searched line by line like a file read, not as one line of escaped JSON.
pub(crate) fn call_text(call: &ToolCall) -> String {
    let parsed;
    let arguments = match &call.arguments {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(value) => {
                parsed = value;
                &parsed
            }
            Err(_) => &call.arguments,
        },
        other => other,
    };
    let mut text = format!("[assistant called {}]", call.name);
    match arguments {
        Value::Object(object) => {
            for (key, value) in object {
                match value {
                    Value::String(s) => text.push_str(&format!("\n{key}: {s}")),
                    other => text.push_str(&format!("\n{key}: {other}")),
                }
            }
        }
        Value::String(s) => text.push_str(&format!(" {s}")),
        other => text.push_str(&format!(" {other}")),
    }
    text
}

/// Splits `text` into pieces of at most `limit` characters, at line ends where a line
/// fits, never inside a character.
fn split_at_lines(text: &str, limit: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut chars = 0;
    let mut last_line_end = None;
    for (index, ch) in text.char_indices() {
        if chars == limit {
            let end = last_line_end.filter(|&e| e > start).unwrap_or(index);
            pieces.push(&text[start..end]);
            chars = text[end..index].chars().count();
            start = end;
            last_line_end = None;
        }
        chars += 1;
        if ch == '\n' {
            last_line_end = Some(index + 1);
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces.retain(|p| !p.trim().is_empty());
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Role, Shape, ToolResult};

    #[test]
    fn chunks_end_at_lines_and_hold_every_line() {
        let lines: Vec<String> = (0..300).map(|i| format!("line {i} of the log")).collect();
        let removal = Removal {
            handle: Handle::of_result("test", "1", "x"),
            text: lines.join("\n"),
        };
        let chunks = removal.chunks(200);
        assert!(chunks.len() > 10);
        for chunk in &chunks {
            assert!(chunk.text.chars().count() <= 200);
            assert!(chunk.text.ends_with('\n') || chunk.part == chunk.parts);
        }
        let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(joined, removal.text);
    }

    #[test]
    fn a_long_line_is_cut_inside_but_never_inside_a_character() {
        let removal = Removal {
            handle: Handle::of_result("test", "1", "x"),
            text: "é".repeat(500),
        };
        let chunks = removal.chunks(100);
        assert_eq!(chunks.len(), 5);
        assert!(chunks.iter().all(|c| c.text.chars().count() == 100));
    }

    #[test]
    fn removed_messages_are_written_under_their_headers() {
        let messages = [
            Message::text(Role::User, "run the tests"),
            Message::new(
                Role::Tool,
                vec![Block::ToolResult(ToolResult::text(
                    "1",
                    Some("bash".into()),
                    "3 passed; 1 failed".into(),
                ))],
                Shape::String,
                serde_json::Map::new(),
            ),
        ];
        let removal = Removal::of_messages(&messages.iter().collect::<Vec<_>>());
        assert!(removal.text.contains("[user]\nrun the tests\n"));
        assert!(
            removal
                .text
                .contains("[result of bash]\n3 passed; 1 failed")
        );
    }
}
