//! File paths in tool arguments, shell commands and prose.

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
        // A path is a separator and a file name (`lib/a.ex`), or starts at a known root
        // (`/`, `./`, `../`, `~/`): `row-class/render` or `s/foo/bar/` is not a file.
        let ok = match context {
            PathContext::Command => {
                (anchored || has_known_extension)
                    && !token.contains("//")
                    && token != "./"
                    && token != "../"
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // A separator alone does not make a path: a name with a file's extension or a root.
        assert!(cmd_paths("grep row-class/render lib && sed s/foo/bar/g").is_empty());
        assert_eq!(
            cmd_paths("ls lib/spotter_web ./lib ~/x"),
            vec!["./lib", "~/x"]
        );
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
}
