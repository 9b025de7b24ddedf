//! Runs `classify` over every entry of the shared overflow fixture
//! (`fixtures/overflow-errors.json`, vendored in the repository).
// Helpers beside the tests unwrap what a test would: a panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use context_cascade::{Overflow, classify};
use serde_json::Value;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/overflow-errors.json"
);

struct Entry {
    provider: String,
    http_status: Option<u16>,
    body: String,
    is_overflow: bool,
}

fn entries() -> Vec<Entry> {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture readable");
    let json: Value = serde_json::from_str(&text).expect("fixture is JSON");
    json.as_array()
        .expect("fixture is an array")
        .iter()
        .map(|e| Entry {
            provider: e["provider"].as_str().expect("provider").to_owned(),
            http_status: e["http_status"]
                .as_u64()
                .map(|s| u16::try_from(s).expect("status fits u16")),
            body: e["body"].as_str().expect("body").to_owned(),
            is_overflow: e["is_overflow"].as_bool().expect("is_overflow"),
        })
        .collect()
}

#[test]
fn every_entry_is_classified_as_labelled() {
    let entries = entries();
    assert_eq!(entries.len(), 114, "fixture size changed");
    let failures: Vec<String> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let got = classify(e.http_status, &e.body);
            (got.is_some() != e.is_overflow).then(|| {
                format!(
                    "#{i} [{}] status {:?}: expected is_overflow={}, got {got:?}\n    {}",
                    e.provider, e.http_status, e.is_overflow, e.body
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} entries misclassified:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

/// The overflow (which must exist) for the first entry whose body contains `needle`.
fn overflow_for(entries: &[Entry], needle: &str) -> Vec<Overflow> {
    let found: Vec<Overflow> = entries
        .iter()
        .filter(|e| e.body.contains(needle))
        .map(|e| classify(e.http_status, &e.body).expect("labelled overflow"))
        .collect();
    assert!(!found.is_empty(), "no fixture entry contains {needle:?}");
    found
}

fn numbers(o: &Overflow) -> (Option<u64>, Option<u64>) {
    (o.observed_tokens, o.limit_tokens)
}

#[test]
fn numbers_are_extracted_where_quoted() {
    let entries = entries();
    let cases: &[(&str, u64, u64)] = &[
        // Anthropic "prompt is too long: N tokens > M maximum".
        ("200251 tokens > 200000", 200_251, 200_000),
        ("202609 tokens > 200000", 202_609, 200_000),
        ("200049 tokens > 200000", 200_049, 200_000),
        ("209353 tokens > 199999", 209_353, 199_999),
        // Anthropic input + max_tokens.
        ("199759 + 8192 > 200000", 199_759, 200_000),
        // llama.cpp n_prompt_tokens / n_ctx.
        ("\"n_prompt_tokens\": 1407", 1_407, 256),
        ("\"n_prompt_tokens\":14429", 14_429, 8_192),
        // Gemini input token count, plain and escaped inside JSON.
        ("input token count (1200293)", 1_200_293, 1_048_576),
        ("input token count (3475108)", 3_475_108, 1_048_576),
        ("input token count (2845475)", 2_845_475, 1_048_576),
        // OpenAI, with and without the completion breakdown.
        ("your messages resulted in 4294 tokens", 4_294, 4_097),
        (
            "(3703 in the messages, 500 in the completion)",
            3_703,
            4_097,
        ),
        ("6683 in the messages, 730 in the functions", 7_413, 8_192),
        ("9969 in the", 9_969, 32_768),
        // Others that quote both numbers.
        (
            "Current length is 42328 while limit is 40000",
            42_328,
            40_000,
        ),
        ("prompt token count of 1236658", 1_236_658, 128_000),
        ("Given: 79993 `inputs` tokens", 79_993, 65_537),
        ("prompt=2782 limit=2048", 2_782, 2_048),
        ("keep the first 111490 tokens", 111_490, 32_768),
        ("Requested tokens (2285)", 2_285, 2_048),
        ("maximum prompt length is 131072", 136_973, 131_072),
        ("exceeded model token limit: 262144", 269_030, 262_144),
    ];
    let mut failures = Vec::new();
    for &(needle, observed, limit) in cases {
        for o in overflow_for(&entries, needle) {
            if numbers(&o) != (Some(observed), Some(limit)) {
                failures.push(format!(
                    "{needle:?}: expected ({observed}, {limit}), got {o:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn provider_is_recognised_for_typical_entries() {
    let entries = entries();
    let cases: &[(&str, &str)] = &[
        ("200251 tokens > 200000", "anthropic"),
        ("input token count (1200293)", "gemini"),
        ("\"n_prompt_tokens\": 1407", "llama.cpp"),
        ("Input is too long for requested model", "bedrock"),
        ("prompt=2782 limit=2048", "ollama"),
    ];
    for &(needle, provider) in cases {
        for o in overflow_for(&entries, needle) {
            assert_eq!(o.provider, Some(provider), "{needle:?}");
        }
    }
}
