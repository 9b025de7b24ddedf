//! SPEC.md's invariants, checked on one cascade output. Shared by the fixture matrix
//! and the property tests. Each check returns a description of the first violation.

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Block, Budget, ContextManager, Conversation, Format, Message, Report, Role};
use context_cascade::{COMPACTED, RESULT_REMOVED, TRUNCATED, is_cascade_notice};

/// Everything an invariant needs about one run.
pub struct Run<'a> {
    pub manager: &'a ContextManager,
    pub original: &'a Conversation,
    pub output: &'a Conversation,
    pub report: &'a Report,
    pub budget: Budget,
}

impl<'a> Run<'a> {
    pub fn new(
        manager: &'a ContextManager,
        original: &'a Conversation,
        output: &'a Conversation,
        report: &'a Report,
        budget: Budget,
    ) -> Self {
        Run {
            manager,
            original,
            output,
            report,
            budget,
        }
    }
}

/// A copy of `original` compacted at `budget` by the whole cascade (`compact_with_summary`,
/// the path the invariants are stated for), and its report.
pub fn compact(
    manager: &ContextManager,
    original: &Conversation,
    budget: Budget,
) -> (Conversation, Report) {
    let mut output = original.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut output, budget));
    (output, report)
}

/// Invariants 1–6: [`check`], then [`idempotent`]. A violation of the first comes with the
/// report's summary line.
pub fn hold(run: &Run<'_>) -> Result<(), String> {
    check(run).map_err(|e| format!("{e}\nreport: {}", run.report.summary_line()))?;
    idempotent(run.manager, run.output, run.budget)
}

/// Checks invariants 1–5, 7 and the first half of 8 (6 and the rest of 8 need another run:
/// see [`idempotent`] and [`deterministic`]).
pub fn check(run: &Run<'_>) -> Result<(), String> {
    kept_unchanged(run).map_err(|e| format!("invariant 1: {e}"))?;
    tool_pairs(run.output).map_err(|e| format!("invariant 2: {e}"))?;
    role_order(run.output).map_err(|e| format!("invariant 3: {e}"))?;
    if run.output.format == Format::Anthropic {
        // What goes upstream must alternate: pins are stripped there.
        let upstream = WriteOptions {
            strip_pins: true,
            pretty: false,
        };
        let write = |c: &Conversation| format::to_vec(c, upstream);
        let (input, output) = (write(run.original), write(run.output));
        wire_alternates(
            &input.map_err(|e| e.to_string())?,
            &output.map_err(|e| e.to_string())?,
            // A kept message inside a removed range (a pin, the current turn's instruction)
            // splits it: the strategies put a notice in every later gap where two turns of
            // one role would meet, so every meeting is checked.
            Scope::All,
        )?;
    }
    markers_exact(run.output).map_err(|e| format!("invariant 4: {e}"))?;
    fits_when_it_can(run).map_err(|e| format!("invariant 5: {e}"))?;
    accounted(run).map_err(|e| format!("invariant 7: {e}"))?;
    trail_left(run).map_err(|e| format!("invariant 8: {e}"))?;
    Ok(())
}

/// Invariant 8, first half: every step that removed messages (③, ④, ⑤) left a trail, and
/// what the report counts of it is in the output.
fn trail_left(run: &Run<'_>) -> Result<(), String> {
    use context_cascade::Strategy;
    if !run.manager.config().trail.enabled {
        return Ok(());
    }
    let text: String = (run.output.messages.iter())
        .map(|m| m.text_content())
        .collect::<Vec<_>>()
        .join("\n");
    let mut latest = None;
    for step in &run.report.steps {
        let removes = matches!(
            step.strategy,
            Strategy::PruneHistory | Strategy::Summarize | Strategy::Degrade
        );
        if !removes || step.messages_removed == 0 {
            continue;
        }
        match step.trail {
            Some(trail) => latest = Some(trail),
            None => return Err(format!("a {} step left no trail", step.strategy.as_str())),
        }
    }
    // A later removal folds the earlier trails into its own: the latest is what is left.
    if let Some(trail) = latest {
        let listed = trail.requests + trail.errors + trail.files + trail.commands;
        let headed = [
            "User requests:",
            "Errors:",
            "Files (most recent first",
            "Commands:",
        ]
        .iter()
        .any(|h| text.contains(h));
        if listed > 0 && !headed {
            return Err(format!(
                "the report counts {trail:?} but the output lists none"
            ));
        }
    }
    Ok(())
}

/// Invariant 8, second half: the same input and budget give the same bytes.
pub fn deterministic(run: &Run<'_>) -> Result<(), String> {
    let mut again = run.original.clone();
    pollster::block_on(run.manager.compact_with_summary(&mut again, run.budget));
    let write = |c: &Conversation| format::to_vec(c, WriteOptions::default());
    let (a, b) = (write(run.output), write(&again));
    if a.map_err(|e| e.to_string())? != b.map_err(|e| e.to_string())? {
        return Err("invariant 8: the same input compacted twice gave different bytes".into());
    }
    Ok(())
}

/// The messages no strategy may remove, in the original (after remember requests are
/// pinned, as the engine does).
fn protected(run: &Run<'_>) -> Vec<Message> {
    let mut original = run.original.clone();
    run.manager.pin_remember_requests(&mut original);
    let first_user = original.first_user_index();
    let n = original.messages.len();
    let (instruction, answer) = current_turn(&original);
    original
        .messages
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            m.role().is_system()
                || m.is_pinned()
                || Some(*i) == first_user
                || i + 1 == n
                || Some(*i) == instruction
                || Some(*i) == answer
        })
        .map(|(_, m)| m.clone())
        .collect()
}

/// The current turn (SPEC.md ③, invariant 1): the last user message with text of its own
/// (not only tool results, not a notice of the cascade) and the first assistant message
/// after it.
pub fn current_turn(conversation: &Conversation) -> (Option<usize>, Option<usize>) {
    let messages = &conversation.messages;
    let instruction = messages.iter().rposition(|m| {
        m.role() == Role::User
            && m.blocks().iter().any(|b| {
                matches!(b, Block::Text(t) if !t.text.trim().is_empty() && !is_cascade_notice(&t.text))
            })
    });
    let answer = instruction
        .and_then(|at| (at + 1..messages.len()).find(|&i| messages[i].role() == Role::Assistant));
    (instruction, answer)
}

/// Invariant 1: present, in order, unchanged — a tool result among them may be cut by ①
/// unless pinned.
fn kept_unchanged(run: &Run<'_>) -> Result<(), String> {
    let mut at = 0;
    for wanted in protected(run) {
        let found = run.output.messages[at..]
            .iter()
            .position(|m| same_or_cut(&wanted, m));
        match found {
            Some(offset) => at += offset + 1,
            None => {
                let preview: String = wanted.text_content().chars().take(60).collect();
                return Err(format!(
                    "a {} message is missing or changed: {preview:?}",
                    wanted.role().as_str()
                ));
            }
        }
    }
    Ok(())
}

fn same_or_cut(wanted: &Message, got: &Message) -> bool {
    if wanted.role() != got.role() || wanted.blocks().len() < got.blocks().len() {
        return wanted == got;
    }
    if wanted == got {
        return true;
    }
    if wanted.is_pinned() {
        return false;
    }
    wanted
        .blocks()
        .iter()
        .zip(got.blocks())
        .all(|(w, g)| match (w, g) {
            (Block::ToolResult(w), Block::ToolResult(g)) => {
                w.call_id == g.call_id && {
                    let (wt, gt) = (w.joined_text(), g.joined_text());
                    wt == gt
                        || gt
                            .rfind(TRUNCATED)
                            .is_some_and(|at| wt.starts_with(&gt[..at]))
                }
            }
            _ => w == g,
        })
}

/// Invariant 2: every call has exactly one result after it, every result its call before
/// it, by the format's rules. Calls in the last message are the pending action. Pairing is
/// per exchange: some agents reuse call ids across turns (the SWE-agent fixture does).
pub fn tool_pairs(conversation: &Conversation) -> Result<(), String> {
    let messages = &conversation.messages;
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        let calls: Vec<&str> = message.tool_calls().map(|c| c.id.as_str()).collect();
        if message.role() != Role::Assistant && !calls.is_empty() {
            return Err(format!(
                "message {i}: tool calls outside an assistant message"
            ));
        }
        let results_here = message.tool_results().count();
        if results_here > 0 && message.role() == Role::Assistant {
            return Err(format!("message {i}: tool results in an assistant message"));
        }
        if results_here > 0 {
            return Err(format!(
                "message {i}: a tool result without its call right before it"
            ));
        }
        i += 1;
        if calls.is_empty() || i == messages.len() {
            continue;
        }
        let mut got: Vec<&str> = Vec::new();
        match conversation.format {
            Format::Anthropic => {
                let next = &messages[i];
                if next.role() != Role::User {
                    return Err(format!(
                        "message {i}: calls of message {} are not answered by the next user message",
                        i - 1
                    ));
                }
                let leading = next
                    .blocks()
                    .iter()
                    .take_while(|b| matches!(b, Block::ToolResult(_)))
                    .count();
                if leading != next.tool_results().count() {
                    return Err(format!("message {i}: tool results must come first"));
                }
                got.extend(next.tool_results().map(|r| r.call_id.as_str()));
                i += 1;
            }
            _ => {
                while i < messages.len() && messages[i].role().is_tool_result() {
                    got.extend(messages[i].tool_results().map(|r| r.call_id.as_str()));
                    i += 1;
                }
            }
        }
        let mut wanted = calls.clone();
        wanted.sort_unstable();
        got.sort_unstable();
        if wanted != got {
            return Err(format!(
                "message before {i}: calls {wanted:?} answered by {got:?}"
            ));
        }
    }
    Ok(())
}

/// Invariant 3: roles valid for the format.
pub fn role_order(conversation: &Conversation) -> Result<(), String> {
    for (i, message) in conversation.messages.iter().enumerate() {
        let role = message.role();
        match conversation.format {
            Format::Anthropic => {
                if role.is_system() && i != 0 {
                    return Err(format!("message {i}: system message after the start"));
                }
                if role.is_tool_result() {
                    return Err(format!("message {i}: tool role in Anthropic form"));
                }
            }
            _ => {
                if role.is_tool_result() {
                    let previous = conversation.messages.get(i.wrapping_sub(1));
                    let ok = previous.is_some_and(|p| {
                        p.role().is_tool_result()
                            || (p.role() == Role::Assistant && p.tool_calls().next().is_some())
                    });
                    if !ok {
                        return Err(format!("message {i}: tool message not after a tool call"));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Which same-role meetings [`wire_alternates`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Meetings where a cascade notice or summary is at the edge of a wire message.
    Notices,
    /// Every meeting.
    All,
}

/// Invariant 3 on the wire, Anthropic form: the output alternates user and assistant
/// wherever the input did. Two consecutive messages of one role are allowed only where the
/// input had the messages that meet there next to each other (a request is not ours to
/// fix). A message is known by its role, its blocks' types and ids and its text blocks,
/// which is what survives ① and ② (they only shorten tool results); where notices were
/// merged into a wire message, the messages that meet are its last and first pieces
/// between them. `Scope::Notices` checks only meetings at a notice or summary (what the
/// writer guarantees: it merges them); `Scope::All` checks every meeting.
pub fn wire_alternates(input: &[u8], output: &[u8], scope: Scope) -> Result<(), String> {
    use serde_json::{Value, json};
    let messages = |bytes: &[u8]| -> Result<Vec<Value>, String> {
        let body: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        Ok(body["messages"].as_array().cloned().unwrap_or_default())
    };
    // The pieces of a message between the cascade's notices, each as a message key.
    let pieces = |m: &Value| -> Vec<Value> {
        let blocks = match &m["content"] {
            Value::Array(blocks) => blocks.clone(),
            other => vec![json!({"type": "text", "text": other})],
        };
        let mut out: Vec<Vec<Value>> = vec![Vec::new()];
        for b in &blocks {
            if b["text"].as_str().is_some_and(is_cascade_notice) {
                out.push(Vec::new());
            } else if let Some(last) = out.last_mut() {
                last.push(json!([b["type"], b["id"], b["tool_use_id"], b["text"]]));
            }
        }
        let mut keys: Vec<Value> = out
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(|p| json!([m["role"], p]))
            .collect();
        if keys.is_empty() {
            keys.push(json!([m["role"], []]));
        }
        keys
    };
    let (before, after) = (messages(input)?, messages(output)?);
    let before: Vec<Value> = before.iter().flat_map(pieces).collect();
    for (i, pair) in after.windows(2).enumerate() {
        if pair[0]["role"] != pair[1]["role"] {
            continue;
        }
        // A notice at the edge where two turns of one role meet: the writer did not merge it.
        let marker = |b: Option<&Value>| {
            b.and_then(|b| b["text"].as_str().or(b.as_str()))
                .is_some_and(is_cascade_notice)
        };
        let edge = |m: &Value, last: bool| match &m["content"] {
            Value::Array(blocks) => marker(if last { blocks.last() } else { blocks.first() }),
            other => marker(Some(other)),
        };
        if scope == Scope::Notices && !edge(&pair[0], true) && !edge(&pair[1], false) {
            continue;
        }
        let (left, right) = (pieces(&pair[0]), pieces(&pair[1]));
        let meet = [left[left.len() - 1].clone(), right[0].clone()];
        if !before.windows(2).any(|p| p == meet) {
            let preview: String = pair[1].to_string().chars().take(160).collect();
            let before: String = pair[0].to_string().chars().take(400).collect();
            return Err(format!(
                "invariant 3: messages {i} and {} are both {} on the wire: {before} | {preview}",
                i + 1,
                pair[0]["role"]
            ));
        }
    }
    Ok(())
}

/// Invariant 4: every marker exactly as specified (Rust strings are always whole UTF-8).
pub fn markers_exact(conversation: &Conversation) -> Result<(), String> {
    let notice = regex::Regex::new(
        r"^\[context compacted: \d+ earlier messages removed(; summary unavailable)?\]$",
    )
    .unwrap();
    let texts = conversation
        .messages
        .iter()
        .flat_map(|m| m.blocks())
        .flat_map(|b| match b {
            Block::Text(t) => vec![t.text.as_str()],
            Block::ToolResult(r) => r.content.iter().filter_map(Block::as_text).collect(),
            _ => vec![],
        });
    for text in texts {
        // The marker is the first line; a notice's trail, or a placeholder's note, follows.
        let first = text.lines().next().unwrap_or("");
        if text.starts_with("[context compacted") && !notice.is_match(first) {
            return Err(format!("malformed notice {text:?}"));
        }
        if text.starts_with("[compacted") {
            let mut lines = text.lines().skip(1);
            let note = lines.next();
            let note_ok =
                note.is_none_or(|l| l.starts_with("stale: ") || l.starts_with("errors: "));
            if first != COMPACTED || !note_ok || lines.next().is_some() {
                return Err(format!("malformed placeholder {text:?}"));
            }
        }
        if text.starts_with("[tool result removed") && text != RESULT_REMOVED {
            return Err(format!("malformed synthetic result {text:?}"));
        }
        if let Some(at) = text.find("\n[truncated") {
            // ①'s marker, then only recall's handle and its note on what it cut
            // (`errors: `, `last line: `).
            let note = text[at..].strip_prefix(TRUNCATED);
            let note_ok = note.is_some_and(|n| {
                n.split('\n').skip(1).all(|l| {
                    l.starts_with("errors: ")
                        || l.starts_with("last line: ")
                        || l.starts_with("recall handle: ")
                }) && (n.is_empty() || n.starts_with('\n'))
            });
            if !note_ok {
                return Err(format!("malformed truncation marker {:?}", &text[at..]));
            }
        }
    }
    Ok(())
}

/// Tokens of what no strategy may remove in the output: the irreducible messages with
/// their exchanges, the tool definitions and the notice or summary message.
pub fn irreducible_tokens(run: &Run<'_>) -> u64 {
    let output = run.output;
    let estimator = run.manager.estimator(output.model().unwrap_or(""));
    let keep = output.irreducible();
    let mut total = output.tools().map_or(0, |t| {
        estimator.tokens_of(&context_cascade::estimate::ClassCounts::of_json(t))
    });
    for (message, kept) in output.messages.iter().zip(keep) {
        let ours = message.text_content().starts_with("[context ");
        if kept || ours {
            total += estimator.message_tokens(message);
        }
    }
    total
}

/// Invariant 5: if the irreducible part fits (with room for a notice), the result fits.
fn fits_when_it_can(run: &Run<'_>) -> Result<(), String> {
    let tokens = run.manager.estimate(run.output);
    let effective = run.budget.effective();
    let irreducible = irreducible_tokens(run);
    if irreducible + 50 <= effective && tokens > effective {
        return Err(format!(
            "{tokens} tokens > {effective} although the irreducible part takes {irreducible}"
        ));
    }
    if run.report.fits != (tokens <= effective) {
        return Err(format!(
            "report.fits = {} but the estimate is {tokens} for {effective}",
            run.report.fits
        ));
    }
    Ok(())
}

/// Invariant 7: the report accounts for every message and every character.
fn accounted(run: &Run<'_>) -> Result<(), String> {
    let report = run.report;
    let removed: usize = report.steps.iter().map(|s| s.messages_removed).sum();
    let added: usize = report.steps.iter().map(|s| s.messages_added).sum();
    if report.messages_before + added - removed != report.messages_after
        || report.messages_after != run.output.messages.len()
    {
        return Err(format!(
            "messages: {} + {added} − {removed} ≠ {} (output has {})",
            report.messages_before,
            report.messages_after,
            run.output.messages.len()
        ));
    }
    let chars = |c: &Conversation| {
        c.messages
            .iter()
            .map(|m| context_cascade::estimate::Weights::chars(&m.counts()))
            .sum::<u64>()
    };
    let chars_removed: u64 = report.steps.iter().map(|s| s.chars_removed).sum();
    let chars_added: u64 = report.steps.iter().map(|s| s.chars_added).sum();
    let (before, after) = (chars(run.original), chars(run.output));
    if before + chars_added != after + chars_removed {
        return Err(format!(
            "chars: {before} + {chars_added} added ≠ {after} + {chars_removed} removed"
        ));
    }
    Ok(())
}

/// Invariant 6: compacting the output again with the same budget changes nothing.
pub fn idempotent(
    manager: &ContextManager,
    output: &Conversation,
    budget: Budget,
) -> Result<(), String> {
    let mut again = output.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut again, budget));
    let a = format::to_vec(output, WriteOptions::default()).map_err(|e| e.to_string())?;
    let b = format::to_vec(&again, WriteOptions::default()).map_err(|e| e.to_string())?;
    if a != b {
        return Err(format!(
            "invariant 6: a second compaction changed the output ({})",
            report.summary_line()
        ));
    }
    // Through the wire too: Anthropic merges notices into user messages when writing and
    // splits them out when reading, and the engine must find them again.
    let mut reread = format::parse(&a, Some(output.format)).map_err(|e| e.to_string())?;
    let report = pollster::block_on(manager.compact_with_summary(&mut reread, budget));
    let c = format::to_vec(&reread, WriteOptions::default()).map_err(|e| e.to_string())?;
    if a != c {
        return Err(format!(
            "invariant 6: compacting the written output again changed it ({})",
            report.summary_line()
        ));
    }
    Ok(())
}
