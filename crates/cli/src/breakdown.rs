//! Where the tokens of a conversation go: by role, by tool, and the largest messages.
//!
//! Groups add up character-class counts and convert them to tokens once, so that a group's
//! tokens are the estimate of its content as a whole (as the request total is).

use std::collections::BTreeMap;

use context_cascade::estimate::{ClassCounts, Estimator};
use context_cascade::{Block, Conversation, Message, Role};

/// Tokens of one group of messages (a role).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RoleGroup {
    pub(crate) label: String,
    pub(crate) messages: usize,
    pub(crate) tokens: u64,
}

/// Tokens spent on one tool: its calls (name and arguments) and its results.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ToolGroup {
    pub(crate) name: String,
    pub(crate) calls: usize,
    pub(crate) call_tokens: u64,
    pub(crate) results: usize,
    pub(crate) result_tokens: u64,
}

impl ToolGroup {
    pub(crate) fn tokens(&self) -> u64 {
        self.call_tokens + self.result_tokens
    }
}

/// One of the largest messages.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Largest {
    pub(crate) index: usize,
    pub(crate) role: String,
    /// The tools it calls or answers, comma-separated; empty otherwise.
    pub(crate) tools: String,
    pub(crate) tokens: u64,
    /// The start of its content, on one line.
    pub(crate) preview: String,
}

/// The whole breakdown of one conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Breakdown {
    pub(crate) total_tokens: u64,
    pub(crate) messages: usize,
    pub(crate) chars: u64,
    /// Roles in order of first appearance, then the request's `tools` definitions.
    pub(crate) by_role: Vec<RoleGroup>,
    /// Largest first.
    pub(crate) by_tool: Vec<ToolGroup>,
    /// Largest first, at most `top` of them.
    pub(crate) largest: Vec<Largest>,
}

/// Characters kept for a preview before the table cuts it to the terminal width.
const PREVIEW_CHARS: usize = 240;

/// Label of the `tools` definitions row.
pub(crate) const TOOL_DEFINITIONS: &str = "tools (definitions)";

impl Breakdown {
    /// Breaks `conversation` down with `estimator`, keeping the `top` largest messages.
    pub(crate) fn of(conversation: &Conversation, estimator: &Estimator, top: usize) -> Breakdown {
        let mut roles: Vec<(String, usize, ClassCounts)> = Vec::new();
        let mut tools: BTreeMap<String, (ToolGroup, ClassCounts, ClassCounts)> = BTreeMap::new();
        let mut sizes: Vec<(u64, usize)> = Vec::with_capacity(conversation.messages.len());

        for (index, message) in conversation.messages.iter().enumerate() {
            let counts = message.counts();
            let label = role_label(message);
            match roles.iter_mut().find(|(l, _, _)| *l == label) {
                Some((_, n, c)) => {
                    *n += 1;
                    *c += counts;
                }
                None => roles.push((label.to_owned(), 1, counts)),
            }
            sizes.push((estimator.tokens_of(&counts), index));
            for block in message.blocks() {
                match block {
                    Block::ToolCall(call) => {
                        let entry = tools.entry(call.name.clone()).or_default();
                        entry.0.calls += 1;
                        entry.1 += ClassCounts::of_blocks(std::slice::from_ref(block));
                    }
                    Block::ToolResult(result) => {
                        let name = result.tool_name.as_deref().unwrap_or("(unknown tool)");
                        let entry = tools.entry(name.to_owned()).or_default();
                        entry.0.results += 1;
                        entry.2 += ClassCounts::of_blocks(&result.content);
                    }
                    _ => {}
                }
            }
        }

        let mut by_role: Vec<RoleGroup> = roles
            .into_iter()
            .map(|(label, messages, counts)| RoleGroup {
                label,
                messages,
                tokens: estimator.tokens_of(&counts),
            })
            .collect();
        if let Some(definitions) = conversation.tools() {
            by_role.push(RoleGroup {
                label: TOOL_DEFINITIONS.to_owned(),
                messages: 0,
                tokens: estimator.tokens_of(&ClassCounts::of_json(definitions)),
            });
        }

        let mut by_tool: Vec<ToolGroup> = tools
            .into_iter()
            .map(|(name, (mut group, calls, results))| {
                group.name = name;
                group.call_tokens = if group.calls > 0 {
                    estimator.tokens_of(&calls)
                } else {
                    0
                };
                group.result_tokens = if group.results > 0 {
                    estimator.tokens_of(&results)
                } else {
                    0
                };
                group
            })
            .collect();
        // Largest first; ties by name so the output is stable.
        by_tool.sort_by(|a, b| b.tokens().cmp(&a.tokens()).then(a.name.cmp(&b.name)));

        sizes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let largest = sizes
            .iter()
            .take(top)
            .map(|&(tokens, index)| {
                let message = &conversation.messages[index];
                Largest {
                    index,
                    role: role_label(message).to_owned(),
                    tools: tools_of(message),
                    tokens,
                    preview: preview(message),
                }
            })
            .collect();

        let all = ClassCounts::of_conversation(conversation);
        Breakdown {
            total_tokens: estimator.tokens_of(&all),
            messages: conversation.messages.len(),
            chars: context_cascade::estimate::Weights::chars(&all),
            by_role,
            by_tool,
            largest,
        }
    }
}

/// The role as shown: the wire role, except that a user message holding only tool results
/// (Anthropic's form) is shown apart from what the user wrote.
fn role_label(message: &Message) -> &'static str {
    if message.role() == Role::User && message.is_only_tool_results() {
        "user (tool results)"
    } else {
        message.role().as_str()
    }
}

/// The tools a message calls or answers, in order, without repeats.
fn tools_of(message: &Message) -> String {
    let mut names: Vec<&str> = Vec::new();
    for block in message.blocks() {
        let name = match block {
            Block::ToolCall(call) => Some(call.name.as_str()),
            Block::ToolResult(result) => result.tool_name.as_deref(),
            _ => None,
        };
        if let Some(name) = name
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names.join(",")
}

/// The first text of a message on one line: its text, else its tool results, else its
/// calls as `name(arguments)`.
fn preview(message: &Message) -> String {
    let mut text = message.text_content();
    if text.trim().is_empty() {
        text = message
            .tool_results()
            .map(|r| r.joined_text())
            .collect::<Vec<_>>()
            .join(" ");
    }
    if text.trim().is_empty() {
        text = message
            .tool_calls()
            .map(|c| format!("{}({})", c.name, c.arguments_text()))
            .collect::<Vec<_>>()
            .join(" ");
    }
    one_line(&text, PREVIEW_CHARS)
}

/// Collapses whitespace and control characters to single spaces, keeping `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut kept = 0;
    let mut space = false;
    for ch in text.chars() {
        if ch.is_whitespace() || ch.is_control() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            kept += 1;
            space = false;
        }
        if kept >= max {
            break;
        }
        out.push(ch);
        kept += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(json: &str) -> Conversation {
        context_cascade::format::parse(json.as_bytes(), None).expect("valid test body")
    }

    #[test]
    fn groups_by_role_and_tool_with_resolved_names() {
        let c = conversation(
            r#"{"model":"gpt-4o","messages":[
              {"role":"system","content":"be brief"},
              {"role":"user","content":"read it"},
              {"role":"assistant","content":null,"tool_calls":[
                {"id":"a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"x.rs\"}"}}]},
              {"role":"tool","tool_call_id":"a","content":"fn main() { println!(\"hello\"); }"},
              {"role":"assistant","content":"done"}]}"#,
        );
        let b = Breakdown::of(&c, &Estimator::default(), 10);
        let labels: Vec<&str> = b.by_role.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["system", "user", "assistant", "tool"]);
        assert_eq!(b.by_role[2].messages, 2);
        assert_eq!(b.by_tool.len(), 1);
        let read = &b.by_tool[0];
        assert_eq!(
            (read.name.as_str(), read.calls, read.results),
            ("read_file", 1, 1)
        );
        assert!(read.result_tokens > read.call_tokens);
        assert_eq!(b.largest[0].index, 3);
        assert_eq!(b.largest[0].tools, "read_file");
        assert!(b.largest[0].preview.starts_with("fn main()"));
        let role_sum: u64 = b.by_role.iter().map(|g| g.tokens).sum();
        // Groups round up separately: at most one token each above the total.
        assert!(role_sum >= b.total_tokens && role_sum <= b.total_tokens + 4);
    }

    #[test]
    fn one_line_collapses_whitespace() {
        assert_eq!(one_line("  a\n\tb  c\n", 100), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc");
    }
}
