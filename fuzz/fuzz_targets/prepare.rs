//! Bytes → conversation (any format) → the whole cascade at a window taken from the input,
//! with the offline summarizer → bytes: never a panic, and the property of
//! `fuzz/prepared.rs` holds (budget or a reason, valid stable output, tool pairs, system
//! and first user message kept, a fixed point).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../prepared.rs"]
mod prepared;

fuzz_target!(|data: &[u8]| prepared::check(data));
