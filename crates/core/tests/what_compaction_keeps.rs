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
    Block, Budget, CascadeConfig, ContextManager, Conversation, Message, Report, Role, format,
};
use keeps::{Kept, share};
use serde_json::Value;

fn parse(body: &Value) -> Conversation {
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

fn row(name: &str, what: &str, tokens: &str, kept: Kept, trail: &str) -> String {
    format!(
        "| {name} | {what} | {tokens} | {} | {} | {} | {} | {trail} |",
        share(kept.paths),
        share(kept.errors),
        share(kept.commands),
        share(kept.requests)
    )
}

/// The ways a fixture is compacted: the whole cascade with the trail, `prune` alone (sync
/// `compact`: Layer 1 and ③), and the whole cascade with the trail switched off.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Cascade,
    PruneOnly,
    NoTrail,
    /// The whole cascade with the trail's share of E raised from SPEC's 15% to 20%
    /// (`TrailConfig::max_share`): what the knob buys where the trail's budget is full.
    WideTrail,
}

fn run(way: Way, original: &Conversation, budget: Budget) -> (Conversation, Report) {
    let mut config = CascadeConfig::default();
    if way == Way::NoTrail {
        config.trail.enabled = false;
    }
    if way == Way::WideTrail {
        config.trail.max_share = 0.20;
    }
    let manager = ContextManager::new(config);
    let mut output = original.clone();
    let report = match way {
        Way::PruneOnly => manager.compact(&mut output, budget),
        _ => pollster::block_on(manager.compact_with_summary(&mut output, budget)),
    };
    (output, report)
}

#[test]
fn what_compaction_keeps_on_every_fixture() {
    let manager = ContextManager::new(CascadeConfig::default());
    let mut lines = vec![
        "| fixture | compaction | tokens | paths | errors | commands | requests | trail (tokens, % of E) |".to_owned(),
        "|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    // Totals: cascade 10%, cascade 5%, prune only 10%, trail off 10%, trail at 20% of E
    // at 5%, Claude Code's own.
    let mut totals = [Kept::default(); 6];
    let ways = [
        (Way::Cascade, 10u64, "10%"),
        (Way::Cascade, 5, "5%"),
        (Way::PruneOnly, 10, "10%, prune only"),
        (Way::NoTrail, 10, "10%, trail off"),
        (Way::WideTrail, 5, "5%, trail ≤ 20% of E"),
    ];
    for (name, fixture) in common::transcripts() {
        let original =
            parse(&serde_json::json!({"model": "gpt-4o", "messages": fixture["messages"]}));
        let expected = keeps::expected(&original.messages);
        let estimate = manager.estimate(&original);
        for (i, (way, percent, label)) in ways.into_iter().enumerate() {
            let budget = Budget::new(estimate * percent / 100, 0);
            let (output, report) = run(way, &original, budget);
            let kept = keeps::kept(&expected, &keeps::output_text(&output));
            for (k, total) in [kept.paths, kept.errors, kept.commands, kept.requests] {
                assert!(k <= total, "{name}");
            }
            // Deterministic: the same input and budget give the same bytes.
            let (again, _) = run(way, &original, budget);
            assert_eq!(again, output, "{name}");
            let effective = budget.effective();
            let trail = report.trail().map_or("-".to_owned(), |t| {
                // The trail stays within its share of E (SPEC: at most 15%).
                let share = if way == Way::WideTrail { 20 } else { 15 };
                assert!(
                    t.tokens * 100 <= effective * share + 100,
                    "{name}: {t:?} for {effective}"
                );
                format!(
                    "{} ({:.1}%)",
                    t.tokens,
                    100.0 * t.tokens as f64 / effective as f64
                )
            });
            if way != Way::NoTrail {
                // Every user request of the removed ranges is still there, verbatim.
                assert_eq!(kept.requests.0, kept.requests.1, "{name} {label}");
            }
            totals[i].add(kept);
            let tokens = format!("{} → {}", report.tokens_before, report.tokens_after);
            lines.push(row(
                &name,
                &format!("{label} ({})", report.summary_line()),
                &tokens,
                kept,
                &trail,
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
            totals[5].add(kept);
            let tokens = format!("summary of messages {from}..{at}");
            lines.push(row(&name, "Claude Code's own", &tokens, kept, "-"));
            from = at + 1;
        }
    }
    for (total, label) in totals.iter().zip([
        "10%",
        "5%",
        "10%, prune only",
        "10%, trail off",
        "5%, trail ≤ 20% of E",
        "Claude Code's own",
    ]) {
        lines.push(row("**all**", label, "", *total, ""));
    }
    println!("{}", lines.join("\n"));
    println!("\n{}", why_missing(&manager).join("\n"));
    println!("\n{}", cost_by_window().join("\n"));
    assert!(totals[0].paths.1 > 0 && totals[0].requests.1 > 0);
    // What the trail adds: more of every kind than the same cascade without it.
    assert!(totals[0].paths.0 > totals[3].paths.0);
    assert!(totals[0].errors.0 > totals[3].errors.0);
}

/// Why the paths an output misses are missing, per fixture at 10% and 5% (whole cascade):
/// what must stay (the output's irreducible messages: system, first user, current turn and
/// message, after ① and ②), the room that leaves under E beside the notice, what the trail
/// took, and the cheapest possible listing of the missing paths (each written once,
/// relative to their common directory, one per line) and their file names alone (what any
/// listing must at least spell): when even the names are over the room, no trail format
/// can hold them within E.
fn why_missing(manager: &ContextManager) -> Vec<String> {
    let mut lines = vec![
        "| fixture | at | E | must stay | room under E | trail | paths missing | cheapest listing of them | their file names alone | why |".to_owned(),
        "|---|---|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    let estimator = manager.estimator("gpt-4o");
    for (name, fixture) in common::transcripts() {
        let original =
            parse(&serde_json::json!({"model": "gpt-4o", "messages": fixture["messages"]}));
        let expected = keeps::expected(&original.messages);
        let estimate = manager.estimate(&original);
        for percent in [10u64, 5] {
            let budget = Budget::new(estimate * percent / 100, 0);
            let (output, report) = run(Way::Cascade, &original, budget);
            let text = keeps::output_text(&output);
            let kept = keeps::kept(&expected, &text);
            let irreducible = output.irreducible();
            let must: u64 = (output.messages.iter().zip(&irreducible))
                .filter(|(_, keep)| **keep)
                .map(|(m, _)| estimator.message_tokens(m))
                .sum();
            let notice = estimator.message_tokens(&Message::text(
                Role::User,
                "[context compacted: 99 earlier messages removed; summary unavailable]",
            ));
            let effective = budget.effective();
            let room = effective.saturating_sub(must + notice);
            let missing = keeps::missing_paths(&expected, &text);
            let cheapest = keeps::cheapest_listing(&missing);
            let tokens = |text: &str| {
                if text.is_empty() {
                    0
                } else {
                    estimator.text_tokens(text)
                }
            };
            let (cheapest, names) = (tokens(&cheapest), tokens(&keeps::file_names(&missing)));
            let stats = report.trail();
            let trail = stats.map_or(0, |t| t.tokens);
            let left_out = stats.map_or(0, |t| t.left_out);
            let why = if missing.is_empty() {
                "-"
            } else if must + notice > effective {
                "what must stay is over E: nothing else fits"
            } else if names > room {
                "the room under E cannot hold even their file names"
            } else if cheapest > room {
                "the room under E cannot hold a plain listing of them"
            } else if left_out > 0 {
                "the trail's budget (15% of E) is full: left out for space"
            } else {
                "not in the trail"
            };
            // Every missing path is explained by a bound; where only the trail's own budget
            // bounds it, the targets hold (issue 12: ≥ 95% at 10%, ≥ 90% at 5%).
            assert_ne!(why, "not in the trail", "{name} at {percent}%");
            // Where paths are missing for want of room, the trail still takes at least half
            // of the room there is (⑤ level 3 keeps fewer recent messages for it).
            if !missing.is_empty() && must + notice <= effective {
                let budget = manager.config().trail.budget(effective);
                assert!(
                    trail * 2 >= room.min(budget),
                    "{name} {percent}%: {trail} of {room}"
                );
            }
            if why.starts_with("the trail's budget") {
                let floor = if percent == 10 { 95 } else { 90 };
                assert!(
                    kept.paths.0 * 100 >= kept.paths.1 * floor,
                    "{name} {percent}%"
                );
            }
            lines.push(format!(
                "| {name} | {percent}% | {effective} | {must} | {room} | {trail} | {} of {} | {cheapest} | {names} | {why} |",
                missing.len(),
                kept.paths.1
            ));
        }
    }
    lines
}

/// What the trail costs at the fixture matrix's windows (8K, 32K, 128K; no reserve): per
/// window, the fixtures compacted with a trail, the largest trail and its share of E, and
/// the mean share (SPEC: at most 15% of E, and at most 4,000 tokens).
fn cost_by_window() -> Vec<String> {
    let mut lines = vec![
        "| window | fixtures with a trail | largest trail (tokens) | largest share of E | mean share of E |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    for window in [8_000u64, 32_000, 128_000] {
        let budget = Budget::new(window, 0);
        let mut shares: Vec<(u64, f64)> = Vec::new();
        for (_, fixture) in common::transcripts() {
            let original =
                parse(&serde_json::json!({"model": "gpt-4o", "messages": fixture["messages"]}));
            let (_, report) = run(Way::Cascade, &original, budget);
            if let Some(t) = report.trail().filter(|t| t.tokens > 0) {
                let share = t.tokens as f64 / budget.effective() as f64;
                assert!(
                    share <= 0.15 + 1e-9 && t.tokens <= 4_000,
                    "{t:?} at {window}"
                );
                shares.push((t.tokens, share));
            }
        }
        let largest = shares.iter().map(|s| s.0).max().unwrap_or(0);
        let top = shares.iter().map(|s| s.1).fold(0.0, f64::max);
        let mean = match shares.len() {
            0 => "-".to_owned(),
            n => format!(
                "{:.1}%",
                100.0 * shares.iter().map(|s| s.1).sum::<f64>() / n as f64
            ),
        };
        lines.push(format!(
            "| {window} | {} of 10 | {largest} | {:.1}% | {mean} |",
            shares.len(),
            100.0 * top,
        ));
    }
    lines
}
