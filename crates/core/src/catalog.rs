//! The model catalog: how large each model's context window is.
//!
//! Every budget in the cascade is a ratio of the window, so a wrong window is the costliest
//! mistake: too large and requests overflow, too small and history is thrown away for
//! nothing. The table holds the makers' documented values; config, upstream discovery and
//! `--window` take precedence (SPEC). Where hosts serve less than documented, the entry's
//! note says so. Exact ids match first (case-insensitive), then the longest prefix, so dated
//! snapshots (`gpt-4o-2024-08-06`), Ollama tags (`qwen2.5:7b`) and Vertex ids
//! (`claude-3-5-sonnet@20240620`) need no rows of their own; router and cloud ids
//! (`openrouter/anthropic/…`, `us.anthropic.claude-…`) are retried without the provider.
//!
//! ```
//! use context_cascade::catalog::{Catalog, MatchKind};
//!
//! let catalog = Catalog::builtin();
//! let hit = catalog.lookup("openrouter/openai/gpt-4.1-mini");
//! assert_eq!(hit.context_window, 1_047_576);
//! assert_eq!(hit.matched, MatchKind::Exact);
//!
//! let catalog = catalog
//!     .with_overrides_toml("[[model]]\nid = \"my-local-model\"\ncontext_window = 32768\n")
//!     .unwrap();
//! assert_eq!(catalog.lookup("my-local-model").context_window, 32_768);
//! ```

/// The window assumed for a model the catalog does not know (SPEC: 128,000, with a warning).
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Starting calibration scale for Claude's tokenizer: on the Claude Code fixtures the
/// provider's own counts run 1.5–2× the o200k count the prior is fitted on, so starting at
/// 1.6 keeps the first, uncalibrated estimates from undercounting (the overflowing side).
const CLAUDE_TOKEN_SCALE: Option<f64> = Some(1.6);

/// Calibration observations are clamped to this range (SPEC), so a starting scale outside it
/// cannot be meant: it is rejected as a config mistake.
const TOKEN_SCALE_RANGE: std::ops::RangeInclusive<f64> = 0.25..=4.0;

/// One catalog row: an exact model id, or a prefix that covers a family. Unknown fields are
/// rejected: a misspelt `token_scale` in a config file would otherwise vanish silently.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The exact model id, or (with `prefix`) the start of the ids it covers.
    pub id: String,
    /// Total context window in tokens (input and output together).
    pub context_window: u64,
    /// Whether `id` is a prefix covering a family rather than one exact id.
    #[serde(default)]
    pub prefix: bool,
    /// Starting calibration scale for the model's tokenizer family relative to the
    /// o200k-fitted prior, used until the first real observation.
    #[serde(default)]
    pub token_scale: Option<f64>,
    /// Where the value comes from, or what to watch out for.
    #[serde(default)]
    pub note: Option<String>,
}

/// How a lookup found its answer, so callers can warn about guesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// An entry with exactly this id (ignoring case and provider segments).
    Exact,
    /// The longest prefix entry that starts the id.
    Prefix,
    /// Nothing matched: [`DEFAULT_CONTEXT_WINDOW`] was used.
    Default,
}

/// The answer to [`Catalog::lookup`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Lookup {
    /// The model's context window in tokens.
    pub context_window: u64,
    /// The entry's starting calibration scale, if it has one.
    pub token_scale: Option<f64>,
    /// How the entry was found.
    pub matched: MatchKind,
    /// The id of the matching entry (`None` for [`MatchKind::Default`]).
    pub entry_id: Option<String>,
}

/// Why a catalog override could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The text is not valid TOML, or an entry has a missing, mistyped or unknown field.
    #[error("invalid catalog TOML: {0}")]
    Toml(String),
    /// An entry's values make no sense; `index` counts `[[model]]` tables from 1.
    #[error("catalog entry {index} ({id}): {problem}")]
    Entry {
        /// The entry's position, counting `[[model]]` tables from 1.
        index: usize,
        /// The entry's id.
        id: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The catalog: built-in entries plus overrides, searched by [`Catalog::lookup`].
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    entries: Vec<ModelEntry>,
}

/// A built-in row: `const`, so the table is plain data checked at compile time.
struct Row {
    id: &'static str,
    window: u64,
    prefix: bool,
    scale: Option<f64>,
    note: Option<&'static str>,
}

/// A prefix row: covers every id that starts with `id`.
#[rustfmt::skip]
const fn p(id: &'static str, window: u64) -> Row {
    Row { id, window, prefix: true, scale: None, note: None }
}

/// An exact row.
#[rustfmt::skip]
const fn x(id: &'static str, window: u64) -> Row {
    Row { id, window, prefix: false, scale: None, note: None }
}

#[rustfmt::skip]
impl Row {
    const fn note(self, note: &'static str) -> Row { Row { note: Some(note), ..self } }
    const fn claude(self) -> Row { Row { scale: CLAUDE_TOKEN_SCALE, ..self } }
    fn entry(&self) -> ModelEntry {
        let (id, note) = (self.id.to_string(), self.note.map(str::to_string));
        let (context_window, prefix, token_scale) = (self.window, self.prefix, self.scale);
        ModelEntry { id, context_window, prefix, token_scale, note }
    }
}

/// The built-in table, as data. Values are the makers' documented context windows.
#[rustfmt::skip]
const BUILTIN: &[Row] = &[
    // OpenAI
    p("gpt-5", 400_000).note("GPT-5 family (gpt-5, -mini, -nano, -codex)"),
    p("gpt-5-chat", 128_000).note("gpt-5-chat-latest serves 128K"), x("gpt-4.1", 1_047_576),
    x("gpt-4.1-mini", 1_047_576), x("gpt-4.1-nano", 1_047_576),
    p("gpt-4.1", 1_047_576).note("GPT-4.1 family and dated snapshots"), p("gpt-4.5", 128_000),
    p("gpt-4o", 128_000), p("gpt-4o-mini", 128_000), p("chatgpt-4o", 128_000),
    p("gpt-4-turbo", 128_000), x("gpt-4-1106-preview", 128_000), x("gpt-4-0125-preview", 128_000),
    x("gpt-4-vision-preview", 128_000), p("gpt-4-32k", 32_768),
    p("gpt-4", 8_192).note("original GPT-4 and its snapshots"),
    p("gpt-3.5-turbo", 16_385).note("the 0613 and older snapshots had 4,096"),
    p("gpt-3.5-turbo-instruct", 4_096), p("gpt-oss", 131_072).note("gpt-oss-20b / gpt-oss-120b"),
    p("o1", 200_000), p("o1-mini", 128_000), p("o1-preview", 128_000), p("o3", 200_000),
    p("o4-mini", 200_000), p("codex-mini", 200_000),
    // Anthropic: 1M context for some Sonnet models is a beta opt-in, not the default
    p("claude-", 200_000).claude().note("Claude 3+; counts ~1.5-2x o200k"),
    p("claude-2.0", 100_000).claude(), p("claude-2.1", 200_000).claude(),
    p("claude-instant", 100_000).claude(),
    // DeepSeek: the seed's 64K is the old API window; current API models serve 128K
    p("deepseek-", 65_536).note("the seed's 64K, for old or unlisted ids"),
    x("deepseek-coder", 65_536).note("old API id, 64K"), p("deepseek-coder-v2", 128_000),
    x("deepseek-chat", 128_000).note("API alias of current DeepSeek-V3.x, 128K"),
    x("deepseek-reasoner", 128_000).note("API alias of the current R model, 128K"),
    p("deepseek-v2", 128_000), p("deepseek-v3", 128_000), p("deepseek-r1", 128_000),
    // Google
    p("gemini-", 1_048_576).note("Gemini 1.5 Flash, 2.x, 2.5 Pro/Flash"),
    p("gemini-1.5-pro", 2_097_152), p("gemini-1.0-pro", 32_760),
    x("gemini-pro", 32_760).note("legacy alias of gemini-1.0-pro"),
    p("gemma-3", 131_072).note("1B: 32K"), p("gemma3", 131_072).note("1B: 32K"),
    p("gemma-2", 8_192), p("gemma2", 8_192),
    // Meta Llama (open weights: hosts often serve less, override when they do)
    p("llama-3", 8_192).note("Llama 3.0"), p("llama3", 8_192).note("Llama 3.0"),
    p("llama-3.1", 131_072), p("llama-3.2", 131_072), p("llama-3.3", 131_072),
    p("llama3.1", 131_072), p("llama3.2", 131_072), p("llama3.3", 131_072),
    p("llama-4", 131_072).note("unlisted Llama 4"), p("llama4", 131_072).note("unlisted Llama 4"),
    p("llama-4-maverick", 1_048_576).note("Meta's documented 1M; hosts often serve less"),
    p("llama-4-scout", 10_485_760).note("Meta's documented 10M; hosts often serve less"),
    // Qwen: native windows (YaRN extends Qwen2.5/Qwen3 to 128K when the host enables it)
    p("qwen", 32_768), p("qwen2", 32_768), p("qwen2.5", 32_768).note("native; 131,072 with YaRN"),
    p("qwen-2.5", 32_768).note("native; 131,072 with YaRN"),
    p("qwen3", 32_768).note("native; 131,072 with YaRN"), p("qwen3-coder", 262_144),
    p("qwen-plus", 131_072), p("qwen-max", 32_768), p("qwq", 131_072),
    // Mistral
    p("mistral", 32_768), p("mistral-large", 131_072), p("mistral-medium", 131_072),
    p("mistral-small", 32_768).note("Small 3.1 and later serve 128K"), p("mistral-nemo", 131_072),
    p("open-mistral-nemo", 131_072), p("ministral", 131_072),
    p("codestral", 256_000).note("Codestral 25.01+; the 2024 Codestral had 32K"),
    p("codestral-2405", 32_768), p("codestral-22b", 32_768), p("devstral", 131_072),
    p("pixtral", 131_072), p("magistral", 40_000), p("mixtral", 32_768), p("mixtral-8x22b", 65_536),
    // Cohere, xAI, Moonshot (Kimi), Zhipu (GLM), Amazon (Nova), Microsoft (Phi), SmolLM
    p("command-r", 128_000).note("command-r, command-r-plus, command-r7b"), p("command-a", 256_000),
    p("grok", 131_072).note("grok-2, grok-3, grok-3-mini"), p("grok-4", 256_000),
    p("grok-4-fast", 2_000_000), p("grok-code-fast", 256_000),
    p("kimi-k2", 131_072).note("the 0905 and later versions serve 256K"),
    p("kimi-k2-0905", 262_144), x("kimi-latest", 131_072), p("moonshot-v1-8k", 8_192),
    p("moonshot-v1-32k", 32_768), p("moonshot-v1-128k", 131_072),
    p("glm-4", 128_000).note("GLM-4 and GLM-4.5 (128K)"), p("glm-4.6", 200_000),
    p("nova-pro", 300_000), p("nova-lite", 300_000), p("nova-micro", 128_000), p("phi-4", 16_384),
    p("phi4", 16_384), p("phi-3.5", 131_072), p("smollm", 2_048).note("SmolLM v1"),
    p("smollm2", 8_192), p("smollm3", 65_536),
];

/// Provider prefixes that come before the model's own id: Bedrock's region and vendor
/// parts (`us.anthropic.claude-…`) and gateway names that LiteLLM-style aliases glue on with
/// a dash (`openrouter-llama-4-maverick`, as in the OpenHands fixtures).
#[rustfmt::skip]
const PROVIDER_PREFIXES: &[&str] = &[
    "us.", "eu.", "apac.", "global.", "anthropic.", "meta.", "mistral.", "cohere.", "amazon.",
    "deepseek.", "openai.", "qwen.", "ai21.", "openrouter-", "openai-", "azure-", "anthropic-",
    "bedrock-", "vertex-", "together-", "groq-", "fireworks-", "deepinfra-", "ollama-", "litellm-",
];

impl Catalog {
    /// The embedded catalog.
    pub fn builtin() -> Catalog {
        let entries = BUILTIN.iter().map(Row::entry).collect();
        Catalog { entries }
    }

    /// All entries, built-in first then added overrides, for `cascade models`.
    pub fn entries(&self) -> &[ModelEntry] {
        &self.entries
    }

    /// Finds the window for `model`: an exact id first (case-insensitive), then the longest
    /// prefix entry, each tried on the id as given and then without its provider segments;
    /// else [`DEFAULT_CONTEXT_WINDOW`] with [`MatchKind::Default`]. It logs nothing: the
    /// name comes from a client, and the caller knows whether (and how often) to say so.
    pub fn lookup(&self, model: &str) -> Lookup {
        let candidates = candidates(model);
        for candidate in &candidates {
            // An exact entry wins over a prefix entry with the same id (`min` keeps the
            // first `false`).
            let exact = (self.entries.iter())
                .filter(|entry| entry.id.eq_ignore_ascii_case(candidate))
                .min_by_key(|entry| entry.prefix);
            if let Some(entry) = exact {
                return hit(entry, MatchKind::Exact);
            }
        }
        for candidate in &candidates {
            let best = (self.entries.iter())
                .filter(|entry| entry.prefix && starts_with_ignore_case(candidate, &entry.id))
                .max_by_key(|entry| entry.id.len());
            if let Some(entry) = best {
                return hit(entry, MatchKind::Prefix);
            }
        }
        Lookup {
            context_window: DEFAULT_CONTEXT_WINDOW,
            token_scale: None,
            matched: MatchKind::Default,
            entry_id: None,
        }
    }

    /// Applies overrides from TOML (`[[model]]` tables with `id`, `context_window`, and
    /// optional `prefix`, `token_scale`, `note`). An override replaces the entry with the
    /// same id (ignoring case), a new id is added. Other top-level keys are ignored so the
    /// tables can live inside a larger config file; unknown keys inside a `[[model]]` table
    /// are errors (see [`ModelEntry`]).
    pub fn with_overrides_toml(self, toml_text: &str) -> Result<Catalog, CatalogError> {
        let file: OverrideFile =
            toml::from_str(toml_text).map_err(|e| CatalogError::Toml(e.to_string()))?;
        let mut catalog = self;
        for (i, entry) in file.model.into_iter().enumerate() {
            if let Err(problem) = validate(&entry) {
                let (index, id) = (i + 1, entry.id);
                return Err(CatalogError::Entry { index, id, problem });
            }
            catalog.replace_or_push(entry);
        }
        Ok(catalog)
    }

    /// Adds one entry, replacing the entry with the same id (ignoring case). An entry that
    /// could never be right (empty id, a zero window, a scale outside [0.25, 4.0]) is
    /// skipped with a warning instead: a zero window would make every budget zero.
    pub fn with_override(mut self, entry: ModelEntry) -> Catalog {
        match validate(&entry) {
            Ok(()) => self.replace_or_push(entry),
            Err(problem) => {
                tracing::warn!(id = %entry.id, %problem, "ignoring invalid catalog override");
            }
        }
        self
    }

    fn replace_or_push(&mut self, entry: ModelEntry) {
        let same = |e: &ModelEntry| e.id.eq_ignore_ascii_case(&entry.id);
        match self.entries.iter().position(same) {
            // The built-in table lists some ids both as exact and as prefix: the first row
            // takes the override, the later ones go.
            Some(first) => {
                let mut i = 0;
                self.entries.retain(|e| {
                    i += 1;
                    i - 1 <= first || !same(e)
                });
                self.entries[first] = entry;
            }
            None => self.entries.push(entry),
        }
    }
}

fn hit(entry: &ModelEntry, matched: MatchKind) -> Lookup {
    Lookup {
        context_window: entry.context_window,
        token_scale: entry.token_scale,
        matched,
        entry_id: Some(entry.id.clone()),
    }
}

/// The ids to try, most specific first: the id as given (lowercased, trimmed), then with
/// each leading `provider/` segment or [`PROVIDER_PREFIXES`] entry removed.
fn candidates(model: &str) -> Vec<String> {
    let mut out = vec![model.trim().to_ascii_lowercase()];
    while let Some(rest) = out.last().and_then(|id| strip_provider(id)) {
        out.push(rest.to_string());
    }
    out.retain(|id| !id.is_empty());
    out
}

fn strip_provider(id: &str) -> Option<&str> {
    match id.split_once('/') {
        Some((_, rest)) => Some(rest),
        None => PROVIDER_PREFIXES.iter().find_map(|p| id.strip_prefix(p)),
    }
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    (text.get(..prefix.len())).is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

fn validate(entry: &ModelEntry) -> Result<(), String> {
    if entry.id.trim().is_empty() {
        return Err("id is empty".to_string());
    }
    if entry.context_window == 0 {
        return Err("context_window must be greater than 0".to_string());
    }
    if let Some(scale) = entry.token_scale {
        if !TOKEN_SCALE_RANGE.contains(&scale) {
            let (low, high) = TOKEN_SCALE_RANGE.into_inner();
            return Err(format!("token_scale {scale} is outside [{low}, {high}]"));
        }
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct OverrideFile {
    #[serde(default)]
    model: Vec<ModelEntry>,
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
