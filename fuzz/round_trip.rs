//! The round-trip property shared by the two parse targets.

use context_cascade::Format;
use context_cascade::format::{self, WriteOptions};

/// Parses `data` as `format`; when it parses, writing it back must give the same JSON, and
/// parsing and writing that again the same bytes.
pub fn check(data: &[u8], format: Format) {
    let Ok(conversation) = format::parse(data, Some(format)) else {
        return;
    };
    let written = format::to_vec(&conversation, WriteOptions::default())
        .expect("a parsed conversation must write");
    // `parse` accepts a UTF-8 byte order mark (a file saved by some editors); JSON does not.
    let json = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    let input: serde_json::Value = serde_json::from_slice(json).expect("it parsed");
    let output: serde_json::Value = serde_json::from_slice(&written).expect("valid JSON out");
    assert_eq!(input, output, "the round trip changed the JSON");
    let again = format::parse(&written, Some(format)).expect("our own output must parse");
    let rewritten = format::to_vec(&again, WriteOptions::default()).expect("writes");
    assert_eq!(written, rewritten, "a second round trip changed the bytes");
}
