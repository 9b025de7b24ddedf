//! A request that carries a provider's compaction: the newest compaction block or item
//! starts the history the provider reads (see `context_cascade::format::compaction`). The
//! messages it supersedes are held out of the cascade, neither counted nor touched, and put
//! back in their place, byte for byte, in every request sent upstream; the message holding
//! the compaction is pinned, so that no strategy removes it.

use context_cascade::format::compaction::superseded;
use context_cascade::{ContextManager, Conversation, Message};

/// The messages a provider's compaction supersedes, held out of the cascade.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// Where they go back: after the leading system messages.
    at: usize,
    messages: Vec<Message>,
}

impl Held {
    /// Takes the superseded messages out of `conversation` and pins the message that holds
    /// the newest compaction. `None` (and `conversation` unchanged) when it carries none.
    pub(crate) fn split(conversation: &mut Conversation) -> Option<Held> {
        let range = superseded(conversation)?;
        let at = range.start;
        let messages: Vec<Message> = conversation.messages.drain(range).collect();
        if let Some(compaction) = conversation.messages.get_mut(at) {
            compaction.pin();
        }
        Some(Held { at, messages })
    }

    /// `live` (what the cascade made of the rest) with the held messages back in place.
    pub(crate) fn join(&self, live: &Conversation) -> Conversation {
        let mut whole = Conversation {
            format: live.format,
            messages: Vec::with_capacity(live.messages.len() + self.messages.len()),
            envelope: live.envelope.clone(),
        };
        let at = self.at.min(live.messages.len());
        whole.messages.extend_from_slice(&live.messages[..at]);
        whole.messages.extend(self.messages.iter().cloned());
        whole.messages.extend_from_slice(&live.messages[at..]);
        whole
    }
}

/// `conversation` whole, when `held` is `None`, else with the held messages back.
pub(crate) fn whole(held: Option<&Held>, conversation: &Conversation) -> Conversation {
    match held {
        Some(held) => held.join(conversation),
        None => conversation.clone(),
    }
}

/// The engine's estimate of what the client sent, from the history the provider reads:
/// the whole request less the messages a compaction supersedes.
pub(crate) fn client_estimate(manager: &ContextManager, conversation: &Conversation) -> u64 {
    let whole = manager.estimate(conversation);
    let Some(range) = superseded(conversation).filter(|r| !r.is_empty()) else {
        return whole;
    };
    let superseded = (manager.estimate_from(conversation, range.start))
        .saturating_sub(manager.estimate_from(conversation, range.end));
    whole.saturating_sub(superseded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::format::parse;

    #[test]
    fn the_superseded_messages_go_back_in_their_place() {
        let body = br#"{"model":"c","max_tokens":9,"system":"s","messages":[
            {"role":"user","content":"old"},{"role":"assistant","content":"older answer"},
            {"role":"assistant","content":[{"type":"compaction","content":"sum"},{"type":"text","text":"t"}]},
            {"role":"user","content":"new"}]}"#;
        let original = parse(body, None).unwrap();
        let mut live = original.clone();
        let held = Held::split(&mut live).unwrap();
        assert_eq!(
            live.messages.len(),
            3,
            "system, the compaction's message, new"
        );
        assert!(live.messages[1].is_pinned());
        let mut joined = held.join(&live);
        assert_eq!(joined.messages.len(), original.messages.len());
        // The pin is the cascade's own mark: unpinned, the whole is the original.
        let mut expected = original.clone();
        expected.messages[3].pin();
        joined
            .messages
            .iter_mut()
            .zip(&expected.messages)
            .for_each(|(a, b)| {
                assert_eq!(a.text_content(), b.text_content());
            });
        assert_eq!(joined, expected);
        let manager = ContextManager::new(context_cascade::CascadeConfig::default());
        let (client, live) = (
            client_estimate(&manager, &original),
            manager.estimate(&live),
        );
        assert!(client.abs_diff(live) <= 2, "{client} vs {live}");
    }
}
