//! The trail's entries point to the handle that holds them (issue 25): every fixture
//! compacted to a tenth of its estimate by `compact_with_summary` with recall on; every
//! trail entry of the output names a handle (`· recall 3f9a1c2b7d40/17`), and a recall of
//! that handle returns content holding the entry's subject (a file's path, a command, an
//! error's name, a request's first words). A session compacted three times keeps the first
//! compaction's handles in its last trail, each still recalling its entry.
//!
//! The trail is read back here with a parser of this file's own (the library's is private),
//! from its documented form: the four headings, `- ` entries, files grouped under
//! `$ROOT` and `dir/{a, b}`.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use context_cascade::recall::{HandleRef, MemoryStore, RecallCall, Scope};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation, Message, format};
use serde_json::Value;

const RECALL: &str = " · recall ";

/// One trail entry that names a handle: what it is about, and where.
#[derive(Debug, Clone)]
struct Entry {
    /// `files`, `commands`, `errors`, `requests`.
    kind: &'static str,
    /// Strings any one of which the recalled content must hold (a command entry is found
    /// by one of its commands or its program).
    subjects: Vec<String>,
    reference: String,
    /// The entry as the trail wrote it.
    item: String,
}

/// The trail entries of `text` (a notice or a summary), and how many entries name no
/// handle.
fn entries(text: &str) -> (Vec<Entry>, usize) {
    let mut out = Vec::new();
    let mut bare = 0;
    let mut kind: Option<&'static str> = None;
    let mut root: Option<String> = None;
    let mut item: Option<String> = None;
    let lines: Vec<&str> = text.lines().chain([""]).collect();
    for line in lines {
        if let (Some(rest), Some(current)) = (line.strip_prefix("  "), item.as_mut()) {
            current.push('\n');
            current.push_str(rest);
            continue;
        }
        if let (Some(k), Some(done)) = (kind, item.take()) {
            match entry(k, &done, root.as_deref()) {
                Some(mut found) => out.append(&mut found),
                None => bare += 1,
            }
        }
        let t = line.trim_end();
        let heading = match t {
            "User requests:" => Some("requests"),
            "Errors:" => Some("errors"),
            "Commands:" => Some("commands"),
            "Files (most recent first):" => Some("files"),
            _ if t.starts_with("Files (most recent first; $ROOT = ") => Some("files"),
            _ => None,
        };
        if heading == Some("files") {
            root = (t.strip_prefix("Files (most recent first; $ROOT = "))
                .and_then(|r| r.strip_suffix("):"))
                .map(str::to_owned);
        }
        if heading.is_some() {
            kind = heading;
        } else if let (Some(rest), Some(_)) = (line.strip_prefix("- "), kind) {
            item = Some(rest.to_owned());
        } else {
            kind = None;
        }
    }
    (out, bare)
}

/// The entries one item stands for (a files line names several), `None` without a handle.
fn entry(kind: &'static str, item: &str, root: Option<&str>) -> Option<Vec<Entry>> {
    let (text, reference) = item.rsplit_once(RECALL)?;
    let reference = reference.to_owned();
    let one = |subjects: Vec<String>| {
        vec![Entry {
            kind,
            subjects,
            reference: reference.clone(),
            item: item.to_owned(),
        }]
    };
    Some(match kind {
        "files" => {
            let text = match root {
                Some(root) => text.replace("$ROOT", root),
                None => text.to_owned(),
            };
            let paths: Vec<String> = if let Some((path, _)) = text.rsplit_once(" — ") {
                vec![path.to_owned()]
            } else if let (Some(open), Some(body)) = (text.find("/{"), text.strip_suffix('}')) {
                let prefix = &text[..=open];
                (body[open + 2..].split(", "))
                    .map(|m| format!("{prefix}{}", m.split(' ').next().unwrap()))
                    .collect()
            } else {
                vec![text.split(' ').next().unwrap().to_owned()]
            };
            (paths.into_iter())
                .map(|path| Entry {
                    kind,
                    subjects: vec![path],
                    reference: reference.clone(),
                    item: item.to_owned(),
                })
                .collect()
        }
        "commands" => {
            // `program ×3 (outcome): `a`, `b`` — any command, or the program.
            let mut subjects: Vec<String> = (text.split('`').skip(1).step_by(2))
                .map(|c| c.trim_end_matches('…').to_owned())
                .collect();
            let head = text.split(" ×").next().unwrap();
            let program = head.split(" (").next().unwrap();
            if program.contains(char::is_alphanumeric) {
                subjects.push(program.to_owned());
            } else if subjects.is_empty() {
                // A program the trail could not name (`…`: a first line ending in `&&`)
                // and no command shown: the part must at least hold a call.
                subjects.push("[assistant called ".to_owned());
            }
            one(subjects)
        }
        "errors" => {
            let text = text.trim_end_matches(" — fixed later");
            let text = text.split(" (from `").next().unwrap();
            let text = text.trim_end_matches(" (same)");
            // The error's name: a failing test's name, or what precedes `: `.
            let key = match text.strip_prefix("failing test: ") {
                Some(name) => name,
                None => match text.split_once(": ") {
                    Some((name, _)) if !name.contains(char::is_whitespace) => name,
                    _ => text,
                },
            };
            one(vec![key.to_owned()])
        }
        _ => {
            let first = text.lines().next().unwrap();
            one(vec![
                first.chars().take(60).collect::<String>().trim().to_owned(),
            ])
        }
    })
}

/// The trail entries of every message of `conversation`, and how many name no handle.
fn trail_entries(conversation: &Conversation) -> (Vec<Entry>, usize) {
    let mut all = Vec::new();
    let mut bare = 0;
    for message in &conversation.messages {
        let (mut found, none) = entries(&message.text_content());
        all.append(&mut found);
        bare += none;
    }
    (all, bare)
}

/// Recalls every entry's handle and checks the answer holds one of its subjects; returns
/// how many entries named one chunk of their removal (`handle/part`).
fn check_recalls(name: &str, manager: &ContextManager, entries: &[Entry]) -> usize {
    let mut parts = 0;
    for entry in entries {
        let reference: HandleRef = entry.reference.parse().unwrap_or_else(|e| {
            panic!(
                "{name}: {} entry names {:?}: {e}",
                entry.kind, entry.reference
            )
        });
        parts += usize::from(reference.part.is_some());
        let recalled = manager.recall(&RecallCall::Handle(reference)).unwrap();
        assert!(
            !recalled.chunks.is_empty(),
            "{name}: {} entry's handle {} keeps nothing",
            entry.kind,
            entry.reference
        );
        assert!(
            entry
                .subjects
                .iter()
                .any(|s| recalled.text.contains(s.as_str())),
            "{name}: recall {} does not hold the {} entry {:?} ({:?}):\n{}",
            entry.reference,
            entry.kind,
            entry.subjects,
            entry.item,
            recalled.text.chars().take(600).collect::<String>()
        );
    }
    parts
}

fn manager(name: &str) -> ContextManager {
    let store = Arc::new(MemoryStore::default());
    let scope = Scope::new("test", name).unwrap();
    ContextManager::new(CascadeConfig::default()).with_recall(store, scope)
}

#[test]
fn every_trail_entry_recalls_its_subject_on_every_fixture() {
    let mut total = (0, 0);
    for (name, fixture) in common::transcripts() {
        let body = common::openai_body(&fixture);
        let original = format::parse(body.to_string().as_bytes(), None).unwrap();
        let manager = manager(&name);
        let budget = Budget::new(manager.estimate(&original) / 10, 0);
        let mut output = original.clone();
        pollster::block_on(manager.compact_with_summary(&mut output, budget));
        let (entries, bare) = trail_entries(&output);
        // With recall on from the start, every entry comes from a kept removal.
        assert_eq!(bare, 0, "{name}: trail entries without a handle");
        let parts = check_recalls(&name, &manager, &entries);
        println!(
            "{name}: {} entries with a handle, {parts} of them to one part",
            entries.len()
        );
        total = (total.0 + entries.len(), total.1 + parts);
    }
    println!("all: {} entries, {} to one part", total.0, total.1);
    assert!(total.0 > 100, "too few trail entries to say anything");
}

/// The messages of `fixture` from `from` to `to` (a share of its length, in tenths), the
/// tool pairs at the cut left for the repair to handle.
fn slice(fixture: &Value, from: usize, to: usize) -> Vec<Value> {
    let messages = fixture["messages"].as_array().unwrap();
    let n = messages.len();
    messages[n * from / 10..n * to / 10].to_vec()
}

/// The handles the markers of `conversation` carry (`recall handle: X` lines).
fn marker_handles(conversation: &Conversation) -> HashSet<String> {
    let text: String = (conversation.messages.iter())
        .map(Message::text_content)
        .collect::<Vec<_>>()
        .join("\n");
    (text.split("recall handle: ").skip(1))
        .map(|rest| rest.chars().take(12).collect())
        .collect()
}

#[test]
fn handles_survive_a_second_and_a_third_compaction() {
    let (name, fixture) = (common::transcripts().into_iter())
        .find(|(name, _)| name.contains("258c7280-main"))
        .expect("the long Claude Code fixture");
    let manager = manager(&name);
    let mut messages: Vec<Value> = Vec::new();
    let mut first_handles: HashSet<String> = HashSet::new();
    for (round, (from, to)) in [(0, 4), (4, 7), (7, 10)].into_iter().enumerate() {
        messages.extend(slice(&fixture, from, to));
        let body = serde_json::json!({"model": "gpt-4o", "messages": messages});
        let mut conversation = format::parse(body.to_string().as_bytes(), None).unwrap();
        // A quarter of the history's size: room for the trail to list the earlier
        // rounds' entries beside the new ones (at a tenth the newest fill it).
        let budget = Budget::new((manager.estimate(&conversation) / 4).max(8_000), 0);
        pollster::block_on(manager.compact_with_summary(&mut conversation, budget));
        let (entries, bare) = trail_entries(&conversation);
        assert_eq!(bare, 0, "round {}: entries without a handle", round + 1);
        check_recalls(&format!("round {}", round + 1), &manager, &entries);
        let named: HashSet<String> = (entries.iter())
            .map(|e| e.reference.split('/').next().unwrap().to_owned())
            .collect();
        if round == 0 {
            first_handles = marker_handles(&conversation);
            assert!(!first_handles.is_empty(), "no removal in the first round");
        } else {
            // The earlier compactions' entries keep pointing where they did.
            let kept: Vec<&String> = first_handles.intersection(&named).collect();
            println!(
                "round {}: {} entries, {} distinct handles, {} of the first round's",
                round + 1,
                entries.len(),
                named.len(),
                kept.len()
            );
            assert!(
                !kept.is_empty(),
                "round {}: no entry names a handle of the first compaction",
                round + 1
            );
        }
        // The next round continues from what this one sent.
        let written = format::to_vec(&conversation, Default::default()).unwrap();
        let value: Value = serde_json::from_slice(&written).unwrap();
        messages = value["messages"].as_array().unwrap().clone();
    }
}
