//! The trail on the real transcripts: what today's output plus the trail of what it removed
//! would keep (a preview of phase 2, measured with the same yardstick as
//! `tests/what_compaction_keeps.rs`), within the trail's budget, deterministically.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{Trail, TrailConfig, requests};
use crate::config::{Budget, CascadeConfig};
use crate::conversation::{Block, Conversation, Message, Role};
use crate::engine::ContextManager;
use crate::tool_names::{self, CallActivity};

#[allow(unreachable_pub, dead_code)] // shared with tests/what_compaction_keeps.rs, where they are used
#[path = "../../tests/keeps/mod.rs"]
mod keeps;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/transcripts");

/// Every transcript fixture as a conversation, by name (also read by the error scan's tests).
pub(crate) fn fixtures() -> Vec<(String, Conversation)> {
    let mut names: Vec<String> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(format!("{FIXTURES}/{name}")).unwrap();
            let fixture: Value = serde_json::from_slice(&bytes).unwrap();
            let body = json!({"model": "gpt-4o", "messages": fixture["messages"]});
            let conversation = crate::format::parse(body.to_string().as_bytes(), None).unwrap();
            (name.trim_end_matches(".json").to_owned(), conversation)
        })
        .collect()
}

/// The text of every text block and every tool result of every fixture message, in order
/// (what the extractors' tests compare their functions on).
pub(crate) fn fixture_texts() -> Vec<String> {
    let mut texts = Vec::new();
    for (_, conversation) in fixtures() {
        for message in &conversation.messages {
            for block in message.blocks() {
                match block {
                    Block::ToolResult(result) => texts.push(result.joined_text()),
                    Block::Text(t) => texts.push(t.text.clone()),
                    _ => {}
                }
            }
        }
    }
    texts
}

/// The original messages the output no longer holds: a message stays if its tool calls or
/// its result's call are still there, or (without tool blocks) its text is.
fn removed<'a>(original: &'a Conversation, output: &Conversation) -> Vec<&'a Message> {
    let mut ids: HashSet<&str> = HashSet::new();
    let mut texts: HashSet<String> = HashSet::new();
    for m in &output.messages {
        ids.extend(m.tool_calls().map(|c| c.id.as_str()));
        texts.insert(m.text_content());
    }
    original
        .messages
        .iter()
        .filter(|m| {
            let calls: Vec<&str> = m.tool_calls().map(|c| c.id.as_str()).collect();
            let results: Vec<&str> = m.tool_results().map(|r| r.call_id.as_str()).collect();
            let kept = if !calls.is_empty() {
                calls.iter().all(|id| ids.contains(id))
            } else if !results.is_empty() {
                results.iter().all(|id| ids.contains(id))
            } else {
                texts.contains(&m.text_content())
            };
            !kept
        })
        .collect()
}

/// What phase 2 adds to ②'s placeholders: the `errors: ...` line of every original result
/// the output holds compacted.
fn compacted_error_lines(original: &Conversation, output: &Conversation) -> String {
    let compacted: HashSet<&str> = output
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .filter(|r| r.joined_text().starts_with(crate::markers::COMPACTED))
        .map(|r| r.call_id.as_str())
        .collect();
    let calls: std::collections::HashMap<&str, &crate::conversation::ToolCall> = original
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mut lines = String::new();
    for message in &original.messages {
        for result in message.tool_results() {
            if !compacted.contains(result.call_id.as_str()) {
                continue;
            }
            let call = calls.get(result.call_id.as_str()).copied();
            if let Some(line) = Trail::lines_for_errors(result, call, message.is_error()) {
                lines.push_str(&line);
                lines.push('\n');
            }
        }
    }
    lines
}

#[test]
fn the_trail_completes_what_a_compaction_keeps() {
    let manager = ContextManager::new(CascadeConfig::default());
    let config = TrailConfig::default();
    let mut totals = [keeps::Kept::default(), keeps::Kept::default()];
    for (name, original) in fixtures() {
        let expected = keeps::expected(&original.messages);
        let estimate = manager.estimate(&original);
        for (i, percent) in [10u64, 5].into_iter().enumerate() {
            let budget = Budget::new(estimate * percent / 100, 0);
            let mut output = original.clone();
            pollster::block_on(manager.compact_with_summary(&mut output, budget));
            let gone = removed(&original, &output);
            let trail = Trail::extract(gone.iter().copied(), &output.messages, &config);
            let estimator = manager.estimator("gpt-4o");
            let limit = config.budget(budget.effective());
            let text = trail.render(limit, &estimator);
            let cost = estimator.text_tokens(&text);
            assert!(cost <= limit, "{name}: {cost} > {limit}");
            let again = Trail::extract(gone.iter().copied(), &output.messages, &config);
            assert_eq!(
                again.render(limit, &estimator),
                text,
                "{name}: deterministic"
            );
            let all = format!(
                "{}\n{text}\n{}",
                keeps::output_text(&output),
                compacted_error_lines(&original, &output)
            );
            let kept = keeps::kept(&expected, &all);
            totals[i].add(kept);
            println!(
                "{name} {percent}%: {} removed, trail {cost}/{limit} tokens; paths {} errors {} \
                 commands {} requests {}",
                gone.len(),
                keeps::share(kept.paths),
                keeps::share(kept.errors),
                keeps::share(kept.commands),
                keeps::share(kept.requests),
            );
        }
    }
    for (percent, total) in [10, 5].iter().zip(totals) {
        println!(
            "all {percent}%: paths {} errors {} commands {} requests {}",
            keeps::share(total.paths),
            keeps::share(total.errors),
            keeps::share(total.commands),
            keeps::share(total.requests),
        );
    }
    // Whatever the output lost, the trail brings every user request back.
    assert_eq!(totals[0].requests.0, totals[0].requests.1);
}

#[test]
fn a_whole_fixture_history_gives_a_trail_that_parses_back() {
    let estimator = crate::estimate::Estimator::default();
    for (name, original) in fixtures() {
        let trail = Trail::extract(&original.messages, &[], &TrailConfig::default());
        assert!(
            !trail.files.is_empty() && !trail.requests.is_empty(),
            "{name}"
        );
        let text = trail.render(u64::MAX, &estimator);
        let mut expected = trail.clone();
        expected.runs.clear();
        let mut parsed = Trail::parse(&text);
        // The tree writes a directory's files together: the same files, grouped.
        for files in [&mut parsed.files, &mut expected.files] {
            files.sort_by(|a, b| a.path.cmp(&b.path));
        }
        assert_eq!(parsed.files, expected.files, "{name}");
        assert_eq!(parsed.commands, expected.commands, "{name}");
        assert_eq!(parsed, expected, "{name}");
        let first = original.messages.iter().find(|m| m.role() == Role::User);
        assert!(first.is_some_and(|m| !m.blocks().iter().all(|b| !matches!(b, Block::Text(_)))));
    }
}

/// The share of tool-result tokens that are stale reads: (stale reads, stale tokens, all
/// tool-result tokens). A compacted result counts as its placeholder.
fn stale_share(conversation: &Conversation, name: &str) -> (usize, u64, u64) {
    let estimator = crate::estimate::Estimator::default();
    let stale = super::stale_reads(&conversation.messages);
    assert_eq!(stale, super::stale_reads(&conversation.messages), "{name}");
    let tokens = |r: &crate::conversation::ToolResult| {
        estimator.tokens_of(&crate::estimate::ClassCounts::of_blocks(&r.content))
    };
    let mut stale_tokens = 0;
    for read in &stale {
        // The superseding call comes after the read's result.
        assert!(read.superseded_by.message > read.message, "{name}");
        let message = &conversation.messages[read.message];
        let result = message.tool_results().find(|r| r.call_id == read.call_id);
        assert!(result.is_some(), "{name}");
        stale_tokens += result.map_or(0, tokens);
    }
    let result_tokens: u64 = (conversation.messages.iter())
        .flat_map(|m| m.tool_results())
        .map(tokens)
        .sum();
    (stale.len(), stale_tokens, result_tokens)
}

/// How much of the tool output sent is stale, before ② and after it (issue 12): the
/// history as it is, then compacted by `compact` with E set so that it stands at 80% of E
/// (② fires, from 0.75·E down to 0.6·E; ③ does not). Printed with `--nocapture`.
#[test]
fn stale_reads_of_the_fixtures() {
    let manager = ContextManager::new(CascadeConfig::default());
    println!("| fixture | stale reads | stale share before ② | after ② |");
    println!("|---|---|---|---|");
    for (name, original) in fixtures() {
        let (reads, stale, all) = stale_share(&original, &name);
        let budget = Budget::new(manager.estimate(&original) * 100 / 80, 0);
        let mut output = original.clone();
        manager.compact(&mut output, budget);
        let (_, stale_after, all_after) = stale_share(&output, &name);
        let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
        println!(
            "| {name} | {reads} | {stale} of {all} ({:.0}%) | {stale_after} of {all_after} ({:.0}%) |",
            pct(stale, all),
            pct(stale_after, all_after)
        );
        // ② takes the stale reads first: whatever it compacted, they went before the rest.
        assert!(stale_after <= stale, "{name}");
    }
}
