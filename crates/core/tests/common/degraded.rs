//! The sessions and the checked cascade run the degradation tests share
//! (`degradation.rs`, `chunking.rs`).

use std::sync::Arc;

use context_cascade::SUMMARY_PREFIX;
use context_cascade::summarizer::SummaryRequest;
use context_cascade::{
    Budget, CascadeConfig, ContextManager, Conversation, Message, Report, Strategy, format,
};
use serde_json::{Value, json};

use super::invariants::{self, Run};
use super::scripted::{ScriptedSummarizer, SummaryAnswer};

pub const MODEL: &str = "gpt-4o";

/// `len` characters of varied text about a turn (ASCII, so lengths are characters).
pub fn text(who: &str, turn: usize, len: usize) -> String {
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
pub fn session_messages(
    middle: usize,
    chars: usize,
    tail_chars: usize,
    previous: bool,
) -> Vec<Value> {
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

pub fn parse(body: &Value) -> Conversation {
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

/// The session in both formats.
pub fn sessions(
    middle: usize,
    chars: usize,
    tail_chars: usize,
    previous: bool,
) -> Vec<Conversation> {
    let messages = session_messages(middle, chars, tail_chars, previous);
    let openai = json!({"model": MODEL, "messages": messages});
    vec![parse(&openai), parse(&super::to_anthropic(&messages))]
}

/// A window that holds the same share of the session whatever the model's starting scale
/// (the Anthropic form names a Claude model, which counts more tokens).
pub fn budget(manager: &ContextManager, conversation: &Conversation, window: u64) -> Budget {
    let multiplier = manager
        .estimator(conversation.model().unwrap_or(""))
        .multiplier;
    Budget::new((window as f64 * multiplier / 1.1) as u64, 0)
}

pub struct Outcome {
    pub output: Conversation,
    pub report: Report,
    pub requests: Vec<SummaryRequest>,
}

/// Whether any of `messages` holds `text`.
pub fn mentions(messages: &[Message], text: &str) -> bool {
    messages.iter().any(|m| m.text_content().contains(text))
}

/// Runs the whole cascade with a scripted summarizer and checks the invariants.
pub fn compact<F>(original: &Conversation, window: u64, script: F) -> Outcome
where
    F: Fn(usize, &SummaryRequest) -> SummaryAnswer + Send + Sync + 'static,
{
    let summarizer = Arc::new(ScriptedSummarizer::new(script));
    let manager = ContextManager::new(CascadeConfig::default()).with_summarizer(summarizer.clone());
    let budget = budget(&manager, original, window);
    let (output, report) = invariants::compact(&manager, original, budget);
    let format = original.format.as_str();
    invariants::hold(&Run::new(&manager, original, &output, &report, budget))
        .unwrap_or_else(|e| panic!("{format}: {e}\n{report:#?}"));
    assert!(report.fits, "{format}: {report:#?}");
    Outcome {
        output,
        report,
        requests: summarizer.requests(),
    }
}

/// The steps recovery attempts ran (not Layer 1's): (strategy, attempt, ⑤'s level).
pub fn recovery_steps(report: &Report) -> Vec<(Strategy, Option<u8>, Option<u8>)> {
    report
        .steps
        .iter()
        .filter(|s| s.attempt.is_some())
        .map(|s| (s.strategy, s.attempt, s.level))
        .collect()
}

/// The texts of the summaries the cascade wrote in place of the history, without the trail
/// blocks it adds to them (what the summarizer wrote, exactly).
pub fn summaries(conversation: &Conversation) -> Vec<String> {
    conversation
        .messages
        .iter()
        .map(|m| m.text_content())
        .filter(|t| t.starts_with(SUMMARY_PREFIX))
        .map(|t| without_trail(&t))
        .collect()
}

/// The notices the cascade wrote, by their marker (first line): the trail follows it.
pub fn notice_markers(conversation: &Conversation) -> Vec<String> {
    conversation
        .messages
        .iter()
        .map(|m| m.text_content())
        .filter(|t| t.starts_with("[context compacted"))
        .map(|t| t.lines().next().unwrap_or("").to_owned())
        .collect()
}

/// `text` without the trail's blocks (a heading, its `- ` entries and their indented
/// continuation lines) and its `Left out for space:` line.
pub fn without_trail(text: &str) -> String {
    let headings = [
        "User requests:",
        "Errors:",
        "Files (most recent first",
        "Commands:",
    ];
    let mut out: Vec<&str> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if headings.iter().any(|h| line.starts_with(h)) {
            inside = true;
            continue;
        }
        if line.starts_with("Left out for space:") {
            continue;
        }
        if inside && (line.starts_with("- ") || line.starts_with("  ")) {
            continue;
        }
        inside = false;
        out.push(line);
    }
    out.join("\n")
}

pub const WINDOW: u64 = 8_192;

pub fn small_sessions() -> Vec<Conversation> {
    sessions(10, 800, 5_000, false)
}
