//! A sticky session on disk: what went upstream, as decisions over the client's messages.
//!
//! Per message sent upstream, either "the client's message i" (a reference: the client
//! sends it again with every request) or the message the cascade wrote in its place (a
//! summary, a notice, a shortened tool output), which is all a later request needs to
//! re-apply the same compaction. Whole conversations are not kept (SPEC "Proxy state":
//! least data).
//!
//! Encoding: one line of references (`3` for the client's message 3, `-` for the next
//! written message, comma-separated), a newline, then the written messages as a request
//! body of the conversation's format.

use context_cascade::format::{WriteOptions, parse, to_vec};
use context_cascade::{Block, Conversation, Format, Message, Role, is_cascade_notice};

/// Where a message sent upstream came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The client's message at this index (of the request as the cascade saw it).
    Client(usize),
    /// Written by the cascade: the next of the stored messages.
    Written,
}

/// The origins of `sent` against the client's `originals`: each sent message that equals
/// the next unused original (in order: the cascade keeps the order of what it keeps) refers
/// to it; `index` maps an original's position to the index the references use, `None`
/// when that original cannot be referred to.
pub(crate) fn origins(
    sent: &[Message],
    originals: &[Message],
    index: impl Fn(usize) -> Option<usize>,
) -> Vec<Origin> {
    let mut next = 0;
    sent.iter()
        .map(|message| {
            let found = (next..originals.len()).find(|&i| originals[i] == *message);
            match found.and_then(|i| Some((i, index(i)?))) {
                Some((i, at)) => {
                    next = i + 1;
                    Origin::Client(at)
                }
                None => Origin::Written,
            }
        })
        .collect()
}

/// Encodes the decisions for `sent` in `format`; `None` when the written messages cannot be
/// written out.
pub(crate) fn encode(format: Format, sent: &[Message], origins: &[Origin]) -> Option<Vec<u8>> {
    let line = (origins.iter())
        .map(|o| match o {
            Origin::Client(i) => i.to_string(),
            Origin::Written => "-".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",");
    let mut written = Conversation::new(format);
    written.messages = (sent.iter().zip(origins))
        .filter(|(_, o)| **o == Origin::Written)
        .map(|(m, _)| m.clone())
        .collect();
    let body = to_vec(&written, WriteOptions::default()).ok()?;
    // Kept only if it reads back as as many messages (the format could merge some).
    if parse(&body, Some(format)).ok()?.messages.len() != written.messages.len() {
        return None;
    }
    let mut out = line.into_bytes();
    out.push(b'\n');
    out.extend_from_slice(&body);
    Some(out)
}

/// The messages sent upstream, rebuilt from `bytes` and the request's `client` messages;
/// `None` when a reference points past `known` (the messages verified to be the same as
/// when the decisions were made) or the bytes do not decode.
pub(crate) fn decode(
    bytes: &[u8],
    format: Format,
    client: &[Message],
    known: usize,
) -> Option<Vec<Message>> {
    let split = bytes.iter().position(|b| *b == b'\n')?;
    let line = std::str::from_utf8(&bytes[..split]).ok()?;
    let mut written = parse(&bytes[split + 1..], Some(format))
        .ok()?
        .messages
        .into_iter();
    let mut out = Vec::new();
    for token in line.split(',').filter(|t| !t.is_empty()) {
        if token == "-" {
            out.push(as_written(written.next()?));
        } else {
            let i: usize = token.parse().ok()?;
            if i >= known {
                return None;
            }
            out.push(client.get(i)?.clone());
        }
    }
    written.next().is_none().then_some(out)
}

/// A message the cascade wrote, as it wrote it: a notice or summary read back from a body
/// (which keeps the places of its `role` and `content` keys) is a fresh one again (one text
/// block, no wire keys), which the Anthropic writer merges into
/// the adjacent user message as it did when the decision was made. Read back as it came
/// from the wire it would keep a turn of its own, and the upstream request would change.
fn as_written(message: Message) -> Message {
    match message.blocks() {
        [Block::Text(block)]
            if message.role() == Role::User
                && (message.fields().keys()).all(|k| k == "role" || k == "content")
                && is_cascade_notice(&block.text) =>
        {
            Message::text(Role::User, block.text.clone())
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_written_messages_round_trip() {
        let originals = vec![
            Message::text(Role::System, "sys"),
            Message::text(Role::User, "a"),
            Message::text(Role::Assistant, "b"),
            Message::text(Role::User, "c"),
        ];
        let sent = vec![
            originals[0].clone(),
            Message::text(Role::User, "[summary of a and b]"),
            originals[3].clone(),
        ];
        let origins = origins(&sent, &originals, Some);
        assert_eq!(
            origins,
            vec![Origin::Client(0), Origin::Written, Origin::Client(3)]
        );
        let bytes = encode(Format::OpenAi, &sent, &origins).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("sys") && text.contains("summary"), "{text}");
        let decoded = decode(&bytes, Format::OpenAi, &originals, 4).unwrap();
        let text = |messages: Vec<Message>| -> Vec<String> {
            messages.iter().map(Message::text_content).collect()
        };
        assert_eq!(text(decoded), text(sent));
        assert_eq!(decode(&bytes, Format::OpenAi, &originals, 2), None);
    }
}
