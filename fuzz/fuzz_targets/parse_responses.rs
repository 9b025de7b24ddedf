//! Bytes → OpenAI Responses body → bytes: never a panic, and what parses comes back out as
//! the same JSON (the round trip is lossless) and stays stable.
#![no_main]

use context_cascade::Format;
use libfuzzer_sys::fuzz_target;

#[path = "../round_trip.rs"]
mod round_trip;

fuzz_target!(|data: &[u8]| round_trip::check(data, Format::Responses));
