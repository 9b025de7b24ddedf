//! Any status and body → `classify`: never a panic, and an overflow never claims a limit of
//! zero tokens (a window of 0 would make every later budget impossible).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (status, body) = match data {
        [a, b, rest @ ..] => (Some(u16::from_le_bytes([*a, *b]) % 600), rest),
        _ => (None, data),
    };
    let body = String::from_utf8_lossy(body);
    if let Some(overflow) = context_cascade::classify(status, &body) {
        assert_ne!(overflow.limit_tokens, Some(0), "limit 0 from {body:?}");
    }
});
