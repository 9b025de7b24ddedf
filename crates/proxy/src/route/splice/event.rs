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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_with_their_name_and_json() {
        let event =
            Event::parse(b"event: message_stop\ndata: {\"type\":\"message_stop\"}").unwrap();
        assert_eq!(event.name.as_deref(), Some("message_stop"));
        assert_eq!(event.kind(), "message_stop");
        let done = Event::parse(b"data: [DONE]").unwrap();
        assert_eq!((done.data.as_str(), done.json.is_none()), ("[DONE]", true));
        assert_eq!(Event::parse(b": keep-alive"), None);
        let split = Event::parse(b"data: {\"a\":\ndata: 1}").unwrap();
        assert_eq!(split.json, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn blocks_end_at_a_blank_line_of_either_style() {
        assert_eq!(
            split_first(b"data: 1\n\ndata: 2"),
            Some((&b"data: 1"[..], 9))
        );
        assert_eq!(
            split_first(b"data: 1\r\n\r\nx"),
            Some((&b"data: 1"[..], 11))
        );
        assert_eq!(split_first(b"data: 1\ndata"), None);
    }

    #[test]
    fn a_written_event_reads_back_the_same() {
        let mut out = Vec::new();
        write_json(Some("ping"), &serde_json::json!({"type": "ping"}), &mut out);
        assert_eq!(out, b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
        let (block, _) = split_first(&out).unwrap();
        let event = Event::parse(block).unwrap();
        let mut again = Vec::new();
        event.write(&mut again);
        assert_eq!(again, out);
    }
}
