//! Server-sent events as the splicers read and write them: one event's `event:` name and
//! `data:` payload (parsed when it is JSON).

use serde_json::Value;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// The `event:` line's name, when there was one.
    pub(crate) name: Option<String>,
    /// The `data:` lines, joined.
    pub(crate) data: String,
    /// `data` parsed, when it is JSON (`[DONE]` is not).
    pub(crate) json: Option<Value>,
}

impl Event {
    /// The event in `block` (its lines, without the blank line); `None` for a block with
    /// neither a name nor data (comments, keep-alives).
    pub(crate) fn parse(block: &[u8]) -> Option<Event> {
        let text = String::from_utf8_lossy(block);
        let (mut name, mut data): (Option<String>, Option<String>) = (None, None);
        for line in text.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => name = Some(value.to_owned()),
                "data" => match &mut data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        if name.is_none() && data.is_none() {
            return None;
        }
        let data = data.unwrap_or_default();
        let json = serde_json::from_str(&data).ok();
        Some(Event { name, data, json })
    }

    /// The JSON payload's `type`, else the event's name.
    pub(crate) fn kind(&self) -> &str {
        (self.json.as_ref())
            .and_then(|j| j.get("type"))
            .and_then(Value::as_str)
            .or(self.name.as_deref())
            .unwrap_or("")
    }

    /// Writes the event as it came (its data re-joined).
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        write(self.name.as_deref(), &self.data, out);
    }
}

/// Writes an event named `name` (none: a bare `data:` event) carrying `data` (one line).
pub(crate) fn write(name: Option<&str>, data: &str, out: &mut Vec<u8>) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// Writes an event named `name` carrying `json`.
pub(crate) fn write_json(name: Option<&str>, json: &Value, out: &mut Vec<u8>) {
    write(name, &json.to_string(), out);
}

/// The first complete event of `buffer`: its block and where the rest begins.
pub(crate) fn split_first(buffer: &[u8]) -> Option<(&[u8], usize)> {
    let mut at = 0;
    while at < buffer.len() {
        let rest = &buffer[at..];
        if rest.starts_with(b"\n\n") {
            return Some((&buffer[..at], at + 2));
        }
        if rest.starts_with(b"\r\n\r\n") {
            return Some((&buffer[..at], at + 4));
        }
        at += 1;
    }
    None
}
