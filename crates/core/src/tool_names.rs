//! Which tool results strategy ② may replace with the compaction placeholder.
//!
//! ② frees context by dropping old tool output that the model can get back by calling the
//! tool again, or that is stale anyway: file reads, listings, searches, shell output, web
//! pages, the snippets an edit tool echoes. It must never drop what cannot be recovered or
//! what the model is still acting on: the record of a file written (SPEC: never compact
//! Write/Create output), a subagent's report, the user's answer to a question, loaded
//! instructions. Agents spell the same tools differently (`Read`, `read_file`,
//! `mcp__filesystem__read_file`, `developer__text_editor`), so names are compared after
//! [`normalize`], and a multi-command tool (`str_replace_editor`) is judged by its command.
//!
//! ```
//! use context_cascade::tool_names::{ToolKind, ToolPolicy, normalize};
//! use serde_json::json;
//!
//! assert_eq!(normalize("mcp__filesystem__read_file"), "readfile");
//! let policy = ToolPolicy::default();
//! assert!(policy.is_compactable("Read", &json!({"file_path": "/src/main.rs"})));
//! let view = json!(r#"{"command": "view", "path": "/src/lib.rs"}"#);
//! assert_eq!(policy.kind("str_replace_editor", &view), ToolKind::Read);
//! let create = json!({"command": "create", "path": "/a.txt", "file_text": "hi"});
//! assert!(!policy.is_compactable("str_replace_editor", &create));
//! ```

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// What a tool does, as far as compaction is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads a file, a listing or a resource: re-readable.
    Read,
    /// Searches files, code or the web: re-runnable.
    Search,
    /// Runs a command: old output is stale once the model has acted on it.
    Shell,
    /// Fetches a web page or drives a browser: re-fetchable.
    Fetch,
    /// Edits a file in place: the result only echoes a snippet of the file.
    Edit,
    /// Creates or overwrites a file: never compacted (SPEC).
    Write,
    /// Anything else, including every unknown tool: never compacted by default.
    Other,
}

impl ToolKind {
    /// Whether results of this kind may be compacted by default.
    pub fn is_compactable(self) -> bool {
        matches!(
            self,
            ToolKind::Read | ToolKind::Search | ToolKind::Shell | ToolKind::Fetch | ToolKind::Edit
        )
    }
}

use ToolKind::{Edit, Fetch, Other, Read, Search, Shell, Write};

/// Built-in classification, by normalized name. `Other` rows are deliberate decisions for
/// known tools (the reason is next to them), not gaps.
#[rustfmt::skip]
const BUILTIN: &[(&str, ToolKind)] = &[
    // Claude Code
    ("read", Read), ("notebookread", Read), ("ls", Read),
    ("grep", Search), ("glob", Search), ("websearch", Search),
    ("bash", Shell), ("bashoutput", Shell),
    ("edit", Edit), ("multiedit", Edit), ("notebookedit", Edit),
    ("write", Write),
    ("webfetch", Fetch),
    // A subagent's report distils many calls the parent never saw; calling Task again
    // spawns a new subagent at full cost and may answer differently: not re-fetchable.
    ("task", Other), ("taskoutput", Other), ("agent", Other),
    // Small state the model plans with, the user's own answers, loaded instructions.
    ("todowrite", Other), ("todoread", Other), ("askuserquestion", Other), ("skill", Other),
    ("slashcommand", Other), ("exitplanmode", Other), ("killshell", Other), ("killbash", Other),
    // Codex
    ("shell", Shell), ("containerexec", Shell), ("localshell", Shell), ("execcommand", Shell),
    ("writestdin", Shell), ("unifiedexec", Shell),
    ("applypatch", Edit),
    ("readfile", Read), ("listdir", Read), ("viewimage", Read),
    ("grepfiles", Search),
    ("updateplan", Other),
    // OpenHands
    ("executebash", Shell), ("executeipythoncell", Shell), ("executepowershell", Shell),
    ("editfile", Edit), ("browser", Fetch), ("webread", Fetch), ("fetch", Fetch),
    ("think", Other), ("finish", Other), ("tasktracker", Other),
    // SWE-agent (its `insert` edits the open file; `create` makes a new one)
    ("open", Read), ("goto", Read), ("scrollup", Read), ("scrolldown", Read), ("filemap", Read),
    ("findfile", Search), ("searchdir", Search), ("searchfile", Search),
    ("insert", Edit),
    ("create", Write),
    ("submit", Other),
    // Anthropic's client tools, bare editor commands (SPEC lists `view`, `str_replace`)
    ("view", Read), ("strreplace", Edit), ("undoedit", Edit),
    ("codeexecution", Shell), ("computer", Other),
    // Cline / Roo Code
    ("writetofile", Write),
    ("replaceinfile", Edit), ("applydiff", Edit), ("insertcontent", Edit),
    ("searchandreplace", Edit),
    ("searchfiles", Search), ("listcodedefinitionnames", Search), ("codebasesearch", Search),
    ("listfiles", Read), ("accessmcpresource", Read),
    ("executecommand", Shell),
    ("browseraction", Fetch),
    ("askfollowupquestion", Other), ("attemptcompletion", Other), ("newtask", Other),
    ("planmoderespond", Other), ("usemcptool", Other), ("switchmode", Other),
    // Goose (developer__shell, developer__text_editor, computercontroller__web_scrape, ...)
    ("screencapture", Read), ("imageprocessor", Read), ("readresource", Read),
    ("webscrape", Fetch), ("automationscript", Shell),
    ("listwindows", Other), ("computercontrol", Other), ("remembermemory", Other),
    // MCP filesystem server
    ("readtextfile", Read), ("readmediafile", Read), ("readmultiplefiles", Read),
    ("listdirectory", Read), ("listdirectorywithsizes", Read), ("directorytree", Read),
    ("getfileinfo", Read), ("listalloweddirectories", Read),
    ("writefile", Write),
    // Creating a directory or moving a file records a change of state, nothing to re-read.
    ("createdirectory", Other), ("movefile", Other),
];

/// Tools whose kind depends on their `command` argument: OpenHands/SWE-agent
/// `str_replace_editor`, Anthropic's `str_replace_based_edit_tool`, Goose's
/// `developer__text_editor`.
const MULTI_COMMAND: &[&str] = &["strreplaceeditor", "strreplacebasededittool", "texteditor"];

/// Namespace prefixes some runtimes put before a function's name.
const NAMESPACE_PREFIXES: &[&str] = &["functions.", "functions:", "default_api.", "default_api:"];

/// Lowercases `name`, removes namespaces and drops separators, so that every spelling of a
/// tool compares equal: `Read File`, `read_file`, `readFile` and `functions.read_file` all
/// give `readfile`. Namespaced tools keep their last part: MCP's `mcp__server__tool` and
/// Goose's `extension__tool` (after the last `__`), `server/tool` (after the last `/`).
pub fn normalize(name: &str) -> String {
    let mut s = name.trim().to_lowercase();
    while let Some(rest) = NAMESPACE_PREFIXES
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .map(str::to_string)
    {
        s = rest;
    }
    for separator in ["__", "/"] {
        if let Some(idx) = s.rfind(separator) {
            let tail = &s[idx + separator.len()..];
            if !tail.trim_matches('_').is_empty() {
                s = tail.to_string();
            }
        }
    }
    s.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ':') && !c.is_whitespace())
        .collect()
}

/// Decides, per tool result, whether strategy ② may compact it.
///
/// The classification ([`ToolPolicy::kind`]) is built in; what is compactable is a
/// configurable list of names, and a `never` list overrides it. Write results are never
/// compacted whatever the lists say (SPEC), and an unknown tool is not compacted unless it
/// is listed: losing output the model still needs costs more than the tokens it frees.
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    kinds: HashMap<&'static str, ToolKind>,
    compactable: HashSet<String>,
    never: HashSet<String>,
}

impl Default for ToolPolicy {
    /// The built-in whitelist: every known tool of a compactable kind, and the
    /// multi-command editors (judged by command).
    fn default() -> Self {
        let compactable = BUILTIN
            .iter()
            .filter(|(_, kind)| kind.is_compactable())
            .map(|(name, _)| *name)
            .chain(MULTI_COMMAND.iter().copied())
            .map(str::to_string)
            .collect();
        ToolPolicy {
            kinds: builtin_kinds(),
            compactable,
            never: HashSet::new(),
        }
    }
}

fn builtin_kinds() -> HashMap<&'static str, ToolKind> {
    BUILTIN.iter().copied().collect()
}

fn normalized_set(names: impl IntoIterator<Item = impl AsRef<str>>) -> HashSet<String> {
    names
        .into_iter()
        .map(|n| normalize(n.as_ref()))
        .filter(|n| !n.is_empty())
        .collect()
}

impl ToolPolicy {
    /// A policy whose compactable list is exactly `compactable` (any spelling), minus
    /// `never`. The built-in classification still applies: a listed multi-command tool is
    /// compacted only for its reading and editing commands, a Write tool never.
    pub fn from_names(
        compactable: impl IntoIterator<Item = impl AsRef<str>>,
        never: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Self {
        ToolPolicy {
            kinds: builtin_kinds(),
            compactable: normalized_set(compactable),
            never: normalized_set(never),
        }
    }

    /// Extends this policy: adds names to the compactable list and to the never list
    /// (never wins). This is how config adds an agent's own tools to the built-in list.
    pub fn with_names(
        mut self,
        compactable: impl IntoIterator<Item = impl AsRef<str>>,
        never: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Self {
        self.compactable.extend(normalized_set(compactable));
        self.never.extend(normalized_set(never));
        self
    }

    /// What the tool `name` did with these `arguments` (a JSON string as in OpenAI's
    /// `function.arguments`, or an object as in Anthropic's `input`). The arguments are
    /// looked at only for multi-command tools; unknown tools are [`ToolKind::Other`].
    pub fn kind(&self, name: &str, arguments: &Value) -> ToolKind {
        self.kind_of_normalized(&normalize(name), arguments)
    }

    fn kind_of_normalized(&self, name: &str, arguments: &Value) -> ToolKind {
        if MULTI_COMMAND.contains(&name) {
            return command_of(arguments).map_or(Other, |c| command_kind(&c));
        }
        self.kinds.get(name).copied().unwrap_or(Other)
    }

    /// Whether ② may replace this tool's result with the placeholder.
    pub fn is_compactable(&self, name: &str, arguments: &Value) -> bool {
        let name = normalize(name);
        if self.never.contains(&name) || !self.compactable.contains(&name) {
            return false;
        }
        match self.kind_of_normalized(&name, arguments) {
            Write => false,
            // A multi-command tool with an unknown or unreadable command: keep it.
            kind if MULTI_COMMAND.contains(&name.as_str()) => kind.is_compactable(),
            // Listed by config: compactable even if the built-in table does not know it.
            _ => true,
        }
    }
}

/// The kind of an editor command (`view`, `create`, `str_replace`, `insert`, `undo_edit`;
/// Goose says `write` for create).
fn command_kind(command: &str) -> ToolKind {
    match normalize(command).as_str() {
        "view" | "read" => Read,
        "create" | "write" => Write,
        "strreplace" | "insert" | "undoedit" | "edit" => Edit,
        _ => Other,
    }
}

#[derive(serde::Deserialize)]
struct CommandOnly {
    #[serde(default)]
    command: Option<String>,
}

/// The `command` argument, from an object or from a JSON string. A string that is not valid
/// JSON (agents log truncated or malformed arguments) is scanned for a `"command": "..."`
/// pair, so a cut-off `create` call is still recognised as a write.
fn command_of(arguments: &Value) -> Option<String> {
    match arguments {
        Value::Object(map) => map.get("command")?.as_str().map(str::to_string),
        Value::String(text) => match serde_json::from_str::<CommandOnly>(text) {
            Ok(parsed) => parsed.command,
            Err(_) => scan_command(text),
        },
        _ => None,
    }
}

fn scan_command(text: &str) -> Option<String> {
    let key = "\"command\"";
    let mut search = text;
    while let Some(idx) = search.find(key) {
        let rest = search[idx + key.len()..].trim_start();
        if let Some(value) = rest.strip_prefix(':').map(str::trim_start) {
            if let Some(value) = value.strip_prefix('"') {
                let end = value.find('"')?;
                return Some(value[..end].to_string());
            }
        }
        search = &search[idx + key.len()..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(name: &str, args: Value) -> ToolKind {
        ToolPolicy::default().kind(name, &args)
    }

    fn compactable(name: &str, args: Value) -> bool {
        ToolPolicy::default().is_compactable(name, &args)
    }

    /// Every tool name in fixtures/transcripts/*.json (`str_replace_editor`
    /// is judged by command, below).
    #[rustfmt::skip]
    const FIXTURE_TOOLS: &[(&str, ToolKind)] = &[
        ("AskUserQuestion", Other), ("Bash", Shell), ("Edit", Edit), ("Glob", Search),
        ("Grep", Search), ("Read", Read), ("Skill", Other), ("Task", Other), ("TaskOutput", Other),
        ("WebFetch", Fetch), ("Write", Write), ("bash", Shell), ("create", Write), ("edit", Edit),
        ("execute_bash", Shell), ("find_file", Search), ("finish", Other), ("insert", Edit),
        ("open", Read), ("submit", Other), ("think", Other),
    ];

    /// Tool sets of the common agents, by their own spellings.
    #[rustfmt::skip]
    const AGENT_TOOLS: &[(&str, ToolKind)] = &[
        // Claude Code
        ("LS", Read), ("MultiEdit", Edit), ("NotebookEdit", Edit), ("WebSearch", Search),
        ("TodoWrite", Other), ("BashOutput", Shell), ("ExitPlanMode", Other),
        // Codex
        ("shell", Shell), ("exec_command", Shell), ("apply_patch", Edit), ("read_file", Read),
        ("list_dir", Read), ("grep_files", Search), ("update_plan", Other),
        ("container.exec", Shell), ("write_stdin", Shell), ("view_image", Read),
        // OpenHands
        ("execute_ipython_cell", Shell), ("browser", Fetch), ("web_read", Fetch), ("fetch", Fetch),
        ("edit_file", Edit),
        // SWE-agent
        ("goto", Read), ("scroll_up", Read), ("scroll_down", Read), ("search_dir", Search),
        ("search_file", Search),
        // Cline
        ("write_to_file", Write), ("replace_in_file", Edit), ("search_files", Search),
        ("list_files", Read), ("list_code_definition_names", Search), ("execute_command", Shell),
        ("browser_action", Fetch), ("web_fetch", Fetch), ("attempt_completion", Other),
        ("ask_followup_question", Other),
        // Goose
        ("developer__shell", Shell), ("computercontroller__web_scrape", Fetch),
        // MCP filesystem server, bare and as Claude Code names it
        ("read_text_file", Read), ("read_media_file", Read), ("read_multiple_files", Read),
        ("write_file", Write), ("mcp__filesystem__edit_file", Edit), ("create_directory", Other),
        ("list_directory", Read), ("list_directory_with_sizes", Read), ("directory_tree", Read),
        ("move_file", Other), ("mcp__filesystem__search_files", Search), ("get_file_info", Read),
        ("list_allowed_directories", Read),
        // Unknown
        ("frobnicate", Other), ("", Other),
    ];

    fn check(cases: &[(&str, ToolKind)]) {
        let none = json!("{}");
        for &(name, want) in cases {
            assert_eq!(kind(name, none.clone()), want, "{name}");
            let compact = compactable(name, none.clone());
            assert_eq!(compact, want.is_compactable(), "{name}");
        }
    }

    #[test]
    fn every_fixture_tool_name_is_classified() {
        check(FIXTURE_TOOLS);
        // str_replace_editor, with the three commands the fixtures use (OpenAI strings).
        let args = |c: &str| json!(format!(r#"{{"command": "{c}", "path": "/w/a.pony"}}"#));
        assert_eq!(kind("str_replace_editor", args("view")), Read);
        assert_eq!(kind("str_replace_editor", args("str_replace")), Edit);
        assert_eq!(kind("str_replace_editor", args("insert")), Edit);
    }

    #[test]
    fn normalize_spellings() {
        assert_eq!(normalize("read_file"), "readfile");
        assert_eq!(normalize("Read File"), "readfile");
        assert_eq!(normalize("readFile"), "readfile");
        assert_eq!(normalize("read-file"), "readfile");
        assert_eq!(normalize("mcp__filesystem__read_file"), "readfile");
        assert_eq!(normalize("mcp__my_server__list_directory"), "listdirectory");
        assert_eq!(normalize("functions.read_file"), "readfile");
        assert_eq!(normalize("functions.mcp__fs__read_file"), "readfile");
        assert_eq!(normalize("default_api:run"), "run");
        assert_eq!(normalize("developer__text_editor"), "texteditor");
        assert_eq!(normalize("filesystem/read_file"), "readfile");
        assert_eq!(normalize("container.exec"), "containerexec");
        assert_eq!(normalize("  WebFetch "), "webfetch");
        assert_eq!(normalize("__init__"), "init");
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn builtin_table_is_normalized_and_consistent() {
        let mut seen = HashSet::new();
        for (name, _) in BUILTIN {
            assert_eq!(normalize(name), *name, "table rows are normalized");
            assert!(seen.insert(*name), "duplicate row {name}");
            assert!(!MULTI_COMMAND.contains(name), "{name} is judged by command");
        }
        for name in MULTI_COMMAND {
            assert_eq!(normalize(name), *name);
        }
    }

    #[test]
    fn agent_tool_sets() {
        check(AGENT_TOOLS);
    }

    #[test]
    fn editors_are_judged_by_command() {
        for editor in [
            "str_replace_editor",
            "str_replace_based_edit_tool",
            "developer__text_editor",
        ] {
            for (command, want) in [
                ("view", Read),
                ("create", Write),
                ("write", Write),
                ("str_replace", Edit),
                ("insert", Edit),
                ("undo_edit", Edit),
                ("delete_everything", Other),
            ] {
                let object = json!({"command": command, "path": "/a"});
                assert_eq!(kind(editor, object.clone()), want, "{editor} {command}");
                let string = Value::String(object.to_string());
                assert_eq!(kind(editor, string.clone()), want, "{editor} {command}");
                assert_eq!(compactable(editor, string), want.is_compactable());
            }
        }
    }

    #[test]
    fn editor_arguments_that_do_not_say() {
        let editor = "str_replace_editor";
        for args in [
            json!({}),
            json!(null),
            json!([]),
            json!({"command": 3}),
            json!("not json at all"),
            json!(r#"{"command": 3}"#),
            json!(r#"{"path": "/a"}"#),
        ] {
            assert_eq!(kind(editor, args.clone()), Other, "{args}");
            assert!(!compactable(editor, args));
        }
    }

    #[test]
    fn invalid_json_strings_are_scanned() {
        // Truncated arguments, as agents sometimes log them.
        let cut = json!(r#"{"command": "create", "path": "/a", "file_text": "abc"#);
        assert_eq!(kind("str_replace_editor", cut), Write);
        let cut = json!(r#"{"path": "/a", "command" : "view""#);
        assert_eq!(kind("str_replace_editor", cut), Read);
        assert_eq!(
            scan_command(r#""command" 1, "command": "insert""#).as_deref(),
            Some("insert")
        );
        assert_eq!(scan_command(r#"{"command": "unterminated"#), None);
    }

    #[test]
    fn from_names_replaces_the_list() {
        let policy = ToolPolicy::from_names(["Read", "my_custom_reader", "Write"], ["x"]);
        let none = json!({});
        assert!(policy.is_compactable("read", &none));
        assert!(policy.is_compactable("MyCustomReader", &none));
        assert_eq!(policy.kind("my_custom_reader", &none), Other);
        assert!(!policy.is_compactable("Bash", &none), "not listed");
        assert!(
            !policy.is_compactable("Write", &none),
            "writes are never compacted"
        );
        assert_eq!(policy.kind("Bash", &none), Shell, "classification stays");
        let empty = ToolPolicy::from_names(Vec::<String>::new(), Vec::<String>::new());
        assert!(!empty.is_compactable("Read", &none));
    }

    #[test]
    fn with_names_extends_and_never_wins() {
        let none = json!({});
        let policy =
            ToolPolicy::default().with_names(["run_tests"], ["Bash", "str_replace_editor"]);
        assert!(policy.is_compactable("run-tests", &none));
        assert!(!policy.is_compactable("bash", &none));
        assert!(policy.is_compactable("Read", &none));
        assert!(!policy.is_compactable("str_replace_editor", &json!({"command": "view"})));
        let listed = ToolPolicy::from_names(["str_replace_editor"], Vec::<&str>::new());
        assert!(listed.is_compactable("str_replace_editor", &json!({"command": "view"})));
        assert!(!listed.is_compactable("str_replace_editor", &json!({"command": "create"})));
    }

    #[test]
    fn kind_serializes_snake_case() {
        assert_eq!(serde_json::to_value(Search).unwrap(), "search");
    }
}
