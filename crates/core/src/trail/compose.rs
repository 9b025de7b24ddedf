//! Where the trail goes: after the notice of ③ and ⑤ level 3, into sections 3, 4 and 6 of
//! ④'s summary, and what a step reports about it. The strategies call these; the trail's
//! content is decided elsewhere (extract, render).

use super::render::{COMMANDS, ERRORS, FILES, FILES_UNDER, LEFT_OUT, REQUESTS};
use super::{Rendered, Trail, TrailConfig, TrailStats};
use crate::estimate::Estimator;
use crate::summarizer::{heading_index, section_heading};

/// Summary sections (0-based) that always carry the trail: 3 files, 4 errors, 6 requests.
const FILES_SECTION: usize = 2;
const ERRORS_SECTION: usize = 3;
const REQUESTS_SECTION: usize = 5;

impl Rendered {
    /// What a step reports about this trail, which costs `tokens`.
    pub(crate) fn stats(&self, tokens: u64) -> TrailStats {
        TrailStats {
            requests: self.requests.len(),
            errors: self.errors.len(),
            files: self.files_shown,
            commands: self.commands.len(),
            left_out: self.left_out.requests
                + self.left_out.errors
                + self.left_out.files
                + self.left_out.commands,
            tokens,
        }
    }
}

/// The trail rendered within the smaller of its own budget and `room` tokens.
pub(crate) fn render_for(
    trail: &Trail,
    config: &TrailConfig,
    effective: u64,
    room: u64,
    estimator: &Estimator,
) -> Rendered {
    if !config.enabled {
        return Rendered::default();
    }
    trail.render_within(config.budget(effective).min(room), estimator)
}

/// A notice followed by its trail: the marker stays the first line, exactly.
pub(crate) fn notice_with_trail(marker: String, rendered: &Rendered) -> String {
    let text = rendered.text();
    if text.is_empty() {
        marker
    } else {
        format!("{marker}\n{text}")
    }
}

/// `body` with the trail's files, errors and requests at the end of sections 3, 4 and 6,
/// whatever the summarizer wrote there (a section the body lacks is added at its end).
/// Each block keeps its heading, so that a later compaction parses it back and merges it.
pub(crate) fn complete_summary(body: &str, rendered: &Rendered) -> String {
    let mut blocks: [String; 9] = Default::default();
    blocks[FILES_SECTION] = Rendered::block(&rendered.files_heading, &rendered.files);
    blocks[ERRORS_SECTION] = Rendered::block(ERRORS, &rendered.errors);
    let mut requests = Rendered::block(REQUESTS, &rendered.requests);
    if let Some(line) = rendered.left_out_line() {
        requests = if requests.is_empty() {
            line
        } else {
            format!("{requests}\n{line}")
        };
    }
    blocks[REQUESTS_SECTION] = requests;
    if blocks.iter().all(String::is_empty) {
        return body.to_owned();
    }
    let mut out: Vec<String> = Vec::new();
    let mut done = [false; 9];
    let mut current = 0usize;
    let close = |out: &mut Vec<String>, done: &mut [bool; 9], section: usize| {
        if !done[section] && !blocks[section].is_empty() {
            // Summaries end a section with a blank line; the block goes before it.
            let blank = out.last().is_some_and(|l| l.trim().is_empty());
            if blank {
                out.pop();
            }
            out.push(blocks[section].clone());
            if blank {
                out.push(String::new());
            }
        }
        done[section] = true;
    };
    for line in without_trail(body).trim_end().lines() {
        if let Some(index) = heading_index(line) {
            if !out.is_empty() {
                close(&mut out, &mut done, current);
            }
            current = index;
        }
        out.push(line.to_owned());
    }
    close(&mut out, &mut done, current);
    for section in [FILES_SECTION, ERRORS_SECTION, REQUESTS_SECTION] {
        if !done[section] && !blocks[section].is_empty() {
            out.push(String::new());
            out.push(section_heading(section));
            out.push(blocks[section].clone());
        }
    }
    out.join("\n")
}

/// `body` without the trail blocks a summarizer copied into it (from the previous summary
/// it updates, or a summary in the messages it read): the trail written after it already
/// holds them, merged, and a second copy would be read back twice by a later compaction —
/// its entries listed twice and its `Left out for space` counts added twice.
fn without_trail(body: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut in_block = false;
    for line in body.lines() {
        let t = line.trim_end();
        if [REQUESTS, ERRORS, FILES, COMMANDS].contains(&t) || t.starts_with(FILES_UNDER) {
            in_block = true;
            continue;
        }
        if in_block && (line.starts_with("- ") || line.starts_with("  ")) {
            continue;
        }
        in_block = false;
        if !line.starts_with(LEFT_OUT) {
            out.push(line);
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered() -> Rendered {
        Rendered {
            requests: vec!["- fix the bug".into()],
            errors: vec!["- E0308: mismatched types".into()],
            files: vec!["- src/lib.rs — edited".into()],
            files_heading: super::super::render::FILES.into(),
            ..Rendered::default()
        }
    }

    #[test]
    fn a_summary_carries_the_trail_in_its_sections_and_parses_back() {
        let body = format!(
            "{}\n- goal\n\n{}\n- a.rs\n\n{}\n- none\n",
            section_heading(0),
            section_heading(2),
            section_heading(3)
        );
        let done = complete_summary(&body, &rendered());
        let sections = crate::summarizer::split_sections(&done);
        assert!(sections[2].iter().any(|l| l == "- src/lib.rs — edited"));
        assert!(sections[3].iter().any(|l| l == "- E0308: mismatched types"));
        assert!(sections[5].iter().any(|l| l == "- fix the bug"));
        let parsed = Trail::parse(&done);
        assert_eq!(parsed.files.len(), 1);
        assert_eq!(parsed.errors.len(), 1);
        assert_eq!(parsed.requests, vec!["fix the bug".to_owned()]);
        // The summarizer's own lines are not taken for trail entries.
        assert!(parsed.files.iter().all(|f| f.path != "a.rs"));
    }

    #[test]
    fn a_summary_updated_from_one_with_a_trail_carries_it_once() {
        use crate::estimate::Estimator;
        use crate::summarizer::SummaryRequest;
        let earlier = Trail {
            requests: vec!["fix the bug".into()],
            files: (0..30)
                .map(|i| super::super::FileEntry {
                    path: format!("/p/src/f{i}.rs"),
                    ops: vec![crate::tool_names::FileOp::Read],
                    touches: 1,
                    handle: None,
                })
                .collect(),
            ..Trail::default()
        };
        let estimator = Estimator::default();
        // Rendered small: some files left out, counted.
        let first = earlier.render_within(120, &estimator);
        assert!(first.left_out.files > 0);
        let previous = complete_summary(&format!("{}\n- goal", section_heading(0)), &first);
        // The offline summarizer updates the previous summary, copying its sections.
        let request = SummaryRequest::Summarize {
            messages: Vec::new(),
            previous_summary: Some(previous.clone()),
            max_tokens: 4_000,
        };
        let body = crate::offline::OfflineSummarizer::default()
            .summarize_now(&request)
            .unwrap();
        // The step's trail is the earlier one merged (nothing new was removed).
        let merged = Trail::default().merge(Trail::parse(&previous));
        let done = complete_summary(&body, &merged.render_within(4_000, &estimator));
        assert_eq!(done.matches(LEFT_OUT).count(), 1, "{done}");
        let parsed = Trail::parse(&done);
        assert_eq!(parsed.left_out, Trail::parse(&previous).left_out, "{done}");
        assert_eq!(parsed.files.len(), first.files_shown, "{done}");
        assert_eq!(parsed.requests, vec!["fix the bug".to_owned()]);
    }

    #[test]
    fn the_marker_stays_the_first_line() {
        let text = notice_with_trail(
            "[context compacted: 3 earlier messages removed]".into(),
            &rendered(),
        );
        assert_eq!(
            text.lines().next(),
            Some("[context compacted: 3 earlier messages removed]")
        );
        let bare = notice_with_trail("[x]".into(), &Rendered::default());
        assert_eq!(bare, "[x]");
    }
}
