//! Strategies ④ and ⑤ with scripted summarizers: a summarizer that fails, times out,
//! returns nothing, returns more than it replaces or is cut off gives the right level of ⑤;
//! chunked input degrades to the chunk summaries that succeeded; an earlier summary is
//! handed over as the previous summary. Every output keeps SPEC.md's invariants.

mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use common::invariants::{self, Run};
use common::scripted::{
    FAULTS, Rendezvous, ScriptedSummarizer, SummaryAnswer, all_text, faulty, nine_sections,
};
use context_cascade::markers::SUMMARY_PREFIX;
use context_cascade::summarizer::{SummaryError, SummaryRequest};
use context_cascade::{
    Block, Budget, CascadeConfig, ContextManager, Conversation, Report, Role, Strategy, format,
};
use serde_json::{Value, json};

const MODEL: &str = "gpt-4o";

/// `len` characters of varied text about a turn (ASCII, so lengths are characters).
fn text(who: &str, turn: usize, len: usize) -> String {
    let line = format!(
        "{who} {turn}: checked src/module_{turn}.rs and tests/case_{turn}.rs, parser state ok. "
    );
    line.repeat(len / line.len() + 1)[..len].to_owned()
}

/// An agent session in OpenAI form: system, the first request, an optional earlier
/// summary, `middle` turns (user text, then an assistant call to a tool ② may not compact
/// with its result), one pasted log over half the window, six long recent messages (so ③
/// keeping its N recent messages cannot reach its target and ④ must run), the current
/// request.
fn session_messages(middle: usize, chars: usize, tail_chars: usize, previous: bool) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful coding agent."}),
        json!({"role": "user", "content": "Fix the failing parser tests; keep the public API."}),
    ];
    if previous {
        messages.push(json!({"role": "user", "content": format!(
            "{SUMMARY_PREFIX}\n## 1. User intent and goals\n- OLD-SUMMARY: fix the parser"
        )}));
        messages.push(json!({"role": "assistant", "content": "Understood, continuing."}));
    }
    for turn in 0..middle {
        messages.push(json!({"role": "user", "content": text("user", turn, chars / 2)}));
        // Every fifth turn calls three tools in parallel.
        let parallel = if turn % 5 == 4 { 3 } else { 1 };
        let ids: Vec<String> = (0..parallel).map(|k| format!("call_{turn}_{k}")).collect();
        let calls: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "type": "function", "function": {"name": "lookup_ticket", "arguments": format!("{{\"ticket\": {turn}}}")}}))
            .collect();
        messages.push(json!({"role": "assistant", "content": text("plan", turn, chars / 4), "tool_calls": calls}));
        for id in &ids {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": text("ticket", turn, chars / parallel)}));
        }
        if turn == middle / 2 {
            messages.push(json!({"role": "user", "content": text("pasted log", turn, 20_000)}));
            messages.push(json!({"role": "assistant", "content": "Read the log."}));
        }
    }
    for turn in 0..6 {
        let role = if turn % 2 == 0 { "user" } else { "assistant" };
        messages.push(json!({"role": role, "content": text(role, 100 + turn, tail_chars)}));
    }
    messages.push(json!({"role": "user", "content": "Which tests are still red?"}));
    messages
}

fn parse(body: &Value) -> Conversation {
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

/// The session in both formats.
fn sessions(middle: usize, chars: usize, tail_chars: usize, previous: bool) -> Vec<Conversation> {
    let messages = session_messages(middle, chars, tail_chars, previous);
    let openai = json!({"model": MODEL, "messages": messages});
    vec![parse(&openai), parse(&common::to_anthropic(&messages))]
}

/// A window that holds the same share of the session whatever the model's starting scale
/// (the Anthropic form names a Claude model, which counts more tokens).
fn budget(manager: &ContextManager, conversation: &Conversation, window: u64) -> Budget {
    let multiplier = manager
        .estimator(conversation.model().unwrap_or(""))
        .multiplier;
    Budget::new((window as f64 * multiplier / 1.1) as u64, 0)
}

struct Outcome {
    output: Conversation,
    report: Report,
    requests: Vec<SummaryRequest>,
}

/// Runs the whole cascade with a scripted summarizer and checks the invariants.
fn compact<F>(original: &Conversation, window: u64, script: F) -> Outcome
where
    F: Fn(usize, &SummaryRequest) -> SummaryAnswer + Send + Sync + 'static,
{
    let summarizer = Arc::new(ScriptedSummarizer::new(script));
    let manager = ContextManager::new(CascadeConfig::default()).with_summarizer(summarizer.clone());
    let budget = budget(&manager, original, window);
    let mut output = original.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut output, budget));
    let run = Run {
        manager: &manager,
        original,
        output: &output,
        report: &report,
        budget,
    };
    let format = original.format.as_str();
    invariants::check(&run).unwrap_or_else(|e| panic!("{format}: {e}\n{report:#?}"));
    invariants::idempotent(&manager, &output, budget).unwrap_or_else(|e| panic!("{format}: {e}"));
    assert!(report.fits, "{format}: {report:#?}");
    Outcome {
        output,
        report,
        requests: summarizer.requests(),
    }
}

/// The steps recovery attempts ran (not Layer 1's): (strategy, attempt, ⑤'s level).
fn recovery_steps(report: &Report) -> Vec<(Strategy, Option<u8>, Option<u8>)> {
    report
        .steps
        .iter()
        .filter(|s| s.attempt.is_some())
        .map(|s| (s.strategy, s.attempt, s.level))
        .collect()
}

/// The texts of the messages the cascade wrote in place of the history.
fn summaries(conversation: &Conversation) -> Vec<String> {
    conversation
        .messages
        .iter()
        .map(|m| m.text_content())
        .filter(|t| t.starts_with(SUMMARY_PREFIX))
        .collect()
}

const WINDOW: u64 = 8_192;

fn small_sessions() -> Vec<Conversation> {
    sessions(10, 800, 5_000, false)
}

#[test]
fn a_clean_summary_is_not_degraded() {
    for original in small_sessions() {
        let outcome = compact(&original, WINDOW, |_, _| Ok(nine_sections("CLEAN")));
        let format = original.format.as_str();
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Summarize, Some(1), None)],
            "{format}"
        );
        assert!(!outcome.report.degraded, "{format}");
        assert_eq!(outcome.requests.len(), 1, "{format}");
        assert_eq!(
            summaries(&outcome.output),
            [format!("{SUMMARY_PREFIX}\n{}", nine_sections("CLEAN"))],
            "{format}"
        );
        // The summarizer saw the tool outputs it summarizes (④ is not level 2).
        assert!(
            outcome.requests[0]
                .messages()
                .iter()
                .any(|m| m.tool_results().next().is_some()),
            "{format}"
        );
    }
}

#[test]
fn a_fault_then_a_summary_of_the_small_messages_is_level_2() {
    let omitted = regex::Regex::new(
        r"^\[large (user|assistant|tool) message \(~\d+ tokens\) omitted from summary\]$",
    )
    .unwrap();
    for fault in FAULTS {
        for original in small_sessions() {
            let what = format!("{fault:?}, {}", original.format.as_str());
            let outcome = compact(&original, WINDOW, move |i, request| {
                if i == 0 {
                    faulty(fault, request)
                } else {
                    Ok(nine_sections("SMALL"))
                }
            });
            assert_eq!(
                recovery_steps(&outcome.report),
                [(Strategy::Degrade, Some(1), Some(2))],
                "{what}"
            );
            assert!(outcome.report.degraded, "{what}");
            assert_eq!(outcome.requests.len(), 2, "{what}");
            assert_eq!(
                summaries(&outcome.output),
                [format!("{SUMMARY_PREFIX}\n{}", nine_sections("SMALL"))],
                "{what}"
            );
            // The second request left out every tool output and the pasted log, each as
            // its notice.
            let small = &outcome.requests[1];
            assert!(
                small
                    .messages()
                    .iter()
                    .all(|m| m.tool_results().next().is_none()),
                "{what}"
            );
            let notices: Vec<String> = small
                .messages()
                .iter()
                .map(|m| m.text_content())
                .filter(|t| t.starts_with("[large "))
                .collect();
            assert!(
                notices.iter().all(|t| omitted.is_match(t)),
                "{what}: {notices:?}"
            );
            assert!(
                notices.iter().any(|t| t.starts_with("[large user message")),
                "{what}: the pasted log is over half the window: {notices:?}"
            );
            let tool_outputs = outcome.requests[0]
                .messages()
                .iter()
                .filter(|m| m.tool_results().next().is_some())
                .count();
            let tool_notices = notices
                .iter()
                .filter(|t| t.starts_with("[large tool message"))
                .count();
            // One notice per message holding outputs (Anthropic carries parallel results in
            // one user message, OpenAI in one tool message each).
            assert_eq!(tool_notices, tool_outputs, "{what}");
            assert!(!all_text(small).contains("ticket 0: checked"), "{what}");
            assert!(
                !outcome
                    .output
                    .messages
                    .iter()
                    .any(|m| m.text_content().contains("OVERSIZED"))
            );
        }
    }
}

#[test]
fn faults_everywhere_leave_the_bare_notice() {
    for fault in FAULTS {
        for original in small_sessions() {
            let what = format!("{fault:?}, {}", original.format.as_str());
            let outcome = compact(&original, WINDOW, move |_, request| faulty(fault, request));
            assert_eq!(
                recovery_steps(&outcome.report),
                [(Strategy::Degrade, Some(1), Some(3))],
                "{what}"
            );
            assert!(outcome.report.degraded, "{what}");
            assert!(summaries(&outcome.output).is_empty(), "{what}");
            // One notice stands for the messages removed, exactly as SPEC.md writes it.
            let removed = original.messages.len() - (outcome.output.messages.len() - 1);
            let notice = format!(
                "[context compacted: {removed} earlier messages removed; summary unavailable]"
            );
            let notices: Vec<String> = outcome
                .output
                .messages
                .iter()
                .map(|m| m.text_content())
                .filter(|t| t.starts_with("[context compacted"))
                .collect();
            assert_eq!(notices, [notice], "{what}");
            let step = outcome.report.steps.last().unwrap();
            assert_eq!(step.messages_removed, removed, "{what}");
            assert_eq!(step.messages_added, 1, "{what}");
            // ④ then level 2: two calls, and nothing either answered went in.
            assert_eq!(outcome.requests.len(), 2, "{what}");
            assert!(
                !outcome
                    .output
                    .messages
                    .iter()
                    .any(|m| m.text_content().contains("OVERSIZED"))
            );
        }
    }
}

#[test]
fn a_previous_summary_is_handed_over_not_summarized_again() {
    for original in sessions(10, 800, 5_000, true) {
        let format = original.format.as_str();
        let outcome = compact(&original, WINDOW, |_, _| Ok(nine_sections("NEW")));
        assert_eq!(outcome.requests.len(), 1, "{format}");
        let request = &outcome.requests[0];
        assert_eq!(
            request.previous_summary(),
            Some("## 1. User intent and goals\n- OLD-SUMMARY: fix the parser"),
            "{format}"
        );
        assert!(
            request
                .messages()
                .iter()
                .all(|m| !m.text_content().contains("OLD-SUMMARY")),
            "{format}: the earlier summary went in as a message"
        );
        // The new summary replaces the old one.
        assert_eq!(
            summaries(&outcome.output),
            [format!("{SUMMARY_PREFIX}\n{}", nine_sections("NEW"))],
            "{format}"
        );
        assert!(!outcome.report.degraded);
    }
}

#[test]
fn level_2_hands_over_the_previous_summary_too() {
    for original in sessions(10, 800, 5_000, true) {
        let format = original.format.as_str();
        let outcome = compact(&original, WINDOW, |i, _| {
            if i == 0 {
                Err(SummaryError::Timeout)
            } else {
                Ok(nine_sections("SMALL"))
            }
        });
        assert_eq!(outcome.requests.len(), 2, "{format}");
        for request in &outcome.requests {
            assert!(
                request
                    .previous_summary()
                    .is_some_and(|p| p.contains("OLD-SUMMARY")),
                "{format}"
            );
            assert!(
                request
                    .messages()
                    .iter()
                    .all(|m| !m.text_content().contains("OLD-SUMMARY")),
                "{format}"
            );
        }
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Degrade, Some(1), Some(2))]
        );
    }
}

/// A session whose history is well over the chunking threshold (50,000 chars).
const BIG_WINDOW: u64 = 32_000;

fn big_sessions() -> Vec<Conversation> {
    sessions(80, 2_400, 17_000, true)
}

/// The chunk requests among what the summarizer received (the merge has partials).
fn chunk_requests(requests: &[SummaryRequest]) -> Vec<&SummaryRequest> {
    requests.iter().filter(|r| !r.is_merge()).collect()
}

/// What the chunks hold, checked against the messages they stand for.
fn check_chunks(what: &str, chunks: &[&SummaryRequest]) {
    let n = chunks.len();
    assert!((2..=4).contains(&n), "{what}: {n} chunks");
    let sizes: Vec<usize> = chunks
        .iter()
        .map(|c| c.messages().iter().map(|m| m.text_content().len()).sum())
        .collect();
    let total: usize = sizes.iter().sum();
    assert!(total > 50_000, "{what}: only {total} chars to summarize");
    // Never more than four, however much there is.
    if total > 4 * 50_000 {
        assert_eq!(n, 4, "{what}: {total} chars in {n} chunks");
    }
    for (i, chunk) in chunks.iter().enumerate() {
        // Only the first chunk carries the previous summary; none carries it as a message.
        assert_eq!(
            chunk.previous_summary().is_some(),
            i == 0,
            "{what}: chunk {i}"
        );
        assert!(
            chunk
                .messages()
                .iter()
                .all(|m| !m.text_content().contains("OLD-SUMMARY"))
        );
        // Cut at exchange boundaries: no chunk opens with the results of a call.
        let first = &chunk.messages()[0];
        assert!(
            !first.role().is_tool_result() && !first.is_only_tool_results(),
            "{what}: chunk {i} starts inside a tool exchange"
        );
        // Similar sizes: none more than twice the average.
        assert!(sizes[i] <= 2 * total / n, "{what}: chunk sizes {sizes:?}");
    }
}

#[test]
fn a_failed_chunk_leaves_the_chunks_before_it() {
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        // Chunks 1 and 2 are summarized, chunk 3 fails, chunk 4 (if any) is summarized.
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            assert!(!request.is_merge(), "no merge after a failed chunk");
            match i {
                2 => Err(SummaryError::Failed("chunk 3: HTTP 502".into())),
                _ => Ok(nine_sections(&format!("CHUNK{}", i + 1))),
            }
        });
        let chunks = chunk_requests(&outcome.requests);
        check_chunks(&what, &chunks);
        let n = chunks.len();
        assert!(n >= 3, "{what}: chunk 3 must exist, got {n} chunks");
        assert_eq!(
            outcome.requests.len(),
            n,
            "{what}: level 1 needs no further call"
        );
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Degrade, Some(1), Some(1))],
            "{what}"
        );
        assert!(outcome.report.degraded);
        let expected = format!(
            "{SUMMARY_PREFIX}\n{}\n\n{}\n\n[partial summary: chunks 1-2 of {n} summarized; the rest could not be processed]",
            nine_sections("CHUNK1"),
            nine_sections("CHUNK2"),
        );
        assert_eq!(summaries(&outcome.output), [expected], "{what}");
    }
}

#[test]
fn a_failed_merge_keeps_every_chunk_summary() {
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            if !request.is_merge() {
                Ok(nine_sections(&format!("CHUNK{}", i + 1)))
            } else {
                Err(SummaryError::Timeout)
            }
        });
        let chunks = chunk_requests(&outcome.requests);
        check_chunks(&what, &chunks);
        let n = chunks.len();
        // One merge call, with every chunk summary in order.
        let merges: Vec<&SummaryRequest> =
            outcome.requests.iter().filter(|r| r.is_merge()).collect();
        assert_eq!(merges.len(), 1, "{what}");
        let partials: Vec<String> = (1..=n)
            .map(|i| nine_sections(&format!("CHUNK{i}")))
            .collect();
        assert_eq!(merges[0].partials(), partials, "{what}");
        assert!(merges[0].messages().is_empty());
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Degrade, Some(1), Some(1))],
            "{what}"
        );
        assert!(outcome.report.degraded);
        let expected = format!(
            "{SUMMARY_PREFIX}\n{}\n\n[partial summary: chunks 1-{n} of {n} summarized; the rest could not be processed]",
            partials.join("\n\n")
        );
        assert_eq!(summaries(&outcome.output), [expected], "{what}");
    }
}

#[test]
fn chunked_summaries_merge_into_a_clean_summary() {
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            Ok(nine_sections(&if !request.is_merge() {
                format!("CHUNK{}", i + 1)
            } else {
                "MERGED".to_owned()
            }))
        });
        let n = chunk_requests(&outcome.requests).len();
        assert_eq!(outcome.requests.len(), n + 1, "{what}");
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Summarize, Some(1), None)],
            "{what}"
        );
        assert!(!outcome.report.degraded);
        assert_eq!(
            summaries(&outcome.output),
            [format!("{SUMMARY_PREFIX}\n{}", nine_sections("MERGED"))]
        );
    }
}

#[test]
fn a_failed_first_chunk_falls_to_level_2() {
    // Level 1 needs a leading run of chunk summaries; without chunk 1 there is none.
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            if i == 0 {
                return Err(SummaryError::Failed("chunk 1".into()));
            }
            // The first batch: the chunk requests carry tool outputs; level 2's do not.
            let level_2 = request
                .messages()
                .iter()
                .all(|m| m.tool_results().next().is_none());
            Ok(nine_sections(if level_2 { "SMALL" } else { "CHUNK" }))
        });
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Degrade, Some(1), Some(2))],
            "{what}"
        );
        assert!(outcome.report.degraded);
        let texts = summaries(&outcome.output);
        assert_eq!(texts.len(), 1, "{what}");
        assert!(!texts[0].contains("partial summary"), "{what}");
        assert!(!texts[0].contains("CHUNK"), "{what}");
    }
}

#[test]
fn the_omitted_notice_counts_with_the_estimate() {
    // Level 2 stands a large message in as `[large <role> message (~N tokens) …]` with N
    // its estimate at the manager's scale.
    let original = &small_sessions()[0];
    let outcome = compact(original, WINDOW, |i, _| {
        if i == 0 {
            Err(SummaryError::Empty)
        } else {
            Ok(nine_sections("SMALL"))
        }
    });
    let manager = ContextManager::new(CascadeConfig::default());
    let estimator = manager.estimator(MODEL);
    let log = original
        .messages
        .iter()
        .find(|m| m.role() == Role::User && m.text_content().starts_with("pasted log"))
        .unwrap();
    let expected = format!(
        "[large user message (~{} tokens) omitted from summary]",
        estimator.message_tokens(log)
    );
    let small = &outcome.requests[1];
    assert!(
        small
            .messages()
            .iter()
            .any(|m| m.text_content() == expected),
        "{expected} not among {:?}",
        small
            .messages()
            .iter()
            .map(|m| m.text_content())
            .filter(|t| t.starts_with('['))
            .collect::<Vec<_>>()
    );
    assert!(small.messages().iter().all(|m| {
        m.blocks()
            .iter()
            .all(|b| !matches!(b, Block::ToolResult(_)))
    }));
}

#[test]
fn the_bare_notice_counts_what_earlier_compactions_removed() {
    // An earlier ③ left its notice in the middle: the new notice says how many went in all.
    let mut messages = session_messages(10, 800, 5_000, false);
    messages.insert(
        2,
        json!({"role": "user", "content": "[context compacted: 5 earlier messages removed]"}),
    );
    messages.insert(3, json!({"role": "assistant", "content": "Noted."}));
    let openai = parse(&json!({"model": MODEL, "messages": messages}));
    for original in [openai, parse(&common::to_anthropic(&messages))] {
        let what = original.format.as_str();
        let outcome = compact(&original, WINDOW, |_, _| Err(SummaryError::Timeout));
        // Everything gone but the new notice, less the old notice itself, plus its five.
        let removed_now = original.messages.len() - (outcome.output.messages.len() - 1) - 1;
        let notices: Vec<String> = outcome
            .output
            .messages
            .iter()
            .map(|m| m.text_content())
            .filter(|t| t.starts_with("[context compacted"))
            .collect();
        assert_eq!(
            notices,
            [format!(
                "[context compacted: {} earlier messages removed; summary unavailable]",
                removed_now + 5
            )],
            "{what}"
        );
        // The old notice is no message to summarize either.
        assert!(
            outcome.requests[0]
                .messages()
                .iter()
                .all(|m| !m.text_content().starts_with("[context compacted")),
            "{what}"
        );
    }
}

#[test]
fn chunks_are_summarized_concurrently() {
    let original = &big_sessions()[0];
    let manager =
        ContextManager::new(CascadeConfig::default()).with_summarizer(Arc::new(Rendezvous {
            started: AtomicUsize::new(0),
        }));
    let budget = budget(&manager, original, BIG_WINDOW);
    let mut output = original.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut output, budget));
    assert_eq!(
        recovery_steps(&report),
        [(Strategy::Summarize, Some(1), None)],
        "{report:#?}"
    );
    assert_eq!(
        summaries(&output),
        [format!("{SUMMARY_PREFIX}\n{}", nine_sections("MERGED"))]
    );
}

#[test]
fn pins_and_remember_requests_survive_every_level() {
    let mut messages = session_messages(10, 800, 5_000, false);
    messages.insert(
        2,
        json!({"role": "user", "content": "Please remember: only ever run the tests with --release."}),
    );
    messages.insert(3, json!({"role": "assistant", "content": "Noted."}));
    let openai = parse(&json!({"model": MODEL, "messages": messages}));
    for mut original in [openai, parse(&common::to_anthropic(&messages))] {
        let what = original.format.as_str();
        // Pin a plain user message in the middle of the history.
        let middle = (original.messages.iter())
            .position(|m| m.text_content().starts_with("user 5:"))
            .unwrap();
        original.messages[middle].pin();
        type Script = fn(usize, &SummaryRequest) -> SummaryAnswer;
        // (strategy, ⑤'s level): every one of them runs in attempt 1.
        let scripts: [(Script, (Strategy, Option<u8>)); 3] = [
            (
                |_, _| Ok(nine_sections("CLEAN")),
                (Strategy::Summarize, None),
            ),
            (
                |i, _| match i {
                    0 => Err(SummaryError::Truncated),
                    _ => Ok(nine_sections("SMALL")),
                },
                (Strategy::Degrade, Some(2)),
            ),
            (
                |_, _| Err(SummaryError::Timeout),
                (Strategy::Degrade, Some(3)),
            ),
        ];
        for (script, (strategy, level)) in scripts {
            // `compact` checks invariant 1: system, first user, pinned (the remember request
            // included) and current messages are all there, unchanged.
            let outcome = compact(&original, WINDOW, script);
            assert_eq!(
                recovery_steps(&outcome.report),
                [(strategy, Some(1), level)],
                "{what}"
            );
            let texts: Vec<String> = (outcome.output.messages.iter())
                .map(|m| m.text_content())
                .collect();
            assert!(texts.iter().any(|t| t.starts_with("user 5:")), "{what}");
            assert!(texts.iter().any(|t| t.contains("--release")), "{what}");
            // The pinned messages stand for themselves: no summary was asked to cover them.
            for request in &outcome.requests {
                assert!(!all_text(request).contains("--release"), "{what}");
            }
        }
    }
}
