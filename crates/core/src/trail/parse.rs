//! Text → trail (the inverse of `render`), and the merge of an earlier trail into a newer
//! one, so that the trail accumulates over repeated compactions.

use super::gather::shows_fixed;
use super::handles::split_handle;
use super::render::{
    COMMANDS, ERRORS, FILES, FILES_UNDER, FIXED, FROM, LEFT_OUT, REQUESTS, ROOT, SAME_SOURCE,
};
use super::{ErrorEntry, LeftOut, Trail};
use crate::extract as errors;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Requests,
    Errors,
    Files,
    Commands,
}

impl Trail {
    /// Reads back the trail rendered into `text` (a notice, a summary or any text holding
    /// one): the four headed lists and the left-out line, wherever they are. Lines that are
    /// not the trail's are ignored.
    pub(crate) fn parse(text: &str) -> Trail {
        let mut trail = Trail::default();
        let mut kind: Option<Kind> = None;
        let mut item: Option<String> = None;
        let mut root: Option<String> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("  ").filter(|_| item.is_some()) {
                if let Some(current) = &mut item {
                    current.push('\n');
                    current.push_str(rest);
                }
                continue;
            }
            if let (Some(k), Some(done)) = (kind, item.take()) {
                trail.add(k, done, root.as_deref());
            }
            let under = line
                .trim_end()
                .strip_prefix(FILES_UNDER)
                .and_then(|r| r.strip_suffix("):"));
            let heading = match line.trim_end() {
                REQUESTS => Some(Kind::Requests),
                ERRORS => Some(Kind::Errors),
                FILES => Some(Kind::Files),
                COMMANDS => Some(Kind::Commands),
                _ => under.map(|_| Kind::Files),
            };
            if heading == Some(Kind::Files) {
                root = under.map(str::to_owned);
            }
            if heading.is_some() {
                kind = heading;
            } else if let Some(rest) = line.strip_prefix("- ").filter(|_| kind.is_some()) {
                item = Some(rest.to_owned());
            } else {
                kind = None;
                if let Some(counts) = line.strip_prefix(LEFT_OUT) {
                    trail.left_out = add_left_out(trail.left_out, parse_left_out(counts));
                }
            }
        }
        if let (Some(k), Some(done)) = (kind, item) {
            trail.add(k, done, root.as_deref());
        }
        trail
    }

    fn add(&mut self, kind: Kind, item: String, root: Option<&str>) {
        match kind {
            Kind::Requests => {
                let (text, handle) = split_handle(&item);
                self.set_request_handle(text, handle);
                self.requests.push(text.to_owned());
            }
            Kind::Errors => {
                let mut error = parse_error(&item);
                let same = error.text.strip_suffix(SAME_SOURCE);
                if let (None, Some(text)) = (&error.source, same) {
                    error.text = text.to_owned();
                    error.source = self.errors.last().and_then(|e| e.source.clone());
                }
                self.errors.push(error);
            }
            Kind::Files => {
                for mut file in super::tree::parse_line(&item) {
                    let relative = file
                        .path
                        .strip_prefix(ROOT)
                        .filter(|r| r.is_empty() || r.starts_with('/'));
                    if let (Some(root), Some(rest)) = (root, relative) {
                        file.path = format!("{root}{rest}");
                    }
                    self.files.push(file);
                }
            }
            Kind::Commands => {
                let (line, handle) = split_handle(&item);
                let mut command = super::commands::parse_line(line);
                command.handle = handle;
                self.commands.push(command);
            }
        }
    }

    /// `self` (an earlier trail) with `newer` merged in: requests, errors and commands in
    /// first-seen order, each once; files most recent first (the newer trail's first), their
    /// operations and touches combined; outcomes updated (a command's latest outcome, an
    /// error fixed by either trail or by a run of the newer range); left-out counts added.
    pub(crate) fn merge(mut self, newer: Trail) -> Trail {
        for (request, handle) in &newer.request_handles {
            self.set_request_handle(request, Some(*handle));
        }
        for request in newer.requests {
            if !self.requests.contains(&request) {
                self.requests.push(request);
            }
        }
        for error in &mut self.errors {
            if !error.fixed {
                let program = error.source.as_deref().map(errors::program);
                let key = errors::key_of(&error.text);
                error.fixed =
                    program.is_some_and(|p| newer.runs.iter().any(|run| shows_fixed(run, &p, key)));
            }
        }
        for error in newer.errors {
            match self.errors.iter_mut().find(|e| e.text == error.text) {
                // Seen again in the newer range: its newer state stands.
                Some(known) => {
                    known.fixed = error.fixed;
                    known.source = error.source.or(known.source.take());
                    known.handle = error.handle.or(known.handle);
                }
                None => self.errors.push(error),
            }
        }
        self.forget_fixed_failures();
        let mut files = newer.files;
        for old in self.files {
            match files.iter_mut().find(|f| f.path == old.path) {
                Some(known) => {
                    known.touches += old.touches;
                    known.handle = known.handle.or(old.handle);
                    for op in old.ops {
                        if !known.ops.contains(&op) {
                            known.ops.push(op);
                        }
                    }
                    super::gather::drop_used(&mut known.ops);
                }
                None => files.push(old),
            }
        }
        self.files = files;
        for command in newer.commands {
            match (self.commands.iter_mut()).find(|c| c.program == command.program) {
                Some(known) => super::commands::add(known, command),
                None => self.commands.push(command),
            }
        }
        self.left_out = add_left_out(self.left_out, newer.left_out);
        self.runs = newer.runs;
        self
    }
}

fn add_left_out(a: LeftOut, b: LeftOut) -> LeftOut {
    LeftOut {
        requests: a.requests + b.requests,
        errors: a.errors + b.errors,
        files: a.files + b.files,
        commands: a.commands + b.commands,
    }
}

/// `+3 more requests, +12 more files`
fn parse_left_out(text: &str) -> LeftOut {
    let mut out = LeftOut::default();
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let count = words
            .next()
            .and_then(|n| n.strip_prefix('+'))
            .and_then(|n| n.parse::<usize>().ok());
        let (Some(count), Some("more"), Some(what)) = (count, words.next(), words.next()) else {
            continue;
        };
        match what {
            "requests" => out.requests += count,
            "errors" => out.errors += count,
            "files" => out.files += count,
            "commands" => out.commands += count,
            _ => {}
        }
    }
    out
}

/// `text (from `source`) — fixed later · recall 3f9a1c2b7d40`
fn parse_error(item: &str) -> ErrorEntry {
    let (item, handle) = split_handle(item);
    let (rest, fixed) = match item.strip_suffix(FIXED) {
        Some(rest) => (rest, true),
        None => (item, false),
    };
    let (text, source) = match rest.strip_suffix("`)").and_then(|r| r.rsplit_once(FROM)) {
        Some((text, source)) => (text, Some(source.to_owned())),
        None => (rest, None),
    };
    ErrorEntry {
        text: text.to_owned(),
        source,
        fixed,
        handle,
    }
}
