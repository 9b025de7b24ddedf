//! Issue 13, item 7: numbers come out exactly as they came in (no 64-bit or f64 rounding),
//! and a file saved with a UTF-8 byte order mark is read like any other.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use context_cascade::Format;
use context_cascade::format::{self, WriteOptions};

fn round_trip(text: &str) -> String {
    let conversation = format::parse(text.as_bytes(), None).unwrap();
    String::from_utf8(format::to_vec(&conversation, WriteOptions::default()).unwrap()).unwrap()
}

#[test]
fn integers_beyond_64_bits_and_odd_floats_round_trip_as_written() {
    // serde_json spells an exponent `e+N`/`e-N`: the same number, digit for digit.
    for (number, written) in [
        ("18446744073709551617", "18446744073709551617"),
        ("-9223372036854775809", "-9223372036854775809"),
        (
            "123456789012345678901234567890",
            "123456789012345678901234567890",
        ),
        ("0.1", "0.1"),
        ("0.30000000000000000001", "0.30000000000000000001"),
        ("1.0", "1.0"),
        ("2.50", "2.50"),
        ("-0", "-0"),
        ("1e400", "1e+400"),
        ("1E-400", "1e-400"),
        ("6.02e+23", "6.02e+23"),
    ] {
        let body = format!(
            r#"{{"model":"m","seed":{number},"messages":[{{"role":"user","content":"hi","n":{number}}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{{"maximum":{number}}}}}}}]}}"#
        );
        assert_eq!(round_trip(&body), body.replace(number, written), "{number}");
        let anthropic = format!(
            r#"{{"system":"s","seed":{number},"messages":[{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"a","content":"x","n":{number}}}]}}]}}"#
        );
        assert_eq!(
            round_trip(&anthropic),
            anthropic.replace(number, written),
            "{number}"
        );
    }
}

#[test]
fn max_tokens_is_still_read_as_a_number() {
    let c = format::parse(br#"{"model":"m","max_tokens":1024,"messages":[]}"#, None).unwrap();
    assert_eq!(c.output_reserve(), 1024);
}

#[test]
fn a_utf8_byte_order_mark_is_accepted() {
    let body = r#"{"system":"s","messages":[{"role":"user","content":"hi"}]}"#;
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend_from_slice(body.as_bytes());
    let c = format::parse(&bytes, None).unwrap();
    assert_eq!(c.format, Format::Anthropic);
    let out = format::to_vec(&c, WriteOptions::default()).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), body);
    // Whitespace before the mark is not a mark; after it, whitespace is fine.
    let mut spaced = "\u{feff}\n  ".as_bytes().to_vec();
    spaced.extend_from_slice(body.as_bytes());
    assert!(format::parse(&spaced, None).is_ok());
    // A mark alone is still an empty input.
    let err = format::parse("\u{feff}".as_bytes(), None).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}
