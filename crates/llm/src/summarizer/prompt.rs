//! The summarization prompt: instructions for the nine sections, and the history to
//! summarize written as a readable transcript (tool outputs shortened).

use std::fmt::Write as _;

use context_cascade::Block;
use context_cascade::Message;
use context_cascade::SUMMARY_SECTIONS;
use context_cascade::summarizer::{SummaryRequest, section_heading};

/// How much of each part of the history the transcript keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptLimits {
    /// Characters kept of each tool result (head and tail).
    pub tool_output_chars: usize,
    /// Characters kept of each tool call's arguments.
    pub tool_arguments_chars: usize,
    /// Characters kept of each text block.
    pub text_chars: usize,
}

impl Default for TranscriptLimits {
    fn default() -> Self {
        TranscriptLimits {
            tool_output_chars: 2_000,
            tool_arguments_chars: 1_000,
            text_chars: 8_000,
        }
    }
}

/// The system instructions: the nine headings, exactly, in order.
pub fn system_prompt() -> String {
    let mut prompt = String::from(
        "You summarize the earlier part of a conversation between a user and an AI assistant \
         (often an agent using tools), so that the assistant can carry on the work without \
         the original messages.\n\
         Write only the summary, as Markdown, with exactly these nine headings, in this \
         order, each on its own line:\n",
    );
    for index in 0..SUMMARY_SECTIONS.len() {
        prompt.push_str(&section_heading(index));
        prompt.push('\n');
    }
    prompt.push_str(
        "Under each heading write short bullet points. Keep exact file paths, identifiers, \
         commands, error messages and numbers. Quote short user instructions verbatim. If a \
         section has nothing to say, write \"- none\". No other headings, no preamble, no \
         closing remarks. The summary must be much shorter than the text it replaces.",
    );
    prompt
}

/// The user message: what to summarize (or merge), and the size limit.
pub fn user_prompt(request: &SummaryRequest, limits: &TranscriptLimits) -> String {
    let mut prompt = String::new();
    if let Some(previous) = request.previous_summary().filter(|s| !s.trim().is_empty()) {
        prompt.push_str("An earlier summary of the conversation before the part below:\n");
        prompt.push_str("<previous_summary>\n");
        prompt.push_str(previous.trim());
        prompt.push_str("\n</previous_summary>\n\n");
        prompt.push_str(
            "Update that summary with what follows: keep what is still true, add what is \
             new, drop what the newer material made obsolete.\n\n",
        );
    }
    if !request.partials().is_empty() {
        let _ = writeln!(
            prompt,
            "The conversation was summarized in {} consecutive chunks, oldest first. Merge \
             the chunk summaries into one summary with the nine sections: combine \
             duplicates, keep the chronology, and let later chunks win where they disagree \
             (for progress, pending tasks and next steps, the last chunk is the current \
             state).\n",
            request.partials().len()
        );
        for (index, partial) in request.partials().iter().enumerate() {
            let _ = writeln!(
                prompt,
                "<chunk {n}>\n{}\n</chunk {n}>\n",
                partial.trim(),
                n = index + 1
            );
        }
    }
    if !request.messages().is_empty() {
        prompt.push_str("The conversation to summarize:\n<transcript>\n");
        prompt.push_str(&transcript(request.messages(), limits));
        prompt.push_str("</transcript>\n\n");
    }
    let _ = write!(
        prompt,
        "Write the nine-section summary now, in at most about {} tokens.",
        request.max_tokens()
    );
    prompt
}

/// The messages as a transcript: `[n role]` then the content, tool calls and results
/// spelled out, long parts shortened to their head and tail.
pub fn transcript(messages: &[Message], limits: &TranscriptLimits) -> String {
    let mut out = String::new();
    for (index, message) in messages.iter().enumerate() {
        let role = if message.role().is_tool_result() {
            "tool result"
        } else {
            message.role().as_str()
        };
        let _ = writeln!(out, "[{} {role}]", index + 1);
        for block in message.blocks() {
            write_block(&mut out, block, limits);
        }
        out.push('\n');
    }
    out
}

fn write_block(out: &mut String, block: &Block, limits: &TranscriptLimits) {
    match block {
        Block::Text(text) => {
            let _ = writeln!(out, "{}", shorten(text.text.trim(), limits.text_chars));
        }
        Block::ToolCall(call) => {
            let arguments = shorten(&call.arguments_text(), limits.tool_arguments_chars);
            let _ = writeln!(out, "-> calls tool `{}` with {arguments}", call.name);
        }
        Block::ToolResult(result) => {
            let name = result.tool_name.as_deref().unwrap_or("tool");
            let error = if result
                .fields
                .get("is_error")
                .and_then(serde_json::Value::as_bool)
                == Some(true)
            {
                " (error)"
            } else {
                ""
            };
            let mut text = result.joined_text();
            if text.is_empty() && !result.content.is_empty() {
                text = "[non-text output]".to_owned();
            }
            let _ = writeln!(
                out,
                "<- result of `{name}`{error}:\n{}",
                shorten(text.trim(), limits.tool_output_chars)
            );
        }
        Block::Binary(_) => out.push_str("[image or file omitted]\n"),
        // Hidden reasoning is the model's scratch work, not part of the record.
        Block::Thinking(_) => {}
        Block::Other(opaque) => {
            let kind = opaque
                .raw
                .get("type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unknown");
            let _ = writeln!(out, "[{kind} block omitted]");
        }
    }
}

/// The text itself when it fits; else its head and tail around an omission note. The tail
/// is kept because tool outputs end with what matters most (the error, the summary line).
pub fn shorten(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_owned();
    }
    let tail_chars = max_chars / 4;
    let head_chars = max_chars - tail_chars;
    let head: String = text.chars().take(head_chars).collect();
    let tail: String = text.chars().skip(total - tail_chars).collect();
    format!(
        "{head}\n[... {} characters omitted ...]\n{tail}",
        total - head_chars - tail_chars
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::ToolResult;
    use context_cascade::{Role, Shape};
    use serde_json::Map;

    #[test]
    fn shorten_keeps_head_and_tail() {
        assert_eq!(shorten("short", 10), "short");
        let long: String = "a".repeat(50) + &"z".repeat(50);
        let cut = shorten(&long, 20);
        assert!(cut.starts_with("aaaaaaaaaaaaaaa\n[... 80 characters omitted ...]\n"));
        assert!(cut.ends_with("zzzzz"));
        assert_eq!(shorten("ééééé", 4).chars().filter(|c| *c == 'é').count(), 4);
    }

    #[test]
    fn transcript_shows_roles_and_shortens_tool_output() {
        let result = ToolResult::text("c1", Some("grep".into()), "x".repeat(5_000));
        let messages = vec![
            Message::text(Role::User, "find the bug"),
            Message::new(
                Role::Tool,
                vec![Block::ToolResult(result)],
                Shape::String,
                Map::new(),
            ),
        ];
        let text = transcript(&messages, &TranscriptLimits::default());
        assert!(text.starts_with("[1 user]\nfind the bug\n"));
        assert!(text.contains("[2 tool result]\n<- result of `grep`:"));
        assert!(text.contains("characters omitted"));
        assert!(text.len() < 2_500);
    }

    #[test]
    fn prompts_name_every_section_and_the_inputs() {
        let system = system_prompt();
        for index in 0..9 {
            assert!(system.contains(&section_heading(index)));
        }
        let update = SummaryRequest::Summarize {
            messages: vec![],
            previous_summary: Some("old facts".into()),
            max_tokens: 700,
        };
        let user = user_prompt(&update, &TranscriptLimits::default());
        assert!(user.contains("<previous_summary>\nold facts"));
        assert!(user.contains("700 tokens"));
        assert!(!user.contains("<transcript>"));
        let merge = SummaryRequest::Merge {
            partials: vec!["part one".into(), "part two".into()],
            max_tokens: 700,
        };
        let user = user_prompt(&merge, &TranscriptLimits::default());
        assert!(user.contains("<chunk 2>\npart two\n</chunk 2>"));
        assert!(user.contains("700 tokens"));
        assert!(!user.contains("<transcript>"));
    }
}
