//! Anthropic alternation: the cascade's notices and summaries on the wire.
//!
//! Inside [`Conversation`](crate::conversation::Conversation) a notice or summary is its own
//! user message, which is what the strategies find, fold and replace. Anthropic wants user
//! and assistant turns to alternate, so the writer merges such a message into the adjacent
//! user message as an extra text block, and the reader splits a user message at every text
//! block that starts with a cascade marker, so that the engine finds its messages again and
//! a second compaction through the wire changes nothing.
//!
//! Who joins whom is decided from what the reader leaves behind, so that reading then
//! writing is the identity: the first piece of a split message keeps the message's keys, the
//! other pieces have none; a notice the engine wrote has no keys and its text block none
//! either (a block read from the wire always keeps its `type`).

use std::ops::Range;

use serde_json::Map;

use crate::conversation::{Block, Message, Role, Shape};
use crate::markers::is_cascade_notice;

/// Whether a block is a text block written by the cascade (as far as its text goes).
fn is_marker_block(block: &Block) -> bool {
    matches!(block, Block::Text(t) if is_cascade_notice(&t.text))
}

/// A notice or summary the engine has just written: a user message with one bare text
/// block that starts with a marker, and no wire keys.
fn is_fresh_notice(message: &Message) -> bool {
    message.role() != Role::Assistant
        && message.fields().is_empty()
        && matches!(message.blocks(), [Block::Text(t)] if t.fields.is_empty() && is_cascade_notice(&t.text))
}

/// Message keys besides `role` and `content` (and `_pin` when pins are stripped): a message
/// that has some keeps its own turn rather than lose them.
fn has_own_keys(message: &Message, strip_pins: bool) -> bool {
    message
        .fields()
        .keys()
        .any(|k| k != "role" && k != "content" && !(strip_pins && k == "_pin"))
}

/// Splits user messages read from the wire at their marker blocks (see the module docs).
/// Runs of other blocks stay together; a message with a single piece is left as it is.
pub(super) fn split_markers(messages: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for mut message in messages {
        let splittable = message.role() == Role::User
            && message.shape() == Shape::Parts
            && message.blocks().len() > 1
            && message.blocks().iter().any(is_marker_block);
        if !splittable {
            out.push(message);
            continue;
        }
        let blocks = std::mem::take(message.blocks_mut());
        let mut pieces: Vec<Vec<Block>> = Vec::new();
        for block in blocks {
            let marker = is_marker_block(&block);
            match pieces.last_mut() {
                Some(last) if !marker && !last.iter().any(is_marker_block) => last.push(block),
                _ => pieces.push(vec![block]),
            }
        }
        if pieces.len() == 1 {
            message.blocks_mut().extend(pieces.into_iter().flatten());
            out.push(message);
            continue;
        }
        let mut fields = Some(message.fields().clone());
        for blocks in pieces {
            let fields = fields.take().unwrap_or_else(Map::new);
            out.push(Message::new(Role::User, blocks, Shape::Parts, fields));
        }
    }
    out
}

/// The wire messages of an Anthropic body: ranges of `messages` (system excluded) written
/// as one message each. A notice the engine wrote joins the user message before it, or
/// else the one after it; pieces the reader split join the piece before them. Other
/// consecutive user messages stay as they are: a request is not ours to restructure.
pub(super) fn wire_groups(messages: &[&Message], strip_pins: bool) -> Vec<Range<usize>> {
    let is_user = |m: &Message| m.role() == Role::User;
    let mut groups = Vec::new();
    let mut start = 0;
    while start < messages.len() {
        let mut end = start + 1;
        let mut anchored = !messages[start].fields().is_empty();
        let has_marker = |m: &Message| m.blocks().iter().any(is_marker_block);
        let mut marked = has_marker(messages[start]);
        while end < messages.len() && is_user(messages[start]) && is_user(messages[end]) {
            let (previous, next) = (messages[end - 1], messages[end]);
            let joins = if is_fresh_notice(next) {
                true
            } else if is_fresh_notice(previous) {
                // A notice merges into the next message; a second message with keys of
                // its own would lose them, so it keeps its turn.
                !(anchored && has_own_keys(next, strip_pins))
            } else {
                // A piece the reader split off: no keys, and a marker on its side of the
                // split (two messages without keys and without markers stay two turns).
                next.fields().is_empty() && (marked || has_marker(next))
            };
            if !joins {
                break;
            }
            anchored |= !next.fields().is_empty();
            marked |= has_marker(next);
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}
