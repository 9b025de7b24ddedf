//! Prefix comparison: how much of a request is the previous one, unchanged and in order.
//!
//! A provider's prompt cache serves a request only up to the first part that differs from
//! what it saw before, so "does this request extend the last one?" and "where did it start
//! to differ?" are asked by the replay (prefix stability, tokens re-billed), by a report
//! (the first message the cascade changed) and by the proxy. They are answered here, once;
//! [`crate::replay`] re-exports them.

use crate::conversation::Conversation;

/// Whether a request whose parts are `current` extends the one whose parts are `previous`:
/// `previous`, unchanged and in order, begins `current`.
pub fn extends<T: PartialEq>(previous: &[T], current: &[T]) -> bool {
    current.starts_with(previous)
}

/// Whether `current` extends `previous` as a request: the same fields besides the
/// messages, and the previous messages, unchanged and in order, at the start.
pub fn conversation_extends(previous: &Conversation, current: &Conversation) -> bool {
    previous.format == current.format
        && previous.envelope == current.envelope
        && extends(&previous.messages, &current.messages)
}

/// How many messages at the start of `current` are those of `previous`, equal and in
/// order: the prefix a provider's cache can still serve. 0 when the fields besides the
/// messages differ (they come before the messages on the wire).
pub fn common_prefix(previous: &Conversation, current: &Conversation) -> usize {
    if previous.format != current.format || previous.envelope != current.envelope {
        return 0;
    }
    matching_prefix(&previous.messages, &current.messages)
}

/// How many parts at the start of `current` equal those of `previous`, in order.
pub fn matching_prefix<T: PartialEq>(previous: &[T], current: &[T]) -> usize {
    (previous.iter())
        .zip(current)
        .take_while(|(a, b)| a == b)
        .count()
}
