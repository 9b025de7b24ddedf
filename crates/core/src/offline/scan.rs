//! Recognizers over raw text: file paths, identifiers, error lines, plan sentences.
//!
//! All of them are single linear passes (the error finder is one compiled regex, which the
//! `regex` crate runs in linear time), because tool outputs can be hundreds of kilobytes.

use std::sync::OnceLock;

use regex::Regex;

/// File extensions that make a bare word (`setup.py`) count as a path in prose.
#[rustfmt::skip]
const FILE_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "ex", "exs", "erl", "hrl", "c",
    "h", "cc", "cpp", "cxx", "hpp", "hh", "go", "java", "kt", "kts", "rb", "php", "md", "rst",
    "txt", "json", "jsonl", "toml", "yaml", "yml", "lock", "cfg", "ini", "sh", "bash", "zsh",
    "fish", "ps1", "css", "scss", "sass", "less", "html", "htm", "xml", "svg", "sql", "csv",
    "tsv", "log", "pony", "swift", "cs", "fs", "vue", "svelte", "lua", "pl", "pm", "r", "scala",
    "zig", "dart", "m", "mm", "gradle", "env", "conf", "proto", "graphql", "ipynb", "diff",
    "patch", "heex", "eex", "leex", "nix", "tf", "dockerfile", "mk", "cmake", "gitignore",
    "lean", "hs", "ml", "mli", "clj", "cljs", "jl", "sol", "wasm", "pdf", "png", "jpg", "jpeg",
    "gif", "webp", "bin", "db", "sqlite", "out", "cfg", "properties", "bat", "cmd", "asm", "s",
];

/// How strict path recognition is: tool arguments and shell commands are mostly paths and
/// flags, prose is mostly words (`and/or` is not a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathContext {
    Command,
    Prose,
}

/// The path-like tokens of a shell command, in order. A here-document (`<<'EOF'`, often a
/// commit message) is prose, not arguments.
pub(crate) fn command_paths(command: &str) -> impl Iterator<Item = &str> {
    let (args, heredoc) = command.split_once("<<").unwrap_or((command, ""));
    paths_in(args, PathContext::Command).chain(paths_in(heredoc, PathContext::Prose))
}

/// The path-like tokens of `text`, in order (not de-duplicated).
pub(crate) fn paths_in(text: &str, context: PathContext) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '|' | ';' | '&'))
        .filter_map(move |token| clean_path(token, context))
}

/// The path a token names, if it looks like one.
pub(crate) fn clean_path(token: &str, context: PathContext) -> Option<&str> {
    // Most tokens are words: a path has a slash or a dot somewhere.
    if token.len() < 3 || !token.bytes().any(|b| b == b'/' || b == b'.') {
        return None;
    }
    if token.contains("</") || token.contains("/>") {
        return None; // markup, not a path
    }
    let token = token.trim_matches(|c: char| "\"'`()[]{}<>,;*".contains(c));
    if token.contains("://") || token.starts_with('-') && !token.contains('=') {
        return None;
    }
    // `--out=/tmp/x`, `KEY=path`
    let token = token.rsplit_once('=').map_or(token, |(_, v)| v);
    // grep output: `src/lib.rs:12:fn x` names `src/lib.rs`
    let token = token.split(':').next().unwrap_or("");
    let token = token.trim_end_matches(['.', ',', ')']);
    if token.len() < 3 || token.len() > 300 || !token.chars().all(is_path_char) {
        return None;
    }
    if !token.chars().any(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let last = token.rsplit('/').next().unwrap_or(token);
    let has_known_extension = last
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && is_known_extension(ext));
    if token.contains('/') {
        let anchored = ["/", "./", "../", "~/"]
            .iter()
            .any(|p| token.starts_with(p));
        let ok = match context {
            PathContext::Command => !token.contains("//") && token != "./" && token != "../",
            // `/tmp/x` yes, `/div` or `/sessions/` (a route, a tag) no.
            PathContext::Prose => {
                let segments = token.split('/').filter(|s| !s.is_empty()).count();
                (anchored && segments >= 2 || has_known_extension) && !token.contains("//")
            }
        };
        return ok.then_some(token);
    }
    has_known_extension.then_some(token)
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~' | '@' | '+' | '#' | '%')
}

fn is_known_extension(ext: &str) -> bool {
    FILE_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext))
}

/// Calls `found` for each identifier-like word of `text` that names a concept: `CamelCase`,
/// `lowerCamel`, `snake_case` and `name(` calls. Words glued to `/` are path segments and
/// skipped; so are ids full of digits (`toolu_01UwLn...`).
pub(crate) fn identifiers_in(text: &str, mut found: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_alphabetic() || b == b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        let before = start.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i).copied();
        // Part of a longer non-ASCII word, a path, or a number: not an identifier.
        let glued = |c: Option<u8>| c.is_some_and(|c| c == b'/' || c >= 0x80);
        if glued(before) || glued(after) {
            continue;
        }
        let word = &text[start..i];
        if is_identifier(word, after == Some(b'(')) {
            found(word);
        }
    }
}

fn is_identifier(word: &str, called: bool) -> bool {
    let len = word.len();
    if !(4..=64).contains(&len) || word.bytes().filter(u8::is_ascii_digit).count() > 3 {
        return false;
    }
    let core = word.trim_matches('_');
    let snake = core.contains('_') && core.bytes().any(|b| b.is_ascii_lowercase());
    let bytes = core.as_bytes();
    let camel = bytes
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    let function = called && !COMMON_CALLS.contains(&word);
    snake || camel || function
}

/// Words followed by `(` that are keywords or prose, not names worth listing.
const COMMON_CALLS: &[&str] = &[
    "print", "return", "while", "switch", "assert", "format", "catch", "function", "super",
    "typeof", "sizeof", "defined", "note", "see", "both", "that", "this", "with", "from", "these",
    "those", "each", "here", "there", "which", "only", "also", "then", "when", "like",
];

/// The error-line finder (built once).
// A static pattern that does not compile is a bug the tests catch on the first summary, not
// a rule to drop silently.
#[allow(clippy::expect_used)]
fn error_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // ASCII-only (`(?-u)`): Unicode word boundaries would make the regex engine leave
        // its fast DFA on any non-ASCII output.
        Regex::new(concat!(
            r"(?-u)\b[A-Z][A-Za-z]*(?:Error|Exception)\b",
            r"|(?i:\berror\b\s*(?:[:\[(]|\d))",
            r"|(?m:^\s*(?i:error)\b)",
            r"|Traceback \(most recent call last\)",
            r"|\bFAILED\b|\bFAIL:|\bFAILURE\b",
            r"|panicked at",
            r"|(?i:\bexception\b)",
            r"|(?i:\bexit(?:ed)?(?: with)? (?:code|status):? ?-?[1-9]\d*)",
            r"|(?i:\bfatal:)",
            r"|(?i:command not found|no such file or directory|permission denied)",
            r"|(?i:\b[1-9]\d* (?:failures?|failed|errors?)\b)",
            r"|(?i:segmentation fault|core dumped)",
            r"|<tool_use_error>",
        ))
        .expect("the static error pattern compiles")
    })
}

/// The failure finder for tools whose output is file content (reads, searches, edits):
/// only their first line is looked at, and only for a tool's own failure message, because
/// the content itself is full of `ParseError`s and `raise ValueError`s that are code.
#[allow(clippy::expect_used)]
fn failure_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"(?-u)(?i)^\s*(?:<tool_use_error>|error\b|failed\b|exception\b|fatal\b)",
            r"|(?i:no such file or directory|does not exist|permission denied|not found)",
        ))
        .expect("the static failure pattern compiles")
    })
}

/// The failure message a file-content tool returned instead of content, if any: its first
/// two non-empty lines (an `ERROR:` line says little without the next one).
pub(crate) fn failure_head(text: &str) -> Option<String> {
    let re = failure_regex();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next()?;
    let first = &first[..floor_char_boundary(first, first.len().min(500))];
    if !re.is_match(first) {
        return None;
    }
    let mut out = first.to_owned();
    if let Some(second) = lines.next() {
        out.push(' ');
        out.push_str(&second[..floor_char_boundary(second, second.len().min(300))]);
    }
    Some(out)
}

/// The distinct lines of `text` that report an error, at most `max` of them, each with the
/// byte offset of the match in its line (so that a long line is quoted around the error).
/// Returns them and how many more error lines there were.
pub(crate) fn error_lines(text: &str, max: usize) -> (Vec<&str>, usize) {
    let re = error_regex();
    let mut lines: Vec<&str> = Vec::new();
    let mut more = 0usize;
    let mut taken_until = 0usize;
    for m in re.find_iter(text) {
        if m.start() < taken_until {
            continue;
        }
        let line_start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[m.end()..]
            .find('\n')
            .map_or(text.len(), |i| m.end() + i);
        taken_until = line_end;
        // Quote a long line from shortly before the match, not from its start.
        let from = floor_char_boundary(text, line_start.max(m.start().saturating_sub(80)));
        let line = text[from..line_end].trim();
        if lines.contains(&line) {
            continue;
        }
        if lines.len() < max {
            lines.push(line);
        } else {
            more += 1;
        }
    }
    (lines, more)
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The sentences of a text: split at line ends and after `.`, `!` or `?` followed by a
/// space (so `src/lib.rs` and `e.g.` inside a sentence do not split it), trimmed.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ends = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace);
            if ends {
                out.push(line[start..=i].trim());
                start = i + 1;
            }
        }
        out.push(line[start..].trim());
    }
    out.retain(|s| s.len() > 3);
    out
}

/// Words of a sentence that state a plan or a reason.
const PLAN_WORDS: &[&str] = &[
    "i'll ",
    "i will ",
    "let me ",
    "let's ",
    "i need to",
    "i'm going to",
    "we need to",
    "the plan",
    "my plan",
    "approach",
    "first,",
    "next,",
    "then i",
    "because",
    "the issue",
    "the problem",
    "root cause",
    "the fix",
    "instead",
    "i should",
    "we should",
    "now i",
    "strategy",
];

/// Whether a sentence of the assistant states a plan or a reason.
pub(crate) fn is_plan(sentence: &str) -> bool {
    contains_any_lowercase(sentence, PLAN_WORDS)
}

/// Words of a user sentence that make it a request or a constraint.
const CONSTRAINT_WORDS: &[&str] = &[
    "must",
    "don't",
    "do not",
    "never",
    "always",
    "should",
    "make sure",
    "ensure",
    "only ",
    "instead",
    "please",
    "need",
    "want",
    "remember",
    "prefer",
    "avoid",
    "without",
    "can you",
    "could you",
    "keep ",
    "use ",
    "don’t",
];

/// Whether a user sentence asks for something or constrains how.
pub(crate) fn is_constraint(sentence: &str) -> bool {
    contains_any_lowercase(sentence, CONSTRAINT_WORDS)
}

/// Markers of an open task in a line.
const TODO_WORDS: &[&str] = &[
    "todo",
    "- [ ]",
    "* [ ]",
    "next i will",
    "next, i will",
    "remaining",
    "still need",
    "left to do",
    "not yet done",
    "fixme",
];

/// Whether a line states an open task.
pub(crate) fn is_todo_line(line: &str) -> bool {
    contains_any_lowercase(line, TODO_WORDS)
}

/// Whether a line is a ticked checklist item.
pub(crate) fn is_done_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("- [x]") || t.starts_with("* [x]") || t.starts_with("- [X]")
}

fn contains_any_lowercase(text: &str, words: &[&str]) -> bool {
    // Sentences are short; long ones are looked at only in their first 2 KB.
    let head = &text[..floor_char_boundary(text, text.len().min(2048))];
    let lower = head.to_lowercase();
    words.iter().any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_patterns_compile() {
        assert!(error_regex().is_match("error: expected one of"));
        assert!(failure_regex().is_match("Error: no such file"));
    }

    fn cmd_paths(text: &str) -> Vec<&str> {
        paths_in(text, PathContext::Command).collect()
    }

    #[test]
    fn paths_in_commands() {
        assert_eq!(
            cmd_paths("cat src/lib.rs | grep foo && ls /tmp/x/ 2>&1"),
            vec!["src/lib.rs", "/tmp/x/"]
        );
        assert_eq!(
            cmd_paths("python reproduce.py --out=/a/b.txt"),
            vec!["reproduce.py", "/a/b.txt"]
        );
        assert!(cmd_paths("bd show spotter-dov.1 && git push https://x.io/a").is_empty());
        let with_heredoc: Vec<_> = command_paths(
            "git add a/b.ex && git commit -m \"$(cat <<'EOF'\nrow-class/render in c/d.ex\nEOF\n)\"",
        )
        .collect();
        assert_eq!(with_heredoc, vec!["a/b.ex", "c/d.ex"]);
    }

    #[test]
    fn paths_in_prose_are_strict() {
        let p: Vec<_> = paths_in(
            "read and/or write lib/a.ex, see ./docs/a and src/x.rs:12:3 and e.g. foo.bar </div> /live",
            PathContext::Prose,
        )
        .collect();
        assert_eq!(p, vec!["lib/a.ex", "./docs/a", "src/x.rs"]);
    }

    #[test]
    fn identifiers_are_named_concepts() {
        let mut seen = Vec::new();
        identifiers_in(
            "SessionLive uses make_pattern_type and getRetryStrategy(); if (x) see lib/foo_bar \
             toolu_01UwLnYYWGBvukzh1QE6JpfM the plain words build(",
            |w| seen.push(w.to_owned()),
        );
        assert_eq!(
            seen,
            vec![
                "SessionLive",
                "make_pattern_type",
                "getRetryStrategy",
                "build"
            ]
        );
    }

    #[test]
    fn error_lines_are_found_once() {
        let text = "ok\nerror[E0308]: mismatched types\n  --> src/a.rs:1\nerror[E0308]: mismatched types\n\
                    test result: FAILED. 1 passed; 2 failed\nExit code 0\n0 errors\nException in thread";
        let (lines, more) = error_lines(text, 10);
        assert_eq!(
            lines,
            vec![
                "error[E0308]: mismatched types",
                "test result: FAILED. 1 passed; 2 failed",
                "Exception in thread"
            ]
        );
        assert_eq!(more, 0);
        assert!(
            error_lines("all good, exit code 0, 0 failures", 3)
                .0
                .is_empty()
        );
    }

    #[test]
    fn failures_of_file_tools_are_read_from_their_first_line() {
        assert_eq!(
            failure_head("ERROR:\nNo replacement was performed.\nmore").as_deref(),
            Some("ERROR: No replacement was performed.")
        );
        assert_eq!(
            failure_head("<tool_use_error>File does not exist.</tool_use_error>").as_deref(),
            Some("<tool_use_error>File does not exist.</tool_use_error>")
        );
        assert_eq!(
            failure_head("     1→use crate::ParseError;\nraise ValueError"),
            None
        );
    }

    #[test]
    fn keywords() {
        assert!(is_plan("Let me check the file first."));
        assert!(is_constraint("Don't touch the tests."));
        assert!(is_todo_line("- [ ] write docs"));
        assert!(is_done_line("- [x] wrote docs"));
        assert!(!is_todo_line("all done"));
    }

    #[test]
    fn sentences_split_at_sentence_ends_only() {
        assert_eq!(
            sentences("Read src/lib.rs first. Then fix it!\nDone? ok"),
            vec!["Read src/lib.rs first.", "Then fix it!", "Done?"]
        );
    }
}
