//! ④ and ⑤ on chunked input: chunks are cut at exchange boundaries and summarized
//! concurrently, merged into one clean summary, and a failed chunk or merge degrades to the
//! chunk summaries that succeeded.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use common::degraded::{Outcome, budget, compact, recovery_steps, sessions, summaries};
use common::scripted::{Rendezvous, nine_sections};
use context_cascade::SUMMARY_PREFIX;
use context_cascade::summarizer::{SummaryError, SummaryRequest};
use context_cascade::{CascadeConfig, ContextManager, Conversation, Strategy};

/// A session whose history is well over the chunking threshold (50,000 chars).
const BIG_WINDOW: u64 = 32_000;

fn big_sessions() -> Vec<Conversation> {
    sessions(80, 2_400, 17_000, true)
}

/// The chunk requests among what the summarizer received (the merge has partials).
fn chunk_requests(requests: &[SummaryRequest]) -> Vec<&SummaryRequest> {
    requests.iter().filter(|r| !r.is_merge()).collect()
}

/// Level 1 of ⑤ after chunking: the summaries of chunks 1 to `done` of `n`, in order, then
/// the note that the rest could not be processed.
fn assert_partial_summary(outcome: &Outcome, what: &str, done: usize, n: usize) {
    assert_eq!(
        recovery_steps(&outcome.report),
        [(Strategy::Degrade, Some(1), Some(1))],
        "{what}"
    );
    assert!(outcome.report.degraded);
    let partials: Vec<String> = (1..=done)
        .map(|i| nine_sections(&format!("CHUNK{i}")))
        .collect();
    let expected = format!(
        "{SUMMARY_PREFIX}\n{}\n\n[partial summary: chunks 1-{done} of {n} summarized; the rest could not be processed]",
        partials.join("\n\n")
    );
    assert_eq!(summaries(&outcome.output), [expected], "{what}");
}

/// What the chunks hold, checked against the messages they stand for.
fn check_chunks(what: &str, chunks: &[&SummaryRequest]) {
    let n = chunks.len();
    assert!((2..=4).contains(&n), "{what}: {n} chunks");
    let sizes: Vec<usize> = chunks
        .iter()
        .map(|c| c.messages().iter().map(|m| m.text_content().len()).sum())
        .collect();
    let total: usize = sizes.iter().sum();
    assert!(total > 50_000, "{what}: only {total} chars to summarize");
    // Never more than four, however much there is.
    if total > 4 * 50_000 {
        assert_eq!(n, 4, "{what}: {total} chars in {n} chunks");
    }
    for (i, chunk) in chunks.iter().enumerate() {
        // Only the first chunk carries the previous summary; none carries it as a message.
        assert_eq!(
            chunk.previous_summary().is_some(),
            i == 0,
            "{what}: chunk {i}"
        );
        assert!(
            chunk
                .messages()
                .iter()
                .all(|m| !m.text_content().contains("OLD-SUMMARY"))
        );
        // Cut at exchange boundaries: no chunk opens with the results of a call.
        let first = &chunk.messages()[0];
        assert!(
            !first.role().is_tool_result() && !first.is_only_tool_results(),
            "{what}: chunk {i} starts inside a tool exchange"
        );
        // Similar sizes: none more than twice the average.
        assert!(sizes[i] <= 2 * total / n, "{what}: chunk sizes {sizes:?}");
    }
}

#[test]
fn a_failed_chunk_leaves_the_chunks_before_it() {
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        // Chunks 1 and 2 are summarized, chunk 3 fails, chunk 4 (if any) is summarized.
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            assert!(!request.is_merge(), "no merge after a failed chunk");
            match i {
                2 => Err(SummaryError::Failed("chunk 3: HTTP 502".into())),
                _ => Ok(nine_sections(&format!("CHUNK{}", i + 1))),
            }
        });
        let chunks = chunk_requests(&outcome.requests);
        check_chunks(&what, &chunks);
        let n = chunks.len();
        assert!(n >= 3, "{what}: chunk 3 must exist, got {n} chunks");
        assert_eq!(
            outcome.requests.len(),
            n,
            "{what}: level 1 needs no further call"
        );
        assert_partial_summary(&outcome, &what, 2, n);
    }
}

#[test]
fn a_failed_merge_keeps_every_chunk_summary() {
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            if !request.is_merge() {
                Ok(nine_sections(&format!("CHUNK{}", i + 1)))
            } else {
                Err(SummaryError::Timeout)
            }
        });
        let chunks = chunk_requests(&outcome.requests);
        check_chunks(&what, &chunks);
        let n = chunks.len();
        // One merge call, with every chunk summary in order.
        let merges: Vec<&SummaryRequest> =
            outcome.requests.iter().filter(|r| r.is_merge()).collect();
        assert_eq!(merges.len(), 1, "{what}");
        let partials: Vec<String> = (1..=n)
            .map(|i| nine_sections(&format!("CHUNK{i}")))
            .collect();
        assert_eq!(merges[0].partials(), partials, "{what}");
        assert!(merges[0].messages().is_empty());
        assert_partial_summary(&outcome, &what, n, n);
    }
}

#[test]
fn chunked_summaries_merge_into_a_clean_summary() {
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            Ok(nine_sections(&if !request.is_merge() {
                format!("CHUNK{}", i + 1)
            } else {
                "MERGED".to_owned()
            }))
        });
        let n = chunk_requests(&outcome.requests).len();
        assert_eq!(outcome.requests.len(), n + 1, "{what}");
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Summarize, Some(1), None)],
            "{what}"
        );
        assert!(!outcome.report.degraded);
        assert_eq!(
            summaries(&outcome.output),
            [format!("{SUMMARY_PREFIX}\n{}", nine_sections("MERGED"))]
        );
    }
}

#[test]
fn a_failed_first_chunk_falls_to_level_2() {
    // Level 1 needs a leading run of chunk summaries; without chunk 1 there is none.
    for original in big_sessions() {
        let what = original.format.as_str().to_owned();
        let outcome = compact(&original, BIG_WINDOW, |i, request| {
            if i == 0 {
                return Err(SummaryError::Failed("chunk 1".into()));
            }
            // The first batch: the chunk requests carry tool outputs; level 2's do not.
            let level_2 = request
                .messages()
                .iter()
                .all(|m| m.tool_results().next().is_none());
            Ok(nine_sections(if level_2 { "SMALL" } else { "CHUNK" }))
        });
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Degrade, Some(1), Some(2))],
            "{what}"
        );
        assert!(outcome.report.degraded);
        let texts = summaries(&outcome.output);
        assert_eq!(texts.len(), 1, "{what}");
        assert!(!texts[0].contains("partial summary"), "{what}");
        assert!(!texts[0].contains("CHUNK"), "{what}");
    }
}

#[test]
fn chunks_are_summarized_concurrently() {
    let original = &big_sessions()[0];
    let manager =
        ContextManager::new(CascadeConfig::default()).with_summarizer(Arc::new(Rendezvous {
            started: AtomicUsize::new(0),
        }));
    let budget = budget(&manager, original, BIG_WINDOW);
    let mut output = original.clone();
    let report = pollster::block_on(manager.compact_with_summary(&mut output, budget));
    assert_eq!(
        recovery_steps(&report),
        [(Strategy::Summarize, Some(1), None)],
        "{report:#?}"
    );
    assert_eq!(
        summaries(&output),
        [format!("{SUMMARY_PREFIX}\n{}", nine_sections("MERGED"))]
    );
}
