//! Ranking removed chunks for a query: BM25 (the `bm25` crate's embedder and scorer) over
//! a tokenizer made for what agents remove — code, logs, paths and commands.
//!
//! The crate's own tokenizer stems English words and drops stop words; tool output is
//! mostly identifiers, so this one splits on everything that is not a letter, digit or `_`,
//! keeps each word whole (lowercased) and adds the parts of `snake_case` and `camelCase`
//! names, so that a query for "parse config" finds `parseConfig` and `parse_config`.

use bm25::{Embedder, EmbedderBuilder, Embedding, Scorer, Tokenizer};

use super::chunk::Chunk;

/// Splits code, logs and prose into search terms.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CodeTokenizer;

impl Tokenizer for CodeTokenizer {
    fn tokenize(&self, text: &str) -> Vec<String> {
        let mut terms = Vec::new();
        for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            let whole = word.trim_matches('_');
            if whole.is_empty() || (whole.len() == 1 && !whole.as_bytes()[0].is_ascii_digit()) {
                continue;
            }
            let lower = whole.to_lowercase();
            let parts = name_parts(whole);
            if parts.len() > 1 {
                terms.extend(parts.into_iter().filter(|p| p.len() > 1));
            }
            terms.push(lower);
        }
        terms
    }
}

/// The parts of a `snake_case` or `camelCase` name, lowercased (one part for a plain word).
fn name_parts(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let mut current = String::new();
        let mut previous_lower = false;
        for ch in piece.chars() {
            if ch.is_uppercase() && previous_lower && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            previous_lower = ch.is_lowercase() || ch.is_ascii_digit();
            current.extend(ch.to_lowercase());
        }
        if !current.is_empty() {
            parts.push(current);
        }
    }
    parts
}

/// The chunks of one scope, indexed for BM25. Build it once per set of chunks: fitting
/// reads every chunk (the average length BM25 normalizes by).
pub struct Index {
    chunks: Vec<Chunk>,
    embedder: Embedder<u32, CodeTokenizer>,
    scorer: Scorer<usize, u32>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl Index {
    /// Indexes `chunks` (their order breaks ties between equal scores: earlier first).
    pub fn build(chunks: Vec<Chunk>) -> Index {
        let corpus: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        let embedder = EmbedderBuilder::<u32, CodeTokenizer>::with_tokenizer_and_fit_to_corpus(
            CodeTokenizer,
            &corpus,
        )
        .build();
        let mut scorer = Scorer::new();
        for (index, chunk) in chunks.iter().enumerate() {
            scorer.upsert(&index, embedder.embed(&chunk.text));
        }
        Index {
            chunks,
            embedder,
            scorer,
        }
    }

    /// The chunks indexed.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Every chunk that shares a term with `query`, best first, with its score: BM25,
    /// raised for a chunk with one line that holds most of the query's terms (a model asks
    /// for a line it saw: an error, a command, a definition).
    pub fn rank(&self, query: &str) -> Vec<(&Chunk, f32)> {
        let mut embedding = self.embedder.embed(query);
        dedupe_terms(&mut embedding);
        let terms = query_terms(query);
        let mut scored: Vec<(usize, f32)> = (self.scorer.matches(&embedding).into_iter())
            .map(|scored| {
                let lines = (self.chunks.get(scored.id))
                    .map_or(0.0, |chunk| line_coverage(&chunk.text, &terms));
                (scored.id, scored.score * (1.0 + LINE_WEIGHT * lines))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        (scored.into_iter())
            .filter_map(|(index, score)| Some((self.chunks.get(index)?, score)))
            .collect()
    }
}

/// How much a chunk's best line raises its BM25 score: a line with every query term
/// doubles it.
const LINE_WEIGHT: f32 = 2.0;

/// A line longer than this (minified code, a JSON blob) holds many terms by its length
/// alone: it does not count as a line that holds the query.
const LONGEST_LINE: usize = 500;

/// The query's distinct terms, whole words only (lowercased).
fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = (query.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// The share of `terms` the best single line of `text` contains (as substrings of its
/// lowercased text, so `parse` is found in `parse_config`).
fn line_coverage(text: &str, terms: &[String]) -> f32 {
    if terms.is_empty() {
        return 0.0;
    }
    let best = (text.lines())
        .filter(|line| line.len() <= LONGEST_LINE)
        .map(|line| {
            let line = line.to_lowercase();
            terms.iter().filter(|t| line.contains(t.as_str())).count()
        })
        .max()
        .unwrap_or(0);
    let share = best as f32 / terms.len() as f32;
    share * share
}

/// A query term written twice counts once.
fn dedupe_terms(embedding: &mut Embedding<u32>) {
    let mut seen = std::collections::HashSet::new();
    embedding.0.retain(|term| seen.insert(term.index));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::{Handle, Removal};

    #[test]
    fn names_are_split_into_their_parts_and_kept_whole() {
        let terms = CodeTokenizer.tokenize("parseConfig(load_file) E0308 a src/main.rs");
        for term in [
            "parse",
            "config",
            "parseconfig",
            "load",
            "file",
            "load_file",
            "e0308",
        ] {
            assert!(terms.contains(&term.to_owned()), "{term} in {terms:?}");
        }
        assert!(!terms.contains(&"a".to_owned()));
        assert!(terms.contains(&"main".to_owned()) && terms.contains(&"rs".to_owned()));
    }

    #[test]
    fn the_chunk_holding_the_rare_words_ranks_first() {
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&format!("compiling crate number {i} ok\n"));
        }
        text.push_str("error[E0425]: cannot find value `retry_budget` in this scope\n");
        for i in 0..200 {
            text.push_str(&format!("compiling crate number {i} ok\n"));
        }
        let removal = Removal {
            handle: Handle::of_result("test", "1", &text),
            text,
        };
        let index = Index::build(removal.chunks(400));
        let ranked = index.rank("cannot find retry_budget");
        let (first, _) = ranked.first().expect("a match");
        assert!(first.text.contains("E0425"), "{}", first.text);
        assert!(index.rank("zebra quagga").is_empty());
    }
}
