//! With recall on, which part of a removal each trail entry points to.
//!
//! A removed range is kept under one handle, cut into chunks of [`CHUNK_CHARS`] characters
//! (the size every store cuts at). A long range is hundreds of chunks, and a recall by
//! handle answers with the first few that fit its token budget: an entry that named only
//! the handle would send the model paging through the range. So each entry names the
//! chunk that holds its subject — the last one, its latest mention: a file's path, a
//! command as run, an error's name, a request's first words — as `handle/part`. An entry
//! whose subject no chunk holds verbatim (a path a tool did not spell, a command the
//! shortening changed) names the whole removal.

use super::Trail;
use crate::extract as errors;
use crate::recall::{CHUNK_CHARS, Chunk, HandleRef, Removal};

/// With recall on, what comes before the handle that holds an entry's removed content, at
/// the end of its line (`- src/lib.rs edited · recall 3f9a1c2b7d40`). The word is the
/// tool's: a model that copies `recall 3f9a1c2b7d40` into the tool's `handle` gets it.
pub(crate) const RECALL: &str = " · recall ";

/// `line` ending with `handle`, when there is one.
pub(crate) fn with_handle(mut line: String, handle: Option<HandleRef>) -> String {
    if let Some(HandleRef { handle, part }) = handle {
        line.push_str(RECALL);
        line.push_str(&handle.to_string());
        if let Some(part) = part {
            line.push_str(&format!("/{part}"));
        }
    }
    line
}

/// An entry's text and the handle at its end, if it has one (the inverse of
/// [`with_handle`]): only 12 hex digits (and a part) after [`RECALL`] are a handle.
pub(crate) fn split_handle(item: &str) -> (&str, Option<HandleRef>) {
    let Some((text, reference)) = item.rsplit_once(RECALL) else {
        return (item, None);
    };
    let plain = reference.split('/').next().unwrap_or("");
    let handle = (plain.len() == 12 && !reference.contains(char::is_whitespace))
        .then(|| reference.parse::<HandleRef>().ok())
        .flatten();
    match handle {
        Some(handle) => (text, Some(handle)),
        None => (item, None),
    }
}

/// Characters of a request's first line that find it (a quote may be cut or re-joined).
const REQUEST_CHARS: usize = 60;

impl Trail {
    /// Points the entries read from `removal`'s range (those naming its handle without a
    /// part) at the chunk that holds each one's subject.
    pub(crate) fn point_into(&mut self, removal: &Removal) {
        let chunks = removal.chunks(CHUNK_CHARS);
        let ours = |h: &Option<HandleRef>| {
            h.is_some_and(|h| h.handle == removal.handle && h.part.is_none())
        };
        for file in self.files.iter_mut().filter(|f| ours(&f.handle)) {
            file.handle = pointed(&chunks, file.handle, [file.path.as_str()]);
        }
        for command in self.commands.iter_mut().filter(|c| ours(&c.handle)) {
            let run = (command.commands.iter().rev()).map(|c| c.trim_end_matches('…'));
            let subjects: Vec<&str> = run.chain([command.program.as_str()]).collect();
            command.handle = pointed(&chunks, command.handle, subjects);
        }
        for error in self.errors.iter_mut().filter(|e| ours(&e.handle)) {
            let key = errors::key_of(&error.text);
            error.handle = pointed(&chunks, error.handle, [key]);
        }
        let requests = std::mem::take(&mut self.request_handles);
        self.request_handles = (requests.into_iter())
            .map(|(text, handle)| {
                if !ours(&Some(handle)) {
                    return (text, handle);
                }
                let first = text.lines().next().unwrap_or("");
                let head = match first.char_indices().nth(REQUEST_CHARS) {
                    Some((at, _)) => &first[..at],
                    None => first,
                };
                let found = pointed(&chunks, Some(handle), [head.trim()]);
                (text, found.unwrap_or(handle))
            })
            .collect();
    }
}

/// `handle` with the part of the last chunk that holds the first subject any chunk holds
/// (`handle` as it is when none does).
fn pointed<'s>(
    chunks: &[Chunk],
    handle: Option<HandleRef>,
    subjects: impl IntoIterator<Item = &'s str>,
) -> Option<HandleRef> {
    let handle = handle?;
    for subject in subjects.into_iter().filter(|s| !s.trim().is_empty()) {
        if let Some(chunk) = chunks.iter().rev().find(|c| c.text.contains(subject)) {
            // A removal of one chunk is named whole: the part would add nothing.
            let part = (chunk.parts > 1).then_some(chunk.part);
            return Some(HandleRef { part, ..handle });
        }
    }
    Some(handle)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{claude_code_session, messages};
    use super::super::{Trail, TrailConfig};
    use crate::estimate::Estimator;
    use crate::recall::{HandleRef, Removal};

    /// The session's trail with recall on: extracted under the range's handle, pointed at
    /// its parts.
    fn kept(chunk_text: bool) -> (Trail, Removal) {
        let all = messages(claude_code_session());
        let mut removal = Removal::of_messages(&all.iter().collect::<Vec<_>>());
        if chunk_text {
            // Long enough for several chunks: the entries then name parts.
            removal.text = format!("{}\n{}", "filler line\n".repeat(400), removal.text);
        }
        let config = TrailConfig::default();
        let mut trail = Trail::extract_kept(&all, &[], &config, Some(removal.handle));
        trail.point_into(&removal);
        (trail, removal)
    }

    #[test]
    fn every_entry_names_the_handle_and_reads_back() {
        let (trail, removal) = kept(false);
        let text = trail.render(u64::MAX, &Estimator::default());
        let handle = format!(" · recall {}", removal.handle);
        for line in text.lines().filter(|l| l.starts_with("- ")) {
            assert!(line.ends_with(&handle), "{line}");
        }
        let mut expected = trail.clone();
        expected.runs.clear();
        assert_eq!(Trail::parse(&text), expected);
        // Without recall, the same entries and no handle: the trail of today.
        let all = messages(claude_code_session());
        let plain = Trail::extract(&all, &[], &TrailConfig::default());
        let plain_text = plain.render(u64::MAX, &Estimator::default());
        assert_eq!(text.replace(&handle, ""), plain_text);
    }

    #[test]
    fn entries_name_the_part_that_holds_their_subject() {
        let (trail, removal) = kept(true);
        let chunks = removal.chunks(crate::recall::CHUNK_CHARS);
        assert!(chunks.len() > 3);
        let part_of = |h: Option<HandleRef>| {
            let h = h.expect("a handle");
            assert_eq!(h.handle, removal.handle);
            let part = h.part.expect("a part");
            &chunks[part as usize - 1].text
        };
        for file in &trail.files {
            assert!(part_of(file.handle).contains(&file.path), "{file:?}");
        }
        for command in &trail.commands {
            let text = part_of(command.handle);
            assert!(command.commands.iter().any(|c| text.contains(c.as_str())));
        }
        for error in &trail.errors {
            let key = crate::extract::key_of(&error.text);
            assert!(part_of(error.handle).contains(key), "{error:?}");
        }
        for request in &trail.requests {
            let text = part_of(trail.request_handle(request));
            assert!(text.contains(request.as_str()), "{request}");
        }
        // The parts read back, and survive a merge into a later trail.
        let text = trail.render(u64::MAX, &Estimator::default());
        assert!(
            text.contains(&format!("recall {}/", removal.handle)),
            "{text}"
        );
        let parsed = Trail::parse(&text);
        let merged = parsed.clone().merge(Trail::default());
        let merged_again = Trail::parse(&merged.render(u64::MAX, &Estimator::default()));
        assert_eq!(merged_again.files, parsed.files);
        assert_eq!(merged_again.errors, parsed.errors);
        assert_eq!(merged_again.request_handles, parsed.request_handles);
    }

    #[test]
    fn a_handle_costs_room_and_room_is_kept() {
        let (trail, _) = kept(true);
        let all = messages(claude_code_session());
        let plain = Trail::extract(&all, &[], &TrailConfig::default());
        let estimator = Estimator::default();
        let full = estimator.text_tokens(&trail.render(u64::MAX, &estimator));
        let bare = estimator.text_tokens(&plain.render(u64::MAX, &estimator));
        assert!(full > bare);
        // What one entry's handle costs (docs/benchmarks.md §6 quotes it).
        let suffix = estimator.text_tokens(" · recall 83927ea2a559/27");
        println!("a handle on an entry: {suffix} tokens");
        assert!((8..=16).contains(&suffix), "{suffix}");
        // Within the room the bare trail takes, the handles leave something out, counted.
        let tight = trail.render_within(bare, &estimator);
        assert!(estimator.text_tokens(&tight.text()) <= bare);
        assert!(tight.left_out_line().is_some(), "{}", tight.text());
    }

    #[test]
    fn a_whole_fixture_history_with_handles_parses_back() {
        let estimator = Estimator::default();
        for (name, conversation) in super::super::fixture_tests::fixtures() {
            let all: Vec<&crate::conversation::Message> = conversation.messages.iter().collect();
            let removal = Removal::of_messages(&all);
            let config = TrailConfig::default();
            let mut trail =
                Trail::extract_kept(all.iter().copied(), [], &config, Some(removal.handle));
            trail.point_into(&removal);
            let text = trail.render(u64::MAX, &estimator);
            let mut expected = trail.clone();
            expected.runs.clear();
            let mut parsed = Trail::parse(&text);
            // Files sharing a directory and a part are written together: sorted alike.
            for files in [&mut parsed.files, &mut expected.files] {
                files.sort_by(|a, b| a.path.cmp(&b.path));
            }
            assert_eq!(parsed, expected, "{name}");
            assert!(trail.files.iter().all(|f| f.handle.is_some()), "{name}");
        }
    }

    #[test]
    fn a_summary_carries_the_handles_and_parses_back() {
        let (trail, removal) = kept(true);
        let rendered = trail.render_within(u64::MAX, &Estimator::default());
        let body = format!("{}\n- goal", crate::summarizer::section_heading(0));
        let summary = super::super::complete_summary(&body, &rendered);
        assert!(summary.contains(&format!(" · recall {}/", removal.handle)));
        let parsed = Trail::parse(&summary);
        assert_eq!(parsed.files, Trail::parse(&rendered.text()).files);
        assert_eq!(parsed.errors, trail.errors);
        assert_eq!(parsed.request_handles, trail.request_handles);
    }
}
