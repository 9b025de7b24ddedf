//! The files of a trail as a tree under their directories, written and read back:
//!
//! ```text
//! Files (most recent first; $ROOT = /home/u/spotter):
//! - $ROOT/lib/spotter_web/live/{session_live.ex edited ×3, subagent_live.ex created}
//! - $ROOT/mix.exs read
//! ```
//!
//! A long session touches dozens of files in a few directories; one line per file repeats
//! each directory dozens of times. A directory is written once per line, its files in
//! braces, each with what was done to it. When room is short the operation is kept only
//! for files that were changed (edited, created, deleted): that a file was only read is the
//! first thing to go, its name never. A path that the grouping could not read back (with
//! whitespace, braces or commas in it) is written alone in the older form `- path — ops`.
//!
//! With recall on, a line ends with the handle that holds its files' removed calls
//! (`- $ROOT/lib/{a.ex edited, b.ex} · recall 3f9a1c2b7d40`): files of one directory kept
//! under different handles go on different lines, so that each file has one handle and
//! the handle is written once per line, not once per file.

use std::collections::BTreeMap;

use super::FileEntry;
use super::handles::{split_handle, with_handle};
use crate::recall::{Handle, HandleRef};
use crate::tool_names::FileOp;

/// Files under a common directory are written relative to it: `$ROOT/lib/a.ex`, the
/// directory named once in the heading (`Files (most recent first; $ROOT = /home/u/p):`).
pub(crate) const ROOT: &str = "$ROOT";
/// A root is worth naming when at least this many files are under it.
const ROOT_MIN_FILES: usize = 3;
/// The older one-file form's separator between a path and its operations.
const DASH: &str = " — ";

/// How much a file's entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// Every operation and the touch count.
    Full,
    /// Operations and count only for files that were changed; a read is all its name says.
    Changes,
}

/// The directory most worth naming once: the one whose length times the number of files
/// under it is largest (at least [`ROOT_MIN_FILES`] files, at least two levels deep; ties:
/// the longer).
pub(crate) fn choose_root(files: &[FileEntry]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for f in files.iter().filter(|f| f.path.starts_with('/')) {
        let slashes = f.path.match_indices('/').map(|(i, _)| i).skip(2);
        for i in slashes {
            *counts.entry(&f.path[..i]).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n >= ROOT_MIN_FILES)
        .max_by_key(|(root, n)| (n * root.len(), root.len()))
        .map(|(root, _)| root.to_owned())
}

/// The path as written: relative to the root when it is under it.
pub(crate) fn display(path: &str, root: Option<&str>) -> String {
    match root.and_then(|r| path.strip_prefix(r)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{ROOT}{rest}"),
        _ => path.to_owned(),
    }
}

/// Whether a written path can sit in a group and be read back from it.
fn groupable(shown: &str) -> bool {
    !shown.contains(|c: char| c.is_whitespace() || matches!(c, '{' | '}' | ','))
        && !shown.ends_with('/')
        && shown.rfind('/').is_some_and(|i| i > 0)
}

/// `edited+read ×3`, or "" when the detail says nothing of this file.
fn what(f: &FileEntry, detail: Detail) -> String {
    let changed = |o: &FileOp| matches!(o, FileOp::Edited | FileOp::Created | FileOp::Deleted);
    let ops: Vec<&str> = match detail {
        Detail::Full => f.ops.iter().map(|o| o.label()).collect(),
        Detail::Changes => f
            .ops
            .iter()
            .filter(|o| changed(o))
            .map(|o| o.label())
            .collect(),
    };
    let mut out = ops.join("+");
    if f.touches > 1 && !ops.is_empty() {
        out.push_str(&format!(" ×{}", f.touches));
    }
    out
}

fn with_what(name: &str, what: &str) -> String {
    if what.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {what}")
    }
}

/// What files share a line by: their directory, and (recall on) the handle and part.
type GroupKey = (String, Option<(Handle, Option<u32>)>);

/// How the files are laid out: per file its group, per group the text around its members.
pub(crate) struct Layout {
    /// Per file: (its group, its text inside the group).
    pub(crate) members: Vec<(usize, String)>,
    /// Per group: the directory prefix (`$ROOT/lib/`), or `None` for a file written alone.
    pub(crate) prefixes: Vec<Option<String>>,
    /// Per group: the handle its line ends with (recall on).
    pub(crate) handles: Vec<Option<HandleRef>>,
}

impl Layout {
    /// The layout of `files` (in display order) under `root`, at `detail`.
    pub(crate) fn of(files: &[FileEntry], root: Option<&str>, detail: Detail) -> Layout {
        let mut index: BTreeMap<GroupKey, usize> = BTreeMap::new();
        let mut layout = Layout {
            members: Vec::with_capacity(files.len()),
            prefixes: Vec::new(),
            handles: Vec::new(),
        };
        for f in files {
            let shown = display(&f.path, root);
            let what = what(f, detail);
            if !groupable(&shown) {
                let text = if shown.contains(char::is_whitespace) {
                    let ops: Vec<&str> = f.ops.iter().map(|o| o.label()).collect();
                    let ops = if ops.is_empty() {
                        "used".to_owned()
                    } else {
                        ops.join(", ")
                    };
                    format!("{shown}{DASH}{ops}")
                } else {
                    with_what(&shown, &what)
                };
                layout.members.push((layout.prefixes.len(), text));
                layout.prefixes.push(None);
                layout.handles.push(f.handle);
                continue;
            }
            let slash = shown.rfind('/').unwrap_or(0);
            let (dir, name) = (&shown[..=slash], &shown[slash + 1..]);
            let key = (dir.to_owned(), f.handle.map(|h| (h.handle, h.part)));
            let group = *index.entry(key).or_insert_with(|| {
                layout.prefixes.push(Some(dir.to_owned()));
                layout.handles.push(f.handle);
                layout.prefixes.len() - 1
            });
            layout.members.push((group, with_what(name, &what)));
        }
        layout
    }

    /// The text a group costs besides its members (`- dir/{}`; a file written alone: `- `),
    /// its handle included.
    pub(crate) fn overhead(&self, group: usize) -> String {
        let text = match &self.prefixes[group] {
            Some(prefix) => format!("- {prefix}{{}}"),
            None => "- ".to_owned(),
        };
        with_handle(text, self.handles[group])
    }

    /// The text a member costs (with the separator that follows it in a group).
    pub(crate) fn member(&self, file: usize) -> String {
        let (group, text) = &self.members[file];
        match self.prefixes[*group] {
            Some(_) => format!("{text}, "),
            None => text.clone(),
        }
    }

    /// The lines of the files marked `kept`, each group where its first kept file is; a
    /// group with one kept file is written as that file's path.
    pub(crate) fn lines(&self, kept: &[bool]) -> Vec<String> {
        let mut written = vec![false; self.prefixes.len()];
        let mut lines = Vec::new();
        for (file, (group, _)) in self.members.iter().enumerate() {
            if !kept[file] || written[*group] {
                continue;
            }
            written[*group] = true;
            let members: Vec<&str> = (self.members.iter().zip(kept))
                .filter(|((g, _), k)| g == group && **k)
                .map(|((_, text), _)| text.as_str())
                .collect();
            let line = match (&self.prefixes[*group], members.as_slice()) {
                (Some(prefix), [one]) => format!("- {prefix}{one}"),
                (Some(prefix), many) => format!("- {prefix}{{{}}}", many.join(", ")),
                (None, _) => format!("- {}", members.join("")),
            };
            lines.push(with_handle(line, self.handles[*group]));
        }
        lines
    }
}

/// The files one line of the list names (`$ROOT` left for the caller to resolve).
pub(crate) fn parse_line(item: &str) -> Vec<FileEntry> {
    let (item, handle) = split_handle(item);
    let mut files = parse_files(item);
    for file in &mut files {
        file.handle = handle;
    }
    files
}

/// [`parse_line`] of a line without its handle.
fn parse_files(item: &str) -> Vec<FileEntry> {
    if let Some((path, ops)) = item.rsplit_once(DASH) {
        let (ops, touches) = split_count(ops);
        return vec![FileEntry {
            path: path.to_owned(),
            ops: ops.split(", ").filter_map(FileOp::parse).collect(),
            touches,
            handle: None,
        }];
    }
    match (item.find("/{"), item.strip_suffix('}')) {
        (Some(open), Some(body)) => {
            let prefix = &item[..=open];
            (body[open + 2..].split(", "))
                .map(|member| parse_member(prefix, member))
                .collect()
        }
        _ => vec![parse_member("", item)],
    }
}

/// `name edited+read ×3` under `prefix`.
fn parse_member(prefix: &str, member: &str) -> FileEntry {
    let mut words = member.split(' ');
    let name = words.next().unwrap_or("");
    let mut file = FileEntry {
        path: format!("{prefix}{name}"),
        ops: Vec::new(),
        touches: 1,
        handle: None,
    };
    for word in words {
        if let Some(n) = word.strip_prefix('×').and_then(|n| n.parse().ok()) {
            file.touches = n;
        } else {
            file.ops.extend(word.split('+').filter_map(FileOp::parse));
        }
    }
    file
}

/// `text ×3` → (`text`, 3); no count → 1.
pub(crate) fn split_count(text: &str) -> (&str, u32) {
    match text.rsplit_once(" ×") {
        Some((head, n)) => match n.parse::<u32>() {
            Ok(n) => (head, n),
            Err(_) => (text, 1),
        },
        None => (text, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, ops: &[FileOp], touches: u32) -> FileEntry {
        FileEntry {
            path: path.into(),
            ops: ops.to_vec(),
            touches,
            handle: None,
        }
    }

    #[test]
    fn files_are_written_as_a_tree_and_read_back() {
        let files = vec![
            file("/h/p/lib/web/live/session_live.ex", &[FileOp::Edited], 3),
            file("/h/p/mix.exs", &[FileOp::Read], 1),
            file("/h/p/lib/web/live/subagent_live.ex", &[FileOp::Created], 1),
            file("/tmp/my notes.txt", &[FileOp::Created], 1),
            file("setup.py", &[FileOp::Read, FileOp::Searched], 2),
        ];
        let root = Some("/h/p");
        let layout = Layout::of(&files, root, Detail::Full);
        let lines = layout.lines(&[true; 5]);
        assert_eq!(
            lines,
            vec![
                "- $ROOT/lib/web/live/{session_live.ex edited ×3, subagent_live.ex created}",
                "- $ROOT/mix.exs read",
                "- /tmp/my notes.txt — created",
                "- setup.py read+searched ×2",
            ]
        );
        let back: Vec<FileEntry> = lines
            .iter()
            .flat_map(|l| parse_line(&l[2..]))
            .map(|mut f| {
                f.path = f.path.replace(ROOT, "/h/p");
                f
            })
            .collect();
        let mut expected = files.clone();
        expected.swap(1, 2);
        assert_eq!(back, expected);
        // Short of room: a read is all the name says; a change keeps its operation.
        let short =
            Layout::of(&files, root, Detail::Changes).lines(&[true, true, true, false, true]);
        assert_eq!(
            short,
            vec![
                "- $ROOT/lib/web/live/{session_live.ex edited ×3, subagent_live.ex created}",
                "- $ROOT/mix.exs",
                "- setup.py",
            ]
        );
        // One kept file of a group is written as its path.
        let one = layout.lines(&[false, false, true, false, false]);
        assert_eq!(one, vec!["- $ROOT/lib/web/live/subagent_live.ex created"]);
    }
}
