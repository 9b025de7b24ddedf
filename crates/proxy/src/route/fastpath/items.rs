//! Responses input items gathered into the messages the parser reads them as, without
//! parsing the body whole.
//!
//! A Responses message is not one element of a list: consecutive model-side items
//! (reasoning, calls, assistant messages) are one assistant message, and consecutive user
//! items of `"type": "message"` are one user message (`context_cascade::format`, Responses).
//! The exact count of a message has a per-message overhead, so the fast path must count
//! the same messages as the slow path: it learns each item's kind once (the item parsed
//! alone, memoized by its bytes), groups the items by the parser's rule, and parses a
//! group only the first time it sees it. A group the parser would read as more than one
//! message declines the request (see [`super::FastPath::facts`]).

use std::borrow::Cow;
use std::ops::Range;

use context_cascade::estimate::Estimator;
use context_cascade::format::parse_value;
use context_cascade::{CascadeConfig, Format, MessageId, Role};
use serde_json::Value;

use super::Facts;

/// How one input item joins the items around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A message of its own: system or developer input, a tool output.
    Alone,
    /// A model-side item: joins the assistant items next to it.
    Assistant,
    /// A user item; `typed` when it says `"type": "message"` (only those join each other).
    User { typed: bool },
}

/// The kind of one item, read as the parser reads it alone. `None` when it does not read.
pub(super) fn kind_of(raw: &str) -> Option<Kind> {
    let item: Value = serde_json::from_str(raw).ok()?;
    let typed = item.get("type").and_then(Value::as_str) == Some("message");
    let parsed = parse_value(
        serde_json::json!({ "input": [item] }),
        Some(Format::Responses),
    )
    .ok()?;
    match parsed.messages.as_slice() {
        [message] => Some(match message.role() {
            Role::User => Kind::User { typed },
            Role::Assistant => Kind::Assistant,
            _ => Kind::Alone,
        }),
        _ => None,
    }
}

/// The items of each message, in order, by the parser's rule.
pub(super) fn groups(kinds: &[Kind]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut previous: Option<Kind> = None;
    for (i, &kind) in kinds.iter().enumerate() {
        let joins = matches!(
            (previous, kind),
            (Some(Kind::Assistant), Kind::Assistant)
                | (Some(Kind::User { typed: true }), Kind::User { typed: true })
        );
        match out.last_mut() {
            Some(range) if joins => range.end = i + 1,
            _ => out.push(i..i + 1),
        }
        previous = Some(kind);
    }
    out
}

/// The memo key of a group: the identities of its items, in order.
pub(super) fn group_id(ids: &[MessageId]) -> MessageId {
    let bytes: Vec<u8> = ids
        .iter()
        .flat_map(|id| id.as_u128().to_le_bytes())
        .collect();
    MessageId::of_bytes(&bytes)
}

/// A group's items as one JSON array (parsed only when its facts are not memoized).
pub(super) fn joined(items: &[&str]) -> String {
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push(']');
    out
}

impl super::FastPath {
    /// The facts of a Responses body's messages, one per group of items; `None` when an
    /// item or a group does not read as the slow path would read it.
    pub(super) fn item_facts(
        &self,
        (items, ids): (&[&str], &[MessageId]),
        config: &CascadeConfig,
        estimator: &Estimator,
    ) -> Option<Vec<Facts>> {
        let kinds = (items.iter().zip(ids))
            .map(|(raw, id)| self.kind(raw, *id))
            .collect::<Option<Vec<Kind>>>()?;
        (groups(&kinds).into_iter())
            .map(|range| {
                let key = (Format::Responses, group_id(ids.get(range.clone())?));
                let json = || Cow::Owned(joined(&items[range]));
                self.facts_of(key, json, config, estimator)
            })
            .collect()
    }

    /// One item's kind, from the memo or by parsing it alone.
    fn kind(&self, raw: &str, id: MessageId) -> Option<Kind> {
        let known = (self.kinds.lock().unwrap_or_else(|p| p.into_inner()))
            .get(&id)
            .copied();
        if known.is_some() {
            return known;
        }
        let kind = kind_of(raw)?;
        let mut memo = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        if memo.len() >= super::FACTS_CAPACITY {
            memo.clear();
        }
        memo.insert(id, kind);
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    fn kinds(items: &[&str]) -> Vec<Kind> {
        (items.iter()).map(|i| kind_of(i).unwrap()).collect()
    }

    /// The grouping is the parser's: as many groups as the whole body reads as messages,
    /// each group parsing alone as one message.
    #[test]
    fn items_group_as_the_parser_reads_them() {
        let items = [
            r#"{"type":"message","role":"developer","content":"rules"}"#,
            r#"{"type":"message","role":"user","content":"AGENTS.md"}"#,
            r#"{"type":"message","role":"user","content":"the task"}"#,
            r#"{"type":"reasoning","summary":[]}"#,
            r#"{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"}"#,
            r#"{"type":"function_call_output","call_id":"c1","output":"ok"}"#,
            r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}"#,
            r#"{"role":"user","content":"untyped"}"#,
            r#"{"type":"message","role":"user","content":"typed after untyped"}"#,
        ];
        let groups = groups(&kinds(&items));
        let ranges: Vec<(usize, usize)> = groups.iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(
            ranges,
            [(0, 1), (1, 3), (3, 5), (5, 6), (6, 7), (7, 8), (8, 9)]
        );
        let all = format!("[{}]", items.join(","));
        let whole = context_cascade::format::parse(
            format!(r#"{{"input":{all}}}"#).as_bytes(),
            Some(Format::Responses),
        )
        .unwrap();
        assert_eq!(whole.messages.len(), groups.len());
        for (range, message) in groups.iter().zip(&whole.messages) {
            let body = format!(r#"{{"input":{}}}"#, joined(&items[range.clone()]));
            let alone =
                context_cascade::format::parse(body.as_bytes(), Some(Format::Responses)).unwrap();
            assert_eq!(alone.messages.len(), 1);
            assert_eq!(MessageId::of(&alone.messages[0]), MessageId::of(message));
        }
    }
}
