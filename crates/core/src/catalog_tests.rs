use super::*;

/// `(model id, expected window)`: the SPEC's values, dated snapshots and local tags
/// (longest prefix), and router, cloud and gateway ids (provider segments stripped).
#[rustfmt::skip]
const WINDOWS: &[(&str, u64)] = &[
    ("gpt-4.1", 1_047_576), ("gpt-4.1-mini", 1_047_576), ("gpt-4.1-nano", 1_047_576),
    ("gpt-4.1-2025-04-14", 1_047_576), ("gpt-4o", 128_000), ("gpt-4o-mini", 128_000),
    ("gpt-4-turbo", 128_000), ("gpt-4", 8_192), ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000), ("o3", 200_000), ("o3-mini", 200_000), ("o4-mini", 200_000),
    ("gpt-5", 400_000), ("gpt-5-mini", 400_000), ("gpt-5-nano", 400_000),
    ("deepseek-coder", 65_536), ("deepseek-chat", 128_000), ("deepseek-reasoner", 128_000),
    ("gemini-1.5-pro", 2_097_152), ("gemini-2.5-flash", 1_048_576), ("smollm2:135m", 8_192),
    ("claude-2.0", 100_000),
    // longest prefix
    ("gpt-4-turbo-2024-04-09", 128_000), ("gpt-4-0613", 8_192), ("gpt-4-32k-0314", 32_768),
    ("gpt-4o-mini-2024-07-18", 128_000), ("o1-mini-2024-09-12", 128_000),
    ("grok-4-fast-reasoning", 2_000_000), ("grok-4-0709", 256_000),
    ("llama-3.3-70b-versatile", 131_072), ("llama3-70b-8192", 8_192), ("qwen2.5:7b", 32_768),
    ("mixtral-8x7b-32768", 32_768), ("mixtral-8x22b-instruct", 65_536),
    ("command-r-plus-08-2024", 128_000), ("deepseek-coder-v2-lite-instruct", 128_000),
    // provider segments
    ("openai/gpt-4o", 128_000), ("openrouter/anthropic/claude-3.5-sonnet", 200_000),
    ("models/gemini-1.5-pro-002", 2_097_152), ("meta-llama/Llama-3.1-8B-Instruct", 131_072),
    ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
    ("claude-3-5-sonnet@20240620", 200_000),
    ("openrouter/meta-llama/llama-4-maverick", 1_048_576),
];

#[test]
fn known_windows() {
    let catalog = Catalog::builtin();
    for &(id, want) in WINDOWS {
        assert_eq!(catalog.lookup(id).context_window, want, "{id}");
    }
}

/// `(window, matched, entry id or "")` of a lookup in the built-in catalog.
fn look(model: &str) -> (u64, MatchKind, String) {
    let hit = Catalog::builtin().lookup(model);
    (
        hit.context_window,
        hit.matched,
        hit.entry_id.unwrap_or_default(),
    )
}

#[test]
fn match_kinds_and_entries() {
    use MatchKind::{Default, Exact, Prefix};
    let claude = look("claude-3-5-sonnet-20241022");
    assert_eq!(claude, (200_000, Prefix, "claude-".into()));
    let mini = look("GPT-4.1-Mini"); // case-insensitive
    assert_eq!(mini, (1_047_576, Exact, "gpt-4.1-mini".into()));
    // "gpt-4.1" is both an exact and a prefix row: the exact one answers.
    assert_eq!(look("gpt-4.1").1, Exact);
    // A prefix row named exactly is an exact match.
    assert_eq!(look("gpt-4o").1, Exact);
    // The model id of the OpenHands fixtures.
    let fixture = look("openai/openrouter-llama-4-maverick");
    assert_eq!(fixture, (1_048_576, Exact, "llama-4-maverick".into()));
    for unknown in ["totally-unknown-model", "", "   ", "acme/"] {
        assert_eq!(look(unknown), (DEFAULT_CONTEXT_WINDOW, Default, "".into()));
    }
    let scale = |model| Catalog::builtin().lookup(model).token_scale;
    for claude in ["claude-3-5-sonnet", "anthropic/claude-opus-4", "claude-2.0"] {
        assert_eq!(scale(claude), Some(1.6), "{claude}");
    }
    assert_eq!((scale("gpt-4o"), scale("unknown")), (None, None));
}

#[test]
fn builtin_table_is_sane() {
    let catalog = Catalog::builtin();
    assert!(catalog.entries().len() >= 90);
    for (i, a) in catalog.entries().iter().enumerate() {
        assert!(validate(a).is_ok(), "{a:?}");
        assert_eq!(a.id, a.id.to_lowercase(), "stored lowercased");
        // No two rows with the same id and kind: one would shadow the other.
        for b in &catalog.entries()[i + 1..] {
            assert!(!(a.id == b.id && a.prefix == b.prefix), "{}", a.id);
        }
        if !a.prefix {
            assert_eq!(catalog.lookup(&a.id).entry_id.as_ref(), Some(&a.id));
        }
    }
}

#[test]
fn toml_overrides_replace_and_add() {
    let text = r#"
        listen = "127.0.0.1:8080"   # other config keys are ignored
        [[model]]
        id = "GPT-4o"
        context_window = 64000
        [[model]]
        id = "acme-"
        context_window = 50000
        prefix = true
        token_scale = 1.2
        note = "in-house"
    "#;
    let before = Catalog::builtin().entries().len();
    let catalog = Catalog::builtin().with_overrides_toml(text).unwrap();
    assert_eq!(catalog.entries().len(), before + 1);
    let window = |model| catalog.lookup(model).context_window;
    assert_eq!(catalog.lookup("gpt-4o").matched, MatchKind::Exact);
    assert_eq!(window("gpt-4o"), 64_000);
    // The override is an exact id now: dated snapshots fall back to another prefix.
    assert_eq!(window("gpt-4o-2024-08-06"), 8_192);
    let hit = catalog.lookup("acme-large");
    let want = (50_000, Some(1.2), MatchKind::Prefix);
    assert_eq!((hit.context_window, hit.token_scale, hit.matched), want);
    let unchanged = Catalog::builtin().with_overrides_toml("").unwrap();
    assert_eq!(unchanged, Catalog::builtin());
    // An id listed twice in the table (exact and prefix) keeps one row.
    let text = "[[model]]\nid = \"gpt-4.1\"\ncontext_window = 1000\n";
    let catalog = Catalog::builtin().with_overrides_toml(text).unwrap();
    assert_eq!(catalog.entries().len(), before - 1);
    assert_eq!(catalog.lookup("gpt-4.1").context_window, 1000);
}

fn model(body: &str) -> String {
    format!("[[model]]\nid = \"x\"\n{body}\n")
}

#[test]
fn toml_errors() {
    for text in [
        "[[model]\nid=".to_string(),
        model(""),                                      // no context_window
        model("context_window = 5\ntoken-scale = 2.0"), // misspelt key
        model("context_window = -5"),
    ] {
        let result = Catalog::builtin().with_overrides_toml(&text);
        assert!(matches!(result, Err(CatalogError::Toml(_))), "{text}");
    }
}

#[test]
fn entry_errors_name_the_entry() {
    let two = model("context_window = 10") + &model("context_window = 0");
    let err = Catalog::builtin().with_overrides_toml(&two).unwrap_err();
    let want = "catalog entry 2 (x): context_window must be greater than 0";
    assert_eq!(err.to_string(), want);
    let blank_id = "[[model]]\nid = \" \"\ncontext_window = 10\n".to_string();
    for text in [model("context_window = 10\ntoken_scale = 9.0"), blank_id] {
        let result = Catalog::builtin().with_overrides_toml(&text);
        let index = match result {
            Err(CatalogError::Entry { index, .. }) => index,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(index, 1);
    }
}

#[test]
fn with_override_adds_replaces_and_skips_invalid() {
    let entry = |id: &str, context_window: u64| {
        let json = serde_json::json!({"id": id, "context_window": context_window});
        serde_json::from_value::<ModelEntry>(json).unwrap()
    };
    let catalog = Catalog::builtin()
        .with_override(entry("my-model", 4096))
        .with_override(entry("Claude-", 150_000))
        .with_override(entry("broken", 0));
    assert_eq!(catalog.lookup("my-model").context_window, 4096);
    assert_eq!(catalog.lookup("broken").matched, MatchKind::Default);
    // The replacement keeps its place but is now an exact id, not a prefix.
    assert_eq!(catalog.lookup("claude-").context_window, 150_000);
    assert_eq!(catalog.lookup("claude-3-opus").matched, MatchKind::Default);
}

#[test]
fn serde_shapes() {
    let hit = Catalog::builtin().lookup("gpt-4o-2024-08-06");
    let json = serde_json::to_value(&hit).unwrap();
    assert_eq!(json["matched"], "prefix");
    assert_eq!(json["entry_id"], "gpt-4o");
    let entry: ModelEntry = serde_json::from_str(r#"{"id":"x","context_window":10}"#).unwrap();
    assert!(!entry.prefix);
    assert_eq!((entry.token_scale, entry.note), (None, None));
    let extra = r#"{"id":"x","context_window":1,"y":2}"#;
    assert!(serde_json::from_str::<ModelEntry>(extra).is_err());
}

#[test]
fn candidates_strip_repeatedly() {
    let ids = candidates("OpenRouter/Anthropic/Claude-X").join(" ");
    assert_eq!(
        ids,
        "openrouter/anthropic/claude-x anthropic/claude-x claude-x"
    );
    let ids = candidates("us.anthropic.claude-y").join(" ");
    assert_eq!(ids, "us.anthropic.claude-y anthropic.claude-y claude-y");
    assert!(candidates("").is_empty());
}
