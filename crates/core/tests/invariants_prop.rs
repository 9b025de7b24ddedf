//! Property tests of SPEC.md's invariants over generated conversations in both formats:
//! random roles, parallel tool calls, pins, remember requests, huge and multi-byte (CJK,
//! emoji) tool output, windows from tiny to huge; in Anthropic form the current turn's
//! first answer carries signed thinking (invariant 1), and every removal must leave its
//! trail, the same bytes for the same input (invariant 8).
//!
//! `PROPTEST_CASES` sets the number of cases (default 48, CI-sized); a long run:
//! `PROPTEST_CASES=10000 cargo test --release -p context_cascade --test invariants_prop`.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::invariants::{self, Run};
use context_cascade::{Budget, CascadeConfig, ContextManager, Format, format};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Text units repeated to build contents: ASCII code, prose, CJK, emoji with joiners.
const UNITS: [&str; 5] = [
    "fn main() { println!(\"{}\", 42); }\n",
    "The quick brown fox jumps over the lazy dog. ",
    "上下文窗口压缩测试，记录所有文件。",
    "👨‍👩‍👧‍👦🎉 ok ",
    "error: cannot find value `x` in this scope --> src/lib.rs:10:5\n",
];

const TOOLS: [&str; 6] = [
    "Read",
    "bash",
    "grep",
    "str_replace_editor",
    "Write",
    "custom_tool",
];

#[derive(Debug, Clone)]
enum Event {
    User {
        text: String,
        pinned: bool,
    },
    Assistant {
        text: String,
    },
    Tools {
        calls: Vec<(usize, String)>,
        pinned: bool,
    },
}

#[derive(Debug, Clone)]
struct Case {
    system: Option<String>,
    first: String,
    events: Vec<Event>,
    /// Whether the conversation ends on tool results (else on a user message).
    ends_on_results: bool,
    window: u64,
    reserve: u64,
    anthropic: bool,
}

fn text(max_units: usize) -> impl Strategy<Value = String> {
    (0..UNITS.len(), 1..=max_units).prop_map(|(unit, count)| UNITS[unit].repeat(count))
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => (text(40), prop::bool::weighted(0.15), prop::bool::weighted(0.1)).prop_map(|(t, pinned, remember)| Event::User {
            text: if remember { format!("Please remember: {t}") } else { t },
            pinned,
        }),
        2 => text(30).prop_map(|text| Event::Assistant { text }),
        5 => (
            prop::collection::vec((0..TOOLS.len(), text(3000)), 1..=3),
            prop::bool::weighted(0.05),
        )
            .prop_map(|(calls, pinned)| Event::Tools { calls, pinned }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::option::of(text(60)),
        text(80),
        prop::collection::vec(event(), 0..40),
        any::<bool>(),
        (10u32..=18).prop_flat_map(|bits| (1u64 << (bits - 1))..=(1u64 << bits)),
        0u64..4096,
        any::<bool>(),
    )
        .prop_map(
            |(system, first, events, ends_on_results, window, reserve, anthropic)| Case {
                system,
                first,
                events,
                ends_on_results,
                window,
                reserve: reserve.min(window / 4),
                anthropic,
            },
        )
}

fn arguments(tool: &str, n: usize) -> Value {
    match tool {
        "str_replace_editor" => {
            json!({"command": if n % 2 == 0 { "view" } else { "create" }, "path": format!("/src/f{n}.rs")})
        }
        "bash" => json!({"command": format!("cat /src/f{n}.rs")}),
        _ => json!({"path": format!("/src/f{n}.rs")}),
    }
}

/// The case as an OpenAI Chat Completions body.
fn openai(case: &Case) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &case.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": case.first}));
    let mut n = 0;
    let mut push_tools = |messages: &mut Vec<Value>, calls: &[(usize, String)], pinned: bool| {
        let ids: Vec<String> = calls
            .iter()
            .map(|_| {
                n += 1;
                format!("call_{n}")
            })
            .collect();
        let tool_calls: Vec<Value> = calls.iter().zip(&ids).map(|((tool, _), id)| json!({
            "id": id, "type": "function",
            "function": {"name": TOOLS[*tool], "arguments": arguments(TOOLS[*tool], n).to_string()}})).collect();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
        for ((_, output), id) in calls.iter().zip(&ids) {
            let mut m = json!({"role": "tool", "tool_call_id": id, "content": output});
            if pinned {
                m["_pin"] = json!(true);
            }
            messages.push(m);
        }
    };
    for event in &case.events {
        match event {
            Event::User { text, pinned } => {
                let mut m = json!({"role": "user", "content": text});
                if *pinned {
                    m["_pin"] = json!(true);
                }
                messages.push(m);
            }
            Event::Assistant { text } => {
                messages.push(json!({"role": "assistant", "content": text}))
            }
            Event::Tools { calls, pinned } => push_tools(&mut messages, calls, *pinned),
        }
    }
    if case.ends_on_results {
        push_tools(&mut messages, &[(0, UNITS[0].repeat(50))], false);
    } else {
        messages.push(json!({"role": "user", "content": "continue"}));
    }
    json!({"model": "gpt-4o", "messages": messages, "max_tokens": case.reserve})
}

/// The same case as an Anthropic Messages body (pins kept on the messages that carry them).
fn anthropic(case: &Case) -> Value {
    let body = openai(case);
    let mut system = None;
    let mut out: Vec<Value> = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let pinned = m.get("_pin").is_some();
        let mut message = match m["role"].as_str() {
            Some("system") => {
                system = Some(m["content"].clone());
                continue;
            }
            Some("tool") => {
                let block = json!({"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]});
                match out.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && last["content"][0]["type"] == "tool_result" =>
                    {
                        last["content"]
                            .as_array_mut()
                            .into_iter()
                            .for_each(|c| c.push(block.clone()));
                        if pinned {
                            last["_pin"] = json!(true);
                        }
                        continue;
                    }
                    _ => json!({"role": "user", "content": [block]}),
                }
            }
            Some("assistant") if m.get("tool_calls").is_some() => {
                let blocks: Vec<Value> = m["tool_calls"].as_array().into_iter().flatten().map(|c| json!({
                    "type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                    "input": serde_json::from_str::<Value>(c["function"]["arguments"].as_str().unwrap_or("{}")).unwrap_or(json!({}))})).collect();
                json!({"role": "assistant", "content": blocks})
            }
            _ => json!({"role": m["role"], "content": m["content"]}),
        };
        if pinned {
            message["_pin"] = json!(true);
        }
        out.push(message);
    }
    // The current turn's first assistant message carries signed thinking (invariant 1:
    // byte-identical after compaction).
    let instruction = out.iter().rposition(|m| {
        m["role"] == "user" && (m["content"].is_string() || m["content"][0]["type"] == "text")
    });
    let answer =
        instruction.and_then(|at| (at + 1..out.len()).find(|&i| out[i]["role"] == "assistant"));
    if let Some(at) = answer {
        let thinking = json!({"type": "thinking", "thinking": "Plan: read, then edit.", "signature": "U2lnbmVkVGhpbmtpbmc="});
        let content = match out[at]["content"].take() {
            Value::Array(blocks) => blocks,
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            _ => Vec::new(),
        };
        out[at]["content"] = Value::Array(std::iter::once(thinking).chain(content).collect());
    }
    let mut body = json!({"model": "gpt-4o", "max_tokens": case.reserve, "messages": out});
    if let Some(system) = system {
        body["system"] = system;
    }
    body
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::proptest_cases(48)))]

    #[test]
    fn the_seven_invariants_hold(case in case()) {
        let body = if case.anthropic { anthropic(&case) } else { openai(&case) };
        let expected = if case.anthropic { Format::Anthropic } else { Format::OpenAi };
        let original = format::parse(body.to_string().as_bytes(), Some(expected)).unwrap();
        let manager = ContextManager::new(CascadeConfig::default());
        let budget = Budget::new(case.window, case.reserve);
        let (output, report) = invariants::compact(&manager, &original, budget);
        let run = Run::new(&manager, &original, &output, &report, budget);
        if let Err(e) = invariants::hold(&run) {
            return Err(TestCaseError::fail(e));
        }
        if let Err(e) = invariants::deterministic(&run) {
            return Err(TestCaseError::fail(e));
        }
        // Invariant 8: every user request of a removed range is in the output, verbatim
        // (its head), unless the report counts requests left out for space.
        // (A trail with no room at all says nothing: only when the step's target left it
        // none, so never when the output leaves its share of E and a quarter more unused.)
        let roomy = |tokens: u64| tokens + budget.share(0.15) + budget.share(0.25) <= budget.effective();
        let silent = report.steps.iter().any(|s| s.trail.is_some_and(|t| t.tokens == 0) && !roomy(s.tokens_after));
        let left_out = silent || report.trail().is_some_and(|t| t.left_out > 0);
        let text: String = output.messages.iter().map(|m| m.text_content()).collect::<Vec<_>>().join("\n");
        for message in &original.messages {
            let own = message.text_content();
            let request = message.role() == context_cascade::Role::User
                && message.tool_results().next().is_none()
                && !own.trim().is_empty();
            if !request || left_out || output.messages.contains(message) {
                continue;
            }
            let head: String = own.lines().next().unwrap_or("").chars().take(40).collect();
            let notices: Vec<String> = output.messages.iter().map(|m| m.text_content()).filter(|t| t.starts_with("[context")).map(|t| t.chars().take(700).collect()).collect();
            let trails: Vec<_> = report.steps.iter().map(|s| (s.strategy, s.level, s.trail)).collect();
            prop_assert!(text.contains(head.trim_end()), "request {head:?} left no trail\n{}\n{trails:?}\n{notices:#?}", report.summary_line());
        }
    }
}
