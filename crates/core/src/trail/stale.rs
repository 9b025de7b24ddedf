//! Stale reads: a file's content read by a tool, then changed (edited, written, deleted) or
//! read again in full by a later call. The agent must not act on the old content, and it is
//! the cheapest output to drop: ② compacts these first (SPEC.md strategy ②).

use std::collections::HashMap;

use crate::conversation::{Block, Message};
use crate::extract::call_files;
use crate::tool_names::{CallActivity, FileOp};

/// The later call that made a read stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Superseder {
    /// Index of the message that makes the call.
    pub(crate) message: usize,
    pub(crate) call_id: String,
    pub(crate) tool: String,
    /// What it did to the file ([`FileOp::Read`]: read it again).
    pub(crate) op: FileOp,
}

/// A read whose result is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaleRead {
    /// Index of the message holding the read's result.
    pub(crate) message: usize,
    /// The read's call id (the result's `tool_call_id` / `tool_use_id`).
    pub(crate) call_id: String,
    pub(crate) path: String,
    pub(crate) superseded_by: Superseder,
}

impl StaleRead {
    /// Says which later call superseded the read: `stale: src/lib.rs was edited later by Edit`.
    pub(crate) fn note(&self) -> String {
        let by = &self.superseded_by;
        let verb = match by.op {
            FileOp::Read => "read again",
            FileOp::Created => "overwritten",
            FileOp::Deleted => "deleted",
            FileOp::Edited | FileOp::Searched | FileOp::Used => "edited",
        };
        format!("stale: {} was {verb} later by {}", self.path, by.tool)
    }
}

struct PendingRead {
    call_message: usize,
    call_id: String,
    range: Option<String>,
    /// Index of the message holding its result, once seen.
    result_message: Option<usize>,
    superseded_by: Option<Superseder>,
}

/// Every read among `messages` that a later call superseded, in the order of their results.
/// A later read supersedes an earlier one only if it reads the whole file or the same lines;
/// an edit, a write or a deletion (by a file tool, or a shell step such as `sed -i` or `rm`)
/// supersedes every earlier read of the file. Only reads made by file tools are candidates
/// (a shell's output is more than the file); calls of one assistant message run in order,
/// but a call supersedes only reads issued by an earlier message.
#[cfg(test)]
pub(crate) fn stale_reads(messages: &[Message]) -> Vec<StaleRead> {
    stale_reads_and_activities(messages).0
}

/// What each call does, in the order of the calls (messages in order, each message's tool
/// calls in order): read on the way by [`stale_reads_and_activities`], so that ② need not
/// parse every call's arguments again, nor look each one up.
pub(crate) type Activities = Vec<CallActivity>;

/// [`stale_reads`], and the activity of every call.
pub(crate) fn stale_reads_and_activities(messages: &[Message]) -> (Vec<StaleRead>, Activities) {
    let mut activities = Activities::new();
    let mut pending: HashMap<String, Vec<PendingRead>> = HashMap::new();
    // call id → the paths it read (latest call with that id: ids may be reused).
    let mut reads_of_call: HashMap<String, Vec<String>> = HashMap::new();
    let mut found: Vec<StaleRead> = Vec::new();
    let mut current_file: Option<String> = None;
    for (index, message) in messages.iter().enumerate() {
        for block in message.blocks() {
            match block {
                Block::ToolCall(call) => {
                    let files = call_files(call, current_file.as_deref());
                    activities.push(files.activity);
                    let file_read = files.activity == CallActivity::File(FileOp::Read);
                    for (op, path) in &files.files {
                        let full_read = file_read && *op == FileOp::Read;
                        if !(op.changes_file() || full_read) {
                            continue;
                        }
                        let Some(reads) = pending.get_mut(path) else {
                            continue;
                        };
                        for read in reads.iter_mut().filter(|r| r.superseded_by.is_none()) {
                            let same_lines = files.range.is_none() || files.range == read.range;
                            if read.call_message < index && (op.changes_file() || same_lines) {
                                read.superseded_by = Some(Superseder {
                                    message: index,
                                    call_id: call.id.clone(),
                                    tool: call.name.clone(),
                                    op: *op,
                                });
                            }
                        }
                    }
                    if matches!(
                        files.activity,
                        CallActivity::File(FileOp::Read | FileOp::Created)
                    ) {
                        current_file = files.files.first().map(|(_, p)| p.clone());
                    }
                    if file_read {
                        let paths: Vec<String> =
                            files.files.iter().map(|(_, p)| p.clone()).collect();
                        for path in &paths {
                            pending.entry(path.clone()).or_default().push(PendingRead {
                                call_message: index,
                                call_id: call.id.clone(),
                                range: files.range.clone(),
                                result_message: None,
                                superseded_by: None,
                            });
                        }
                        reads_of_call.insert(call.id.clone(), paths);
                    }
                }
                Block::ToolResult(result) => {
                    let Some(paths) = reads_of_call.remove(&result.call_id) else {
                        continue;
                    };
                    for path in paths {
                        let read = pending.get_mut(&path).and_then(|reads| {
                            reads
                                .iter_mut()
                                .rev()
                                .find(|r| r.call_id == result.call_id && r.result_message.is_none())
                        });
                        if let Some(read) = read {
                            read.result_message = Some(index);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    for (path, reads) in pending {
        for read in reads {
            // Only reads whose result is among the messages are reported.
            let (Some(message), Some(by)) = (read.result_message, read.superseded_by) else {
                continue;
            };
            found.push(StaleRead {
                message,
                call_id: read.call_id,
                path: path.clone(),
                superseded_by: by,
            });
        }
    }
    found.sort_by(|a, b| (a.message, &a.call_id, &a.path).cmp(&(b.message, &b.call_id, &b.path)));
    (found, activities)
}
