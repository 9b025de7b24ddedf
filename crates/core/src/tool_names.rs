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
    // Most names are one ASCII word (`Read`, `Bash`): no namespace (those hold `.` or `:`),
    // no separator, nothing to drop, so the lowercase name is the answer. ② asks for
    // every result of the history.
    if name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return name.to_ascii_lowercase();
    }
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

/// The built-in kind of a normalized name, judging multi-command tools by their command:
/// the one classification that ② (through [`ToolPolicy`]) and the trail share.
fn classify(name: &str, arguments: &Value, kinds: &HashMap<&'static str, ToolKind>) -> ToolKind {
    if MULTI_COMMAND.contains(&name) {
        return command_of(arguments).map_or(Other, |c| command_kind(&c));
    }
    kinds.get(name).copied().unwrap_or(Other)
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

    /// What a config file lists for this policy: the names compacted beyond the built-in
    /// list, and the names never compacted (normalized, sorted).
    pub fn listed_names(&self) -> (Vec<String>, Vec<String>) {
        let builtin = ToolPolicy::default().compactable;
        let mut added: Vec<String> = self.compactable.difference(&builtin).cloned().collect();
        let mut never: Vec<String> = self.never.iter().cloned().collect();
        added.sort();
        never.sort();
        (added, never)
    }

    /// What the tool `name` did with these `arguments` (a JSON string as in OpenAI's
    /// `function.arguments`, or an object as in Anthropic's `input`). The arguments are
    /// looked at only for multi-command tools; unknown tools are [`ToolKind::Other`].
    pub fn kind(&self, name: &str, arguments: &Value) -> ToolKind {
        self.kind_of_normalized(&normalize(name), arguments)
    }

    fn kind_of_normalized(&self, name: &str, arguments: &Value) -> ToolKind {
        classify(name, arguments, &self.kinds)
    }

    /// Whether ② may replace this tool's result with the placeholder.
    pub fn is_compactable(&self, name: &str, arguments: &Value) -> bool {
        let name = normalize(name);
        // A multi-command tool with an unknown or unreadable command: keep it.
        self.compactable_by_normalized(&name)
            .unwrap_or_else(|| self.kind_of_normalized(&name, arguments).is_compactable())
    }

    /// [`ToolPolicy::is_compactable`] when the name alone decides it (`None`: a
    /// multi-command tool, whose command decides): ② asks once per tool name, not once
    /// per result.
    pub(crate) fn compactable_by_name(&self, name: &str) -> Option<bool> {
        self.compactable_by_normalized(&normalize(name))
    }

    fn compactable_by_normalized(&self, name: &str) -> Option<bool> {
        if self.never.contains(name) || !self.compactable.contains(name) {
            return Some(false);
        }
        if MULTI_COMMAND.contains(&name) {
            return None;
        }
        // Listed by config: compactable even if the built-in table does not know it.
        Some(self.kind_of_normalized(name, &Value::Null) != Write)
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

/// What a tool call did to a file, as the trail reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileOp {
    /// Read (a file tool's read, an editor's `view`, `cat` in a command).
    Read,
    /// Searched or listed (`Grep`, `Glob`, `find_file`, `ls`).
    Searched,
    /// Changed in place (`Edit`, `apply_patch`'s `Update File`, `sed -i`).
    Edited,
    /// Created or overwritten (`Write`, an editor's `create`, `> file`).
    Created,
    /// Deleted (`*** Delete File`, `rm`).
    Deleted,
    /// Named by a command or an unknown tool that does not say what it did with it.
    Used,
}

impl FileOp {
    /// Every operation, in the order of [`FileOp::label`]s that [`FileOp::parse`] reads.
    pub const ALL: [FileOp; 6] = [
        FileOp::Read,
        FileOp::Searched,
        FileOp::Edited,
        FileOp::Created,
        FileOp::Deleted,
        FileOp::Used,
    ];

    /// The word the trail writes.
    pub fn label(self) -> &'static str {
        match self {
            FileOp::Read => "read",
            FileOp::Searched => "searched",
            FileOp::Edited => "edited",
            FileOp::Created => "created",
            FileOp::Deleted => "deleted",
            FileOp::Used => "used",
        }
    }

    /// The operation a label names.
    pub fn parse(label: &str) -> Option<FileOp> {
        FileOp::ALL.into_iter().find(|op| op.label() == label)
    }

    /// Whether the operation changes the file (so an earlier read of it is stale).
    pub fn changes_file(self) -> bool {
        matches!(self, FileOp::Edited | FileOp::Created | FileOp::Deleted)
    }
}

/// What a tool call is for the trail: a file tool (with what it does to the paths in its
/// arguments), a shell tool (its `command` is listed), or anything else (its paths still
/// count, as [`FileOp::Used`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallActivity {
    /// A file tool, with what it does to the paths in its arguments.
    File(FileOp),
    /// A shell tool: its `command` is what ran.
    Command,
    /// Any other tool: only the paths in its arguments count.
    Other,
}

/// File tools that ② leaves alone (nothing to re-read) but that the trail reports.
#[rustfmt::skip]
const FILE_STATE_TOOLS: &[(&str, FileOp)] = &[
    ("createdirectory", FileOp::Created), ("movefile", FileOp::Created),
    ("deletefile", FileOp::Deleted), ("removefile", FileOp::Deleted),
];

/// Tools that move a file: the trail reports their source as deleted.
pub const MOVE_TOOLS: &[&str] = &["movefile", "renamefile", "move", "rename"];

/// What the tool `name` did with these `arguments`, for the trail. Same table and same
/// [`normalize`] as [`ToolPolicy::kind`]: `str_replace_editor` is judged by its command.
pub fn call_activity(name: &str, arguments: &Value) -> CallActivity {
    static KINDS: std::sync::OnceLock<HashMap<&'static str, ToolKind>> = std::sync::OnceLock::new();
    let name = normalize(name);
    if let Some((_, op)) = FILE_STATE_TOOLS.iter().find(|(n, _)| *n == name) {
        return CallActivity::File(*op);
    }
    match classify(&name, arguments, KINDS.get_or_init(builtin_kinds)) {
        Read => CallActivity::File(FileOp::Read),
        Search => CallActivity::File(FileOp::Searched),
        Edit => CallActivity::File(FileOp::Edited),
        Write => CallActivity::File(FileOp::Created),
        Shell => CallActivity::Command,
        Fetch | Other => CallActivity::Other,
    }
}

/// The files a Codex `apply_patch` envelope adds, updates, moves or deletes, in order
/// (`*** Update File: src/lib.rs`). Any text may hold one: the tool's `input`, or the
/// here-document of a shell command.
pub fn patch_files(text: &str) -> impl Iterator<Item = (FileOp, &str)> {
    const HEADERS: [(&str, FileOp); 4] = [
        ("*** Add File: ", FileOp::Created),
        ("*** Update File: ", FileOp::Edited),
        ("*** Delete File: ", FileOp::Deleted),
        ("*** Move to: ", FileOp::Created),
    ];
    // A text with no header is not split into lines at all (most are not patches).
    let patch = text.contains("*** ").then_some(text);
    patch.into_iter().flat_map(str::lines).filter_map(|line| {
        let line = line.trim();
        HEADERS.iter().find_map(|(prefix, op)| {
            let path = line.strip_prefix(prefix)?.trim();
            (!path.is_empty()).then_some((*op, path))
        })
    })
}

#[cfg(test)]
mod tests;
