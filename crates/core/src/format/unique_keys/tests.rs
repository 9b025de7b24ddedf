#![allow(clippy::unwrap_used)] // test code: a failure is a test failure

use proptest::prelude::*;

use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");

/// The repeat `json` holds, as (path, key); `None` when it is read without one.
fn repeat_in(json: &str) -> Option<(String, String)> {
    match from_slice(json.as_bytes()) {
        Ok(_) => None,
        Err(Refused::RepeatedKey { path, key }) => Some((path, key)),
        Err(Refused::Json(error)) => panic!("not JSON: {error}"),
    }
}

/// Reads `bytes` both ways and asserts the same value or the same refusal.
fn assert_as_serde_json(bytes: &[u8]) {
    let ours = from_slice(bytes);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(theirs) => {
            let ours = ours.unwrap_or_else(|e| panic!("refused: {e:?}"));
            assert_eq!(ours, theirs);
            // Equal values may differ in key order or a number's text: the bytes do not.
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&theirs).unwrap()
            );
        }
        Err(theirs) => match ours {
            Err(Refused::Json(ours)) => {
                assert_eq!(
                    (ours.line(), ours.column()),
                    (theirs.line(), theirs.column())
                );
                assert_eq!(ours.to_string(), theirs.to_string());
            }
            other => panic!("serde_json: {theirs}; here: {other:?}"),
        },
    }
}

#[test]
fn every_fixture_reads_as_serde_json_reads_it() {
    let mut files = Vec::new();
    for folder in ["transcripts", "responses", ""] {
        for entry in std::fs::read_dir(format!("{FIXTURES}/{folder}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 12, "{files:?}");
    for path in files {
        assert_as_serde_json(&std::fs::read(&path).unwrap());
    }
}

#[test]
fn numbers_strings_and_nesting_read_as_serde_json_reads_them() {
    for json in [
        r#"{"seed": 36893488147419103232, "big": 1e400, "neg": -0, "f": 1.50, "i": -9223372036854775808}"#,
        r#"[18446744073709551615, 18446744073709551616, -9223372036854775809, 0.1e-7, 1E+2]"#,
        r#"{"s": "a\u00e9\ud83d\ude00\n\"q\"", "e": "", "n": null, "t": true, "f": false}"#,
        r#"{"a": {"b": [[], {}, [{}], {"c": [1, "2", null]}]}, "": 0}"#,
        r#"  "just a string"  "#,
        "12",
        r#"{"$serde_json::private::Number": "12.5"}"#,
        // Not JSON, in different places: the same error, line and column.
        r#"{"a": 1,}"#,
        r#"{"a": [1, 2}"#,
        r#"{"a": 01}"#,
        r#"{"a": "\x"}"#,
        "{\"a\": \"\u{1}\"}",
        r#"{"a": 1} trailing"#,
        "",
        "[1, 2",
    ] {
        assert_as_serde_json(json.as_bytes());
    }
    assert_as_serde_json(b"[\"\xff\"]");
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_as_serde_json(deep.as_bytes());
}

#[test]
fn finds_the_first_repeated_key_with_the_path_of_its_object() {
    assert_eq!(
        repeat_in(r#"{"model":"a","model":"b"}"#),
        Some(("$".into(), r#""model""#.into()))
    );
    let body = r#"{"model":"m","messages":[{"role":"user","content":"x"},
        {"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}"#;
    assert_eq!(
        repeat_in(body),
        Some(("$.messages[1].content[0]".into(), r#""text""#.into()))
    );
    assert_eq!(
        repeat_in(r#"[{"a b":{"k":1,"k":2}}]"#),
        Some((r#"$[0]["a b"]"#.into(), r#""k""#.into()))
    );
    // The first in document order, not the outermost.
    assert_eq!(
        repeat_in(r#"{"a":{"x":1,"x":2},"a":3}"#),
        Some(("$.a".into(), r#""x""#.into()))
    );
}

#[test]
fn tells_keys_apart_as_the_parser_reads_them() {
    // The same key written with an escape is the same key.
    assert_eq!(
        repeat_in(r#"{"model":1,"mod\u0065l":2}"#),
        Some(("$".into(), r#""model""#.into()))
    );
    // The same key in sibling objects, or in an object and its child, is no repeat; nor
    // is a repeat inside a string.
    assert_eq!(repeat_in(r#"[{"a":1},{"a":2}]"#), None);
    assert_eq!(
        repeat_in(r#"{"a":{"a":{"a":1}}, "b": [1.5, 1e400, null, true]}"#),
        None
    );
    assert_eq!(repeat_in(r#"{"args":"{\"p\":1,\"p\":2}"}"#), None);
}

#[test]
fn text_that_is_not_json_is_reported_as_such_even_after_a_repeat() {
    let refused = from_slice(br#"{"model":"a","model":"b","messages":["#);
    assert!(matches!(refused, Err(Refused::Json(_))), "{refused:?}");
}

#[test]
fn cuts_long_keys() {
    let long = "k".repeat(1000);
    let (path, key) = repeat_in(&format!(r#"{{"{long}":{{"a":1,"a":2}}}}"#)).unwrap();
    assert_eq!(key, r#""a""#);
    assert_eq!(path, format!("$[\"{}…\"]", "k".repeat(KEY_SHOWN)));
    let (_, key) = repeat_in(&format!(r#"{{"{long}":1,"{long}":2}}"#)).unwrap();
    assert_eq!(key, format!("\"{}…\"", "k".repeat(KEY_SHOWN)));
}

/// Any JSON value: objects with keys from a small set, so that generated objects often
/// hold a key twice once written with a repeat.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        // No brace in strings: the test below finds the first object by its `{"`.
        "\\PC{0,12}".prop_map(|s| Value::String(s.replace('{', "("))),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-c]{1,2}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Written JSON reads back as serde_json reads it, and a repeat written into one of
    /// its objects is found.
    #[test]
    fn reads_as_serde_json_and_finds_a_written_repeat(value in json()) {
        let text = serde_json::to_string(&value).unwrap();
        assert_as_serde_json(text.as_bytes());
        // Repeat the first key of the first object written.
        if let Some(open) = text.find("{\"") {
            let end = open + 1 + text[open + 1..].find("\":").unwrap() + 2;
            let key = &text[open + 1..end];
            let repeated = format!("{}{key}0,{}", &text[..open + 1], &text[open + 1..]);
            let refused = from_slice(repeated.as_bytes());
            prop_assert!(
                matches!(refused, Err(Refused::RepeatedKey { .. })),
                "{repeated}: {refused:?}"
            );
        }
    }
}

proptest! {
    /// The SIMD check says what std says: text exactly when the bytes are UTF-8, here on
    /// bytes that are mostly valid text with a stray byte or a cut character in them.
    #[test]
    fn the_utf8_check_agrees_with_std(
        text in "[a-z {}\":é中😀]{0,80}",
        stray in proptest::option::of((0usize..100, any::<u8>())),
        cut in 0usize..100,
    ) {
        let mut bytes = text.into_bytes();
        if let Some((at, byte)) = stray {
            let at = at.min(bytes.len());
            bytes.insert(at, byte);
        }
        bytes.truncate(cut.max(bytes.len().saturating_sub(3)));
        prop_assert_eq!(crate::format::utf8(&bytes), std::str::from_utf8(&bytes).ok());
    }
}
