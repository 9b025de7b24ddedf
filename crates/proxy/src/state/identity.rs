//! Which messages a request holds, by identity: what the sticky prefix compares to decide
//! that a request starts with the messages it saw before. The identity is the core's
//! [`MessageId`] (one hash for everything that compares messages), so that what is stored
//! and what is computed on the next request agree.
//!
//! For Chat Completions and Anthropic bodies a message is one element of `messages` (and
//! Anthropic's top-level `system` is message 0, as the parser reads it): its identity is
//! [`MessageId::of_bytes`] over its bytes in the body, found without building values. A
//! Responses body groups several `input` items into one message (consecutive user items, a
//! run of model-side items), so its messages' identities are [`MessageId::of`] the parsed
//! messages.

use context_cascade::format::parse;
use context_cascade::{Format, MessageId};
use serde_json::Value;
use serde_json::value::RawValue;

/// The identity of one message written as JSON.
pub(crate) fn value_id(value: &Value) -> MessageId {
    MessageId::of_bytes(&serde_json::to_vec(value).unwrap_or_default())
}

/// The body's messages as the client wrote them, without building values.
#[derive(serde::Deserialize)]
struct RawBody<'a> {
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
}

/// The identities of a request body's messages, one per message of the parsed conversation.
/// `None` when the body does not read as a conversation of `format`.
pub(crate) fn message_ids(bytes: &[u8], format: Format) -> Option<Vec<MessageId>> {
    if format == Format::Responses {
        let conversation = parse(bytes, Some(format)).ok()?;
        return Some(conversation.messages.iter().map(MessageId::of).collect());
    }
    // One scan of the body and one hash pass over each message's bytes: no re-serialization.
    let body: RawBody<'_> = serde_json::from_slice(bytes).ok()?;
    let id = |raw: &RawValue| MessageId::of_bytes(raw.get().as_bytes());
    let mut out = Vec::new();
    if format == Format::Anthropic
        && let Some(system) = body.system
    {
        out.push(id(system));
    }
    out.extend(body.messages?.into_iter().map(id));
    Some(out)
}

/// The identity of the parsed conversation's message `index`, read from the body (Anthropic's
/// `system` is message 0 when present). `None` for a Responses body (the memory injection,
/// which asks, does not edit those).
pub(crate) fn id_at(body: &Value, format: Format, index: usize) -> Option<MessageId> {
    if format == Format::Responses {
        return None;
    }
    let system = (format == Format::Anthropic)
        .then(|| body.get("system"))
        .flatten();
    match (system, index) {
        (Some(system), 0) => Some(value_id(system)),
        (Some(_), i) => body.get("messages")?.get(i - 1).map(value_id),
        (None, i) => body.get("messages")?.get(i).map(value_id),
    }
}

/// A change the memory injection made to a request's messages, already identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edit {
    /// The index in the parsed conversation's messages.
    pub index: usize,
    /// A new message was inserted there (otherwise the message there changed).
    pub inserted: bool,
    /// The identity of the message now at `index`.
    pub hash: MessageId,
}

/// The message identities of a request, computed on first use: a conversation the cascade
/// never changed has nothing to stitch or record, and skips hashing its body.
pub(crate) struct LazyHashes<'a> {
    bytes: &'a [u8],
    format: Format,
    edit: Option<Edit>,
    usable: bool,
    computed: Option<Option<Vec<MessageId>>>,
}

impl<'a> LazyHashes<'a> {
    /// Identities of the messages in `bytes`, with `edit` applied.
    pub(crate) fn new(bytes: &'a [u8], format: Format, edit: Option<Edit>) -> Self {
        LazyHashes {
            bytes,
            format,
            edit,
            usable: true,
            computed: None,
        }
    }

    /// No identities: the request cannot be matched (its messages were changed in a way
    /// the identities cannot follow).
    pub(crate) fn unavailable(bytes: &'a [u8], format: Format) -> Self {
        LazyHashes {
            usable: false,
            ..LazyHashes::new(bytes, format, None)
        }
    }

    /// The memory injection applied on top of the client's messages.
    pub(crate) fn edit(&self) -> Option<Edit> {
        self.edit
    }

    /// The identities, computed now if they were not yet.
    pub(crate) fn get(&mut self) -> Option<&[MessageId]> {
        if self.computed.is_none() {
            self.computed = Some(self.compute());
        }
        self.computed.as_ref().and_then(|h| h.as_deref())
    }

    fn compute(&self) -> Option<Vec<MessageId>> {
        if !self.usable {
            return None;
        }
        let mut ids = message_ids(self.bytes, self.format)?;
        if let Some(edit) = self.edit {
            if edit.inserted {
                if edit.index > ids.len() {
                    return None;
                }
                ids.insert(edit.index, edit.hash);
            } else {
                *ids.get_mut(edit.index)? = edit.hash;
            }
        }
        Some(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::format::parse_value;
    use serde_json::json;

    #[test]
    fn ids_align_with_parsed_messages_in_every_format() {
        let text =
            br#"{"model": "m", "system": "s", "messages": [{"role": "user", "content": "a"}]}"#;
        let ids = message_ids(text, Format::Anthropic).unwrap();
        let body: Value = serde_json::from_slice(text).unwrap();
        let conversation = parse_value(body.clone(), Some(Format::Anthropic)).unwrap();
        assert_eq!(ids.len(), conversation.messages.len());
        assert_eq!(
            id_at(&body, Format::Anthropic, 0),
            Some(value_id(&json!("s")))
        );
        assert!(id_at(&body, Format::Anthropic, 2).is_none());
        assert_eq!(message_ids(b"[1]", Format::OpenAi), None);

        // Two user items of one turn are one message; the call and its output two more.
        let responses = json!({"model": "m", "instructions": "be brief", "input": [
            {"type": "message", "role": "user", "content": "context"},
            {"type": "message", "role": "user", "content": "the task"},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.rs"}]});
        let bytes = serde_json::to_vec(&responses).unwrap();
        let ids = message_ids(&bytes, Format::Responses).unwrap();
        let conversation = parse_value(responses, Some(Format::Responses)).unwrap();
        assert_eq!(ids.len(), conversation.messages.len());
        assert_eq!(ids.len(), 4);
        assert_ne!(ids[1], ids[2]);
    }

    #[test]
    fn edits_follow_the_memory_injection() {
        let bytes = br#"{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}"#;
        let hash = MessageId::of_bytes(b"injected");
        let edit = Edit {
            index: 1,
            inserted: true,
            hash,
        };
        let mut hashes = LazyHashes::new(bytes, Format::OpenAi, Some(edit));
        let got = hashes.get().unwrap().to_vec();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], hash);
        let edit = Edit {
            index: 9,
            inserted: false,
            hash,
        };
        assert!(
            LazyHashes::new(bytes, Format::OpenAi, Some(edit))
                .get()
                .is_none()
        );
        let mut none = LazyHashes::unavailable(bytes, Format::OpenAi);
        assert!(none.get().is_none());
    }
}
