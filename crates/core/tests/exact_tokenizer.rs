//! Exact counts (tiktoken-rs 0.12) equal those of tiktoken-rs 0.7, the version used before,
//! text by text: on every text of every fixture message (and each structured message's
//! JSON, the shape opaque blocks are counted in), on edge cases of the pre-tokenizing regex,
//! and on generated strings, for both encodings.
#![cfg(feature = "exact")]
// A panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use context_cascade::estimate::exact::{CHUNK_BYTES, Encoding, ExactCounter};
use proptest::prelude::*;
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/transcripts");

type Pair = (ExactCounter, tiktoken_ref::CoreBPE);

/// Both encodings: ours and tiktoken-rs's, loaded once for every test.
fn pairs() -> &'static [Pair] {
    static PAIRS: std::sync::LazyLock<Vec<Pair>> = std::sync::LazyLock::new(|| {
        vec![
            (
                ExactCounter::new(Encoding::O200kBase).unwrap(),
                tiktoken_ref::o200k_base().unwrap(),
            ),
            (
                ExactCounter::new(Encoding::Cl100kBase).unwrap(),
                tiktoken_ref::cl100k_base().unwrap(),
            ),
        ]
    });
    &PAIRS
}

/// The texts a message bills (role, name, contents, tool call names and arguments) and its
/// whole JSON.
fn texts(message: &Value) -> Vec<String> {
    // A message's JSON where it has structure (parts, tool calls): what opaque blocks bill.
    let structured = !message["content"].is_string() || message.get("tool_calls").is_some();
    let mut texts = if structured {
        vec![message.to_string()]
    } else {
        vec![]
    };
    let mut add = |v: &Value| texts.extend(v.as_str().map(str::to_owned));
    for key in ["role", "name", "content"] {
        message.get(key).map(&mut add);
    }
    for part in message["content"].as_array().into_iter().flatten() {
        part.get("text").map(&mut add);
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        add(&call["function"]["name"]);
        add(&call["function"]["arguments"]);
    }
    texts
}

fn assert_same(pairs: &[Pair], text: &str) {
    for (ours, reference) in pairs {
        assert_eq!(
            ours.count(text),
            reference.encode_ordinary(text).len(),
            "{:?} on {:?}",
            ours.encoding(),
            text.chars().take(200).collect::<String>()
        );
    }
}

#[test]
fn counts_every_fixture_message_as_tiktoken_does() {
    let pairs = pairs();
    let mut checked = 0;
    for entry in std::fs::read_dir(FIXTURES).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let fixture: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for message in fixture["messages"].as_array().unwrap() {
            for text in texts(message) {
                assert_same(pairs, &text);
                checked += 1;
            }
        }
    }
    // Every one of the ten fixtures, thousands of texts.
    assert!(checked > 5_000, "{checked} texts");
}

#[test]
fn counts_edge_cases_of_the_split_as_tiktoken_does() {
    let pairs = pairs();
    for text in [
        "",
        " ",
        "   ",
        "\n",
        "\r\n",
        " \n \n ",
        "a  b",
        "a   \n  b",
        "trailing spaces   ",
        "\ttabs\t\tand  spaces\t",
        "x \u{a0}\u{3000} y",
        "I'M HERE, it's they'RE we'll you'd",
        "1234567890 12 3.14159 1e400 -0",
        "CamelCaseWord HTTPServer iPhone ÉCOLE naïve",
        "e\u{301}\u{302}  combining marks",
        "中文字符，日本語のテキスト、한국어",
        "مرحبا بالعالم",
        "emoji 😀👍🏽👨‍👩‍👧 flags 🇫🇷",
        "path/to/file.rs:12:5\n\n\n    fn main() {}\r\n",
        "{\"command\":\"ls -la /tmp\",\"timeout\":120}",
        "<|endoftext|> <|endofprompt|>",
        "\u{feff}bom and \u{200b}zero width",
    ] {
        assert_same(pairs, text);
    }
    assert_same(pairs, &" ".repeat(5_000));
    assert_same(pairs, &"ab".repeat(10_000));
    assert_same(pairs, &"\n \t".repeat(1_000));
}

/// Texts longer than a chunk whose pieces are all shorter: the check for long pieces runs
/// the tokenizer's pattern over them (no letter is followed by a space, no digit breaks
/// them), finds none, and the count is tiktoken's, exactly.
#[test]
fn counts_long_texts_of_short_pieces_as_tiktoken_does() {
    let pairs = pairs();
    let size = 4 * CHUNK_BYTES;
    for unit in [
        "中文字符，日本語のテキスト、한국어。",
        "CamelCase_snake-case/path.ext,",
        "\u{301}é!?¿ñ",
        "=\n\t",
    ] {
        let text = unit.repeat(size / unit.len() + 1);
        assert_same(pairs, &text);
    }
}

/// A run longer than a chunk is counted in chunks: each chunk as tiktoken counts it alone,
/// which is within a token per cut of tiktoken's count of the whole run.
#[test]
fn counts_a_long_run_in_chunks_within_a_token_per_cut() {
    let cuts = 3;
    let mut seed = 23u64;
    let run: String = (0..CHUNK_BYTES * cuts + 100)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'a' + (seed % 26) as u8)
        })
        .collect();
    let mut moved = 0;
    for (ours, reference) in pairs() {
        let whole = reference.encode_ordinary(&run).len();
        let in_chunks: usize = (run.as_bytes().chunks(CHUNK_BYTES))
            .map(|chunk| {
                reference
                    .encode_ordinary(std::str::from_utf8(chunk).unwrap())
                    .len()
            })
            .sum();
        assert_eq!(ours.count(&run), in_chunks, "{:?}", ours.encoding());
        assert!(
            whole.abs_diff(in_chunks) <= cuts,
            "{whole} whole, {in_chunks} in chunks"
        );
        moved += usize::from(whole != in_chunks);
        // Around the run (a newline never joins a run of letters), the text counts as it did.
        let text = format!("before\n{run}\nafter, 42");
        let around = reference.encode_ordinary("before\n").len()
            + reference.encode_ordinary("\nafter, 42").len();
        assert_eq!(
            ours.count(&text),
            around + in_chunks,
            "{:?}",
            ours.encoding()
        );
    }
    // The run is one where cutting shows (so that the test tells cut from uncut).
    assert!(moved > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn counts_generated_strings_as_tiktoken_does(
        text in "[ \t\r\na-zA-Z0-9'.,/_(){}\u{a0}é\u{301}ß中😀]{0,60}"
    ) {
        assert_same(pairs(), &text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    /// Every class the written-out patterns tell apart, and what sits on their borders:
    /// titlecase (ǅ), modifier (ʰ) and other (中) letters, marks alone and after letters,
    /// numbers that are not digits (½, Ⅻ, ٣), spaces past ASCII (U+0085, U+2028, U+3000),
    /// contractions in any case (and ſ, which folds to s), and the slash o200k keeps after
    /// symbols.
    #[test]
    fn counts_every_class_of_the_patterns_as_tiktoken_does(
        text in "[ \t\r\n\u{b}\u{c}aZsStTdDmMlLrReEvV'/.\\-_0-9½Ⅻ٣ǅʰ中ſ\u{301}\u{85}\u{a0}\u{2028}\u{3000}😀]{0,80}"
    ) {
        assert_same(pairs(), &text);
    }

    /// Pieces longer than the short merge's arrays (128 bytes) merge through the heap.
    #[test]
    fn counts_long_pieces_as_tiktoken_does(
        text in "([a-z]{100,700}|[A-Za-z_]{120,400}|[=#*~-]{130,300}|[中文字ab]{50,200})"
    ) {
        assert_same(pairs(), &text);
    }
}
