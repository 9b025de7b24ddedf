//! The character classes of the tokenizers' patterns, as bits: shared by the build script,
//! which writes the table of every class past ASCII (`unicode_classes.rs` in OUT_DIR, read
//! from `regex-syntax`'s Unicode tables, the ones tiktoken's regex engine parses its patterns
//! with), and `estimate::pieces`, which looks characters up in it; the two must agree bit
//! for bit.

/// Uppercase or titlecase letter (`Lu`, `Lt`).
pub(crate) const UPPER: u8 = 1;
/// Lowercase letter (`Ll`).
pub(crate) const LOWER: u8 = 2;
/// Modifier or other letter (`Lm`, `Lo`): in both the upper and the lower class of o200k.
pub(crate) const OTHER: u8 = 4;
/// Mark (`M`): in both o200k classes, yet not a letter.
pub(crate) const MARK: u8 = 8;
/// Number (`N`).
pub(crate) const NUMBER: u8 = 16;
/// White space (`\s`).
pub(crate) const SPACE: u8 = 32;
/// `\r` or `\n`.
pub(crate) const NEWLINE: u8 = 64;

/// Each class bit past ASCII and the pattern class it stands for (disjoint sets): read by
/// the build script and by the test of the table it writes.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const PATTERNS: [(u8, &str); 6] = [
    (UPPER, r"[\p{Lu}\p{Lt}]"),
    (LOWER, r"\p{Ll}"),
    (OTHER, r"[\p{Lm}\p{Lo}]"),
    (MARK, r"\p{M}"),
    (NUMBER, r"\p{N}"),
    (SPACE, r"\s"),
];
