//! `docs/configuration.md` is the reference generated from the schema: this fails when it
//! differs from what the schema renders. After a change to the schema, rewrite it with
//! `CASCADE_BLESS=1 cargo test -p cascade-proxy --test configuration_reference`.

use std::path::PathBuf;

use cascade_proxy::ProxyConfig;
use cascade_proxy::config::reference_markdown;

fn document() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")
}

#[test]
fn the_reference_matches_the_schema() {
    let rendered = reference_markdown();
    let path = document();
    if std::env::var_os("CASCADE_BLESS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == rendered,
        "{} differs from the schema: rewrite it with CASCADE_BLESS=1 cargo test -p cascade-proxy --test configuration_reference",
        path.display()
    );
}

#[test]
fn every_documented_default_is_the_default() {
    // Each `- `key = value`` line of the reference, read back as TOML under its table,
    // gives the default: the document can only say what the schema does.
    let rendered = reference_markdown();
    let mut table = String::new();
    let mut checked = 0;
    for line in rendered.lines() {
        if let Some(heading) = line
            .strip_prefix("### `[")
            .and_then(|h| h.strip_suffix("]`"))
        {
            table = format!("[{heading}]\n");
        } else if line == "### top level" {
            table.clear();
        } else if let Some(entry) = line.strip_prefix("- `").and_then(|l| l.split_once("`: ")) {
            let (assignment, _doc) = entry;
            if !assignment.contains(" = ") || assignment.starts_with("path = \"<data dir>") {
                continue;
            }
            let text = format!("{table}{assignment}\n");
            let read = ProxyConfig::from_toml_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                serde_json::to_value(&read).unwrap(),
                serde_json::to_value(ProxyConfig::default()).unwrap(),
                "{text}"
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked} defaults checked");
}
