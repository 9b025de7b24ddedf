//! What a compaction keeps, per fixture (issue 12): compacted to 10% and to 5% of its
//! estimate by `compact_with_summary` (offline summarizer), the share of tool-argument
//! paths, error identifiers, commands and user requests still present in the output; beside
//! it, Claude Code's own summaries in the fixtures (`meta.compactions`) against the history
//! each replaced. Run with `--nocapture` to see the table.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
mod keeps;
/// Which user messages a harness wrote: the trail's own definition.
#[path = "../src/trail/requests.rs"]
#[allow(dead_code)]
mod requests;
/// `requests.rs` names `crate::markers`.
mod markers {
    pub use context_cascade::{SUMMARY_PREFIX, is_cascade_notice};
}

use context_cascade::tool_names::{self, CallActivity};
use context_cascade::{
    Block, Budget, CascadeConfig, ContextManager, Conversation, Message, Role, format,
};
use keeps::{Kept, share};
use serde_json::Value;

fn parse(body: &Value) -> Conversation {
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

fn row(name: &str, what: &str, tokens: &str, kept: Kept) -> String {
    format!(
        "| {name} | {what} | {tokens} | {} | {} | {} | {} |",
        share(kept.paths),
        share(kept.errors),
        share(kept.commands),
        share(kept.requests)
    )
}

#[test]
fn what_compaction_keeps_on_every_fixture() {
    let manager = ContextManager::new(CascadeConfig::default());
    let mut lines = vec![
        "| fixture | compaction | tokens | paths | errors | commands | requests |".to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    let mut totals = [Kept::default(), Kept::default()];
    let mut claude_total = Kept::default();
    for (name, fixture) in common::transcripts() {
        let original =
            parse(&serde_json::json!({"model": "gpt-4o", "messages": fixture["messages"]}));
        let expected = keeps::expected(&original.messages);
        let estimate = manager.estimate(&original);
        for (i, percent) in [10u64, 5].into_iter().enumerate() {
            let budget = Budget::new(estimate * percent / 100, 0);
            let mut output = original.clone();
            let report = pollster::block_on(manager.compact_with_summary(&mut output, budget));
            let text = keeps::output_text(&output);
            let kept = keeps::kept(&expected, &text);
            for (k, total) in [kept.paths, kept.errors, kept.commands, kept.requests] {
                assert!(k <= total, "{name}");
            }
            // Deterministic: the same input and budget keep the same.
            let mut again = original.clone();
            pollster::block_on(manager.compact_with_summary(&mut again, budget));
            assert_eq!(
                keeps::kept(&expected, &keeps::output_text(&again)),
                kept,
                "{name}"
            );
            totals[i].add(kept);
            let tokens = format!("{} → {}", report.tokens_before, report.tokens_after);
            lines.push(row(
                &name,
                &format!("{percent}% ({})", report.summary_line()),
                &tokens,
                kept,
            ));
        }
        // Claude Code's own summaries, each against the history it replaced.
        let compactions = fixture["meta"]["compactions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut from = 0;
        for compaction in compactions {
            let Some(at) = compaction["message_index"].as_u64().map(|i| i as usize) else {
                continue;
            };
            let replaced = keeps::expected(&original.messages[from..at]);
            let summary = original.messages[at].text_content();
            let kept = keeps::kept(&replaced, &summary);
            claude_total.add(kept);
            let tokens = format!("summary of messages {from}..{at}");
            lines.push(row(&name, "Claude Code's own", &tokens, kept));
            from = at + 1;
        }
    }
    lines.push(row("**all**", "10%", "", totals[0]));
    lines.push(row("**all**", "5%", "", totals[1]));
    lines.push(row("**all**", "Claude Code's own", "", claude_total));
    println!("{}", lines.join("\n"));
    assert!(totals[0].paths.1 > 0 && totals[0].requests.1 > 0);
}
