//! The configuration reference (`docs/configuration.md`) and the effective settings that
//! `cascade config` prints, both rendered from the schema: every key with its value and
//! its doc line, so neither can drift from what the proxy reads.

use std::fmt::Write as _;
use std::path::PathBuf;

use context_cascade::settings::{Documented, KeyDoc, Setting, flatten, toml_value};
use serde_json::Value;

use super::ProxyConfig;

/// Where an effective setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Nobody set it.
    Default,
    /// The config file.
    File,
    /// A command-line flag.
    Flag,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Flag => "flag",
        })
    }
}

/// The flags of `cascade proxy` (and `cascade config`) and the key each sets.
pub const FLAGS: &[(&str, &str)] = &[
    ("--listen ADDR", "listen"),
    ("--upstream URL", "upstream"),
    ("--window N", "window.force"),
    ("--db PATH", "state.path"),
    ("--state URL", "state.url"),
    ("--summarizer offline|URL", "summarizer.endpoint"),
    ("--summarizer-model NAME", "summarizer.model"),
    ("--summarizer-api openai|anthropic", "summarizer.protocol"),
    ("--no-background-summaries", "summarizer.background"),
    ("--admin-token TOKEN", "status.admin_token"),
];

/// Every setting of `config`, each with where it came from: a key in `flags` (key paths,
/// as in [`FLAGS`]) came from a flag, else a key present in the file's text `file` came from
/// the file, else it is the default.
pub fn settings_with_sources(
    config: &ProxyConfig,
    file: Option<&str>,
    flags: &[&str],
) -> Vec<(Setting, Source)> {
    let file: Option<toml::Table> = file.and_then(|text| toml::from_str(text).ok());
    let file = file.as_ref();
    let value = serde_json::to_value(config).unwrap_or(Value::Null);
    flatten::<ProxyConfig>(&value)
        .into_iter()
        .map(|setting| {
            let source = if flags.contains(&setting.path.as_str()) {
                Source::Flag
            } else if file.is_some_and(|table| has_key(table, &setting.path)) {
                Source::File
            } else {
                Source::Default
            };
            (setting, source)
        })
        .collect()
}

/// Whether the dotted `path` names a key of `table`.
fn has_key(table: &toml::Table, path: &str) -> bool {
    let mut table = table;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        match (table.get(part), parts.peek()) {
            (Some(_), None) => return true,
            (Some(toml::Value::Table(inner)), Some(_)) => table = inner,
            _ => return false,
        }
    }
    false
}

/// The defaults as the reference shows them: the database path is the platform's data
/// directory, not this machine's.
fn documented_defaults() -> Value {
    let mut config = ProxyConfig::default();
    config.state.path = PathBuf::from("<data dir>/context-cascade/cascade.db");
    serde_json::to_value(&config).unwrap_or(Value::Null)
}

/// `docs/configuration.md`: every key of the proxy's file, and so of the library's
/// `CascadeConfig` (its `[cascade]` table), with its default and its doc.
pub fn reference_markdown() -> String {
    let mut out = String::from(HEADER);
    out.push_str("\n## Flags\n\nEach flag sets one key, over the file's value.\n\n");
    out.push_str("| flag | key |\n|---|---|\n");
    for (flag, key) in FLAGS {
        // A `|` inside a cell would end it.
        let flag = flag.replace('|', "\\|");
        let _ = writeln!(out, "| `{flag}` | `{key}` |");
    }
    out.push_str(
        "\n## Keys\n\nEvery key with its default; a key without one is unset by default.\n",
    );
    section(
        &mut out,
        &ProxyConfig::keys(),
        &documented_defaults(),
        "",
        "",
    );
    out
}

const HEADER: &str = "# Configuration reference

<!-- Generated from the schema by cascade_proxy::config::reference_markdown: do not edit.
     After a change to the schema: CASCADE_BLESS=1 cargo test -p cascade-proxy --test configuration_reference -->

One schema serves the library, the proxy's file and the command line:

- The library: `context_cascade::CascadeConfig`, the `[cascade]` table below (in Rust,
  `config.recovery.preemptive_target` for `[cascade.recovery] preemptive_target`). Check a
  configuration read from outside with `CascadeConfig::validate()`.
- The proxy: `cascade proxy --config FILE`, a TOML file with the keys below. Every key is
  optional; an unknown key, or a value the cascade cannot work with, is an error naming the
  key (and the line).
- The command line: the flags below set the same keys over the file's values.
  `cascade config [--config FILE] [flags]` prints every effective setting and where it came
  from (`default`, `file` or `flag`). `cascade compact`, `replay` and `inspect` take the
  same `--config FILE`: its `[cascade]` table, `[window]` and `[[model]]` entries apply
  (`--window` still comes first).

Where a measured choice did better than SPEC.md's value, it is the default and SPEC's value
is the alternative: `cascade.layer1.compact_short_of_watermark` (SPEC: `true`), `cascade.layer1.low_watermark`
(SPEC: `0.6`), `cascade.recovery.preemptive_target` (SPEC: `0.75`), `cascade.calibration.prior_tokens`
(SPEC's EMA: `0`).
";

/// One table: its own keys as a list, then each sub-table under its heading.
fn section(out: &mut String, keys: &[KeyDoc], value: &Value, path: &str, doc: &str) {
    let leaves: Vec<&KeyDoc> = keys.iter().filter(|k| k.group.is_none()).collect();
    let heading = if path.is_empty() {
        "top level".to_owned()
    } else {
        format!("`[{path}]`")
    };
    if !leaves.is_empty() {
        let _ = writeln!(out, "\n### {heading}\n");
        if !doc.is_empty() {
            let _ = writeln!(out, "{doc}\n");
        }
    }
    let table = value.as_object();
    for key in &leaves {
        let field = table.and_then(|t| t.get(key.key)).unwrap_or(&Value::Null);
        match toml_value(field) {
            Some(v) => {
                let _ = writeln!(out, "- `{} = {v}`: {}", key.key, key.summary());
            }
            None => {
                let _ = writeln!(out, "- `{}` (unset): {}", key.key, key.summary());
            }
        }
    }
    for key in keys {
        if let Some(inner) = key.group {
            let inner_path = if path.is_empty() {
                key.key.to_owned()
            } else {
                format!("{path}.{}", key.key)
            };
            let field = table.and_then(|t| t.get(key.key)).unwrap_or(&Value::Null);
            section(out, &inner(), field, &inner_path, &key.summary());
        }
    }
}
