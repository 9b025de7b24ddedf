//! The cold cost of exact token counts, per tokenizer implementation (docs/benchmarks.md §11,
//! "Cold cost of exact counts"): what a one-shot process (`cascade compact`) pays before
//! and for its first exact count of a ~100K-token request.
//!
//!     nice -n 10 cargo run --release -p context_cascade --features compare-tokenizers \
//!         --example exact_cost -- [RUNS]
//!
//! Each sample is a fresh child process (this binary with `--child IMPL`), because
//! bpe-openai loads its tables once per process into a static and a warm process would
//! hide page faults: the child loads the o200k_base tokenizer, counts every text of a
//! ~100K-token slice of the vendored fixtures once (cold), then again (warm). The parent
//! interleaves the implementations round by round and prints medians. It also splits
//! tiktoken-rs 0.7's construction into its parts (in process) and checks that every
//! implementation counts every text of every fixture message the same.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark: a failure is a failed run

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/transcripts");
/// The size of the counted slice, in o200k_base tokens.
const SLICE_TOKENS: usize = 100_000;
const IMPLS: [&str; 4] = [
    "tiktoken-rs 0.7",
    "tiktoken-rs 0.12",
    "bpe-openai 0.3",
    "tables in the binary",
];

/// Every text an exact count tokenizes, per message: role, name, text content (string or
/// parts), other parts as JSON, tool call names and arguments.
fn message_texts(message: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    texts.extend(text(message.get("role")));
    texts.extend(text(message.get("name")));
    match message.get("content") {
        Some(Value::String(s)) => texts.push(s.clone()),
        Some(Value::Array(parts)) => {
            for part in parts {
                texts.push(text(part.get("text")).unwrap_or_else(|| part.to_string()));
            }
        }
        _ => {}
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function").unwrap_or(call);
        texts.extend(text(function.get("name")));
        texts.extend(text(function.get("arguments")));
    }
    texts
}

/// Every fixture message's texts, fixtures in name order.
fn fixture_messages() -> Vec<(String, Vec<String>)> {
    let mut paths: Vec<_> = std::fs::read_dir(FIXTURES)
        .expect("fixtures/transcripts")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut messages = Vec::new();
    for path in paths {
        let body: Value = serde_json::from_slice(&std::fs::read(&path).expect("read fixture"))
            .expect("fixture JSON");
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        for message in body["messages"].as_array().into_iter().flatten() {
            messages.push((name.clone().unwrap_or_default(), message_texts(message)));
        }
    }
    messages
}

/// How many fixture messages (in order) add up to about [`SLICE_TOKENS`].
fn slice_messages(reference: &tiktoken_ref::CoreBPE) -> usize {
    let mut total = 0;
    let messages = fixture_messages();
    for (n, (_, message)) in messages.iter().enumerate() {
        if total >= SLICE_TOKENS {
            return n;
        }
        total += (message.iter())
            .map(|t| reference.encode_ordinary(t).len())
            .sum::<usize>();
    }
    messages.len()
}

/// Resident memory from `/proc/self/status` (kB): anonymous (heap) and file-backed (the
/// binary's pages, embedded tables included); zeros where there is no procfs.
fn rss() -> [f64; 2] {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        (status.lines())
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0)
    };
    [field("RssAnon:"), field("RssFile:")]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// A counter of one implementation, loaded (o200k_base, or cl100k_base for the check).
fn load(implementation: &str, cl100k: bool) -> Box<dyn Fn(&str) -> usize> {
    match implementation {
        "tiktoken-rs 0.7" => {
            let bpe = if cl100k {
                tiktoken_ref::cl100k_base()
            } else {
                tiktoken_ref::o200k_base()
            };
            let bpe = bpe.expect("tiktoken-rs 0.7");
            Box::new(move |t| bpe.encode_ordinary(t).len())
        }
        "tiktoken-rs 0.12" => {
            let bpe = if cl100k {
                tiktoken_rs::cl100k_base()
            } else {
                tiktoken_rs::o200k_base()
            };
            let bpe = bpe.expect("tiktoken-rs 0.12");
            Box::new(move |t| bpe.encode_ordinary(t).len())
        }
        "tables in the binary" => {
            use context_cascade::estimate::exact::{Encoding, ExactCounter};
            let encoding = if cl100k {
                Encoding::Cl100kBase
            } else {
                Encoding::O200kBase
            };
            let counter = ExactCounter::new(encoding).expect("tables");
            Box::new(move |t| counter.count(t))
        }
        _ => {
            let bpe = if cl100k {
                bpe_openai::cl100k_base()
            } else {
                bpe_openai::o200k_base()
            };
            Box::new(move |t| bpe.count(t))
        }
    }
}

/// In the child: load, first count, warm count (ms), the slice's tokens, and what the load
/// added to resident memory (MB, anonymous and file-backed). The texts are read before any
/// tokenizer is loaded.
fn child(implementation: &str, messages: usize) {
    let texts: Vec<String> = (fixture_messages().into_iter().take(messages))
        .flat_map(|(_, texts)| texts)
        .collect();
    let before = rss();
    let start = Instant::now();
    let count = load(implementation, false);
    let loaded = start.elapsed();
    let start = Instant::now();
    let tokens: usize = texts.iter().map(|t| count(t)).sum();
    let first = start.elapsed();
    // After the first count: tables in the binary are paged in as counting touches them.
    let after = rss();
    let start = Instant::now();
    let again: usize = texts.iter().map(|t| count(t)).sum();
    let warm = start.elapsed();
    assert_eq!(tokens, again);
    let mb = |i: usize| (after[i] - before[i]) / 1024.0;
    println!(
        "{} {} {} {tokens} {} {}",
        ms(loaded),
        ms(first),
        ms(warm),
        mb(0),
        mb(1)
    );
}

/// tiktoken-rs 0.7's `o200k_base()` split: the whole, and `CoreBPE::new` given the ranks
/// (decoder map, sorted token list, regex compile and 128 clones); the rest is the base64
/// decode of the embedded ranks into a HashMap.
fn split_tiktoken(runs: usize) {
    let reference = tiktoken_ref::o200k_base().expect("o200k_base");
    // The hasher type is tiktoken-rs's own (its rustc-hash version), inferred from `new`.
    let mut ranks = std::collections::HashMap::default();
    for rank in 0..199_998u32 {
        if let Some(bytes) = reference._decode_native_and_split(vec![rank]).next() {
            ranks.insert(bytes, rank);
        }
    }
    let pattern = [
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        "\\p{N}{1,3}",
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
        "\\s*[\\r\\n]+",
        "\\s+(?!\\S)",
        "\\s+",
    ]
    .join("|");
    let (mut whole, mut new, mut decoder, mut sorted) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let start = Instant::now();
        drop(tiktoken_ref::o200k_base().expect("o200k_base"));
        whole.push(ms(start.elapsed()));
        let copy = ranks.clone();
        let special = std::collections::HashMap::default();
        let start = Instant::now();
        drop(tiktoken_ref::CoreBPE::new(copy, special, &pattern).expect("CoreBPE::new"));
        new.push(ms(start.elapsed()));
        let start = Instant::now();
        let map: rustc_hash::FxHashMap<u32, Vec<u8>> =
            ranks.iter().map(|(k, v)| (*v, k.clone())).collect();
        decoder.push(ms(start.elapsed()));
        drop(map);
        let start = Instant::now();
        let mut list: Vec<Vec<u8>> = ranks.keys().cloned().collect();
        list.sort();
        sorted.push(ms(start.elapsed()));
        drop(list);
    }
    let (whole, new) = (median(whole), median(new));
    let (decoder, sorted) = (median(decoder), median(sorted));
    println!("\ntiktoken-rs 0.7 o200k_base(), in process, median of {runs} (ms):");
    println!("| part | ms |\n|---|---|");
    println!("| whole `o200k_base()` | {whole:.1} |");
    println!(
        "| base64 decode + HashMap (whole − `CoreBPE::new`) | {:.1} |",
        whole - new
    );
    println!("| `CoreBPE::new` | {new:.1} |");
    println!("| of which decoder map | {decoder:.1} |");
    println!("| of which sorted token list | {sorted:.1} |");
    println!(
        "| of which regex compile + 128 clones (the rest) | {:.1} |",
        new - decoder - sorted
    );
}

/// bpe-openai's load split: building its o200k pre-tokenizing regex (its patterns, copied
/// from bpe-openai 0.3.2's source); the rest of the load is deserializing its tables.
fn split_bpe_openai(runs: usize, load: f64) {
    let pat1 = [
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        "\\p{N}{1,3}",
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
        "\\s*[\\r\\n]+",
        "\\s+$",
    ]
    .join("|");
    let patterns = [pat1.as_str(), "\\s+\\s", "\\s+"];
    let mut regex = vec![];
    for _ in 0..runs {
        let start = Instant::now();
        drop(regex_automata::meta::Regex::new_many(&patterns).expect("regex"));
        regex.push(ms(start.elapsed()));
    }
    let regex = median(regex);
    println!("\nbpe-openai 0.3 o200k_base() load ({load:.1} ms in a fresh process, above):");
    println!("| part | ms |\n|---|---|");
    println!("| pre-tokenizing regex (built alone, in process) | {regex:.1} |");
    println!(
        "| deserializing the tables (the rest) | {:.1} |",
        load - regex
    );
}

/// Every text of every fixture message counted by every implementation, both encodings.
fn compare() {
    for (encoding, cl100k) in [("o200k_base", false), ("cl100k_base", true)] {
        let counters: Vec<_> = IMPLS.iter().map(|i| load(i, cl100k)).collect();
        let (mut texts, mut tokens, mut mismatches) = (0usize, 0usize, 0usize);
        for (fixture, message) in fixture_messages() {
            for text in message {
                let counts: Vec<usize> = counters.iter().map(|c| c(&text)).collect();
                texts += 1;
                tokens += counts[0];
                if counts.iter().any(|c| *c != counts[0]) {
                    mismatches += 1;
                    let head: String = text.chars().take(80).collect();
                    println!("MISMATCH in {fixture} ({encoding}): {counts:?} {head:?}");
                }
            }
        }
        println!(
            "\n{encoding} over every fixture message: {texts} texts, {tokens} tokens, \
             {mismatches} texts counted differently by {IMPLS:?}"
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        return child(&args[2], args[3].parse().expect("messages"));
    }
    let runs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(15);
    let exe = std::env::current_exe().expect("current exe");
    let messages = slice_messages(&tiktoken_ref::o200k_base().expect("o200k_base"));
    let mut samples: Vec<[Vec<f64>; 5]> = IMPLS.iter().map(|_| Default::default()).collect();
    let mut tokens = 0;
    for round in 0..runs {
        for k in 0..IMPLS.len() {
            let i = (round + k) % IMPLS.len();
            let out = Command::new(&exe)
                .args(["--child", IMPLS[i], &messages.to_string()])
                .output()
                .expect("child");
            let line = String::from_utf8_lossy(&out.stdout);
            let fields: Vec<f64> = line
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            assert_eq!(fields.len(), 6, "child {}: {line}", IMPLS[i]);
            let per_sample = [fields[0], fields[1], fields[2], fields[4], fields[5]];
            for (sample, value) in samples[i].iter_mut().zip(per_sample) {
                sample.push(value);
            }
            tokens = fields[3] as usize;
        }
    }
    println!(
        "o200k_base, fresh process per sample, median of {runs} (ms, MB); slice: {messages} \
         messages, {tokens} tokens"
    );
    println!(
        "| implementation | load | first count | load + first count | warm count | \
         resident memory load and first count add (heap + binary pages) |"
    );
    println!("|---|---|---|---|---|---|");
    let base: f64 = median(samples[0][0].clone()) + median(samples[0][1].clone());
    let bpe_load = median(samples[2][0].clone());
    for (name, [load, first, warm, anon, file]) in IMPLS.iter().zip(samples) {
        let (load, first, warm) = (median(load), median(first), median(warm));
        let (anon, file) = (median(anon), median(file));
        println!(
            "| {name} | {load:.1} | {first:.1} | {:.1} ({:.2}× 0.7) | {warm:.1} | {:.1} \
             ({anon:.1} + {file:.1}) |",
            load + first,
            (load + first) / base,
            anon + file
        );
    }
    split_tiktoken(runs);
    split_bpe_openai(runs, bpe_load);
    compare();
}
