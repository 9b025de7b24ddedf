//! Feature `exact`: lays out OpenAI's o200k_base and cl100k_base vocabularies as tables the
//! binary carries ready to use (`estimate::vocab`), so that exact counts cost no load: the
//! tables are read where they lie in the binary, page by page as counting touches them,
//! instead of being decoded into a hash map at startup (about 80 ms and 40 MB with
//! tiktoken-rs, docs/benchmarks.md §11).
//!
//! For each encoding, three files in OUT_DIR: every token's bytes in rank order
//! (`*.tokens`), where each starts (`*.offsets`, n + 1 little-endian u32) and an
//! open-addressing table of rank + 1 by the hash of the bytes (`*.slots`, little-endian
//! u32, 0 empty, linear probing, a power of two at most 40% full). The ranks come from
//! tiktoken-rs, which embeds OpenAI's published files.

#[allow(dead_code, unreachable_pub)]
#[path = "src/estimate/table_hash.rs"]
mod table_hash;

#[allow(dead_code, unreachable_pub)]
#[path = "src/estimate/char_classes.rs"]
mod char_classes;

use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/estimate/table_hash.rs");
    println!("cargo::rerun-if-changed=src/estimate/char_classes.rs");
    if std::env::var_os("CARGO_FEATURE_EXACT").is_none() {
        return;
    }
    let Some(out) = std::env::var_os("OUT_DIR") else {
        panic!("OUT_DIR is not set: run by cargo");
    };
    let out = Path::new(&out);
    write_tables(out, "o200k_base", load("o200k_base"));
    write_tables(out, "cl100k_base", load("cl100k_base"));
    write_classes(out);
}

/// `unicode_classes.rs`: every range of characters past ASCII in one of the patterns'
/// classes ([`char_classes::PATTERNS`]), in order, as `(first, last, class)`. Read here
/// from `regex-syntax`'s tables rather than at load: parsing the six classes and sorting
/// their ranges took ~0.3 ms of every process that counts exactly.
#[cfg(feature = "exact")]
fn write_classes(out: &Path) {
    use regex_syntax::hir::{Class, HirKind};
    let mut ranges = Vec::new();
    for (class, pattern) in char_classes::PATTERNS {
        let hir = regex_syntax::Parser::new()
            .parse(pattern)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"));
        let HirKind::Class(Class::Unicode(set)) = hir.kind() else {
            panic!("{pattern}: not a class");
        };
        (set.ranges().iter())
            .filter(|r| r.end() > '\u{7f}')
            .for_each(|r| ranges.push((r.start().max('\u{80}'), r.end(), class)));
    }
    ranges.sort_unstable();
    let mut source = String::from("&[\n");
    for (first, last, class) in ranges {
        let (first, last) = (u32::from(first), u32::from(last));
        source.push_str(&format!(
            "('\\u{{{first:x}}}', '\\u{{{last:x}}}', {class}),\n"
        ));
    }
    source.push_str("]\n");
    let path = out.join("unicode_classes.rs");
    std::fs::write(&path, source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[cfg(not(feature = "exact"))]
fn write_classes(_: &Path) {}

/// Every ordinary token's bytes, by rank.
#[cfg(feature = "exact")]
fn load(name: &str) -> Vec<Vec<u8>> {
    let bpe = match name {
        "o200k_base" => tiktoken_rs::o200k_base(),
        _ => tiktoken_rs::cl100k_base(),
    };
    let bpe = bpe.unwrap_or_else(|e| panic!("tiktoken-rs {name}: {e}"));
    let special: Vec<u32> = bpe
        .special_tokens()
        .into_iter()
        .flat_map(|s| bpe.encode_with_special_tokens(s))
        .collect();
    let mut tokens = Vec::new();
    for rank in 0u32.. {
        if special.contains(&rank) {
            break;
        }
        match bpe.decode_bytes(&[rank]) {
            Ok(bytes) => tokens.push(bytes),
            Err(_) => break,
        }
    }
    tokens
}

#[cfg(not(feature = "exact"))]
fn load(_: &str) -> Vec<Vec<u8>> {
    Vec::new()
}

fn write_tables(out: &Path, name: &str, tokens: Vec<Vec<u8>>) {
    assert!(tokens.len() > 1000, "{name}: only {} tokens", tokens.len());
    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity(4 * (tokens.len() + 1));
    for token in &tokens {
        offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(token);
    }
    offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    let bits = (tokens.len() as f64 / 0.4).log2().ceil() as u32;
    let capacity = 1usize << bits;
    let mut slots = vec![0u32; capacity];
    for (rank, token) in tokens.iter().enumerate() {
        let mut slot = (table_hash::hash(token) >> (64 - bits)) as usize;
        while slots[slot] != 0 {
            slot = (slot + 1) & (capacity - 1);
        }
        slots[slot] = rank as u32 + 1;
    }
    let slots: Vec<u8> = slots.iter().flat_map(|s| s.to_le_bytes()).collect();
    for (ext, data) in [("tokens", &bytes), ("offsets", &offsets), ("slots", &slots)] {
        let path = out.join(format!("{name}.{ext}"));
        std::fs::write(&path, data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
