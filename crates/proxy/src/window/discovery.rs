//! Asking the upstream for a model's context window, and the window precedence.
//!
//! Local servers know their own window better than any catalog: llama.cpp reports it in
//! `GET /props`, vLLM in `GET /v1/models` (`max_model_len`), Ollama in `POST /api/show`
//! (`model_info.<arch>.context_length`). Answers (and the absence of one) are cached per
//! model, so each model costs at most one round of probes.
//!
//! A limit the upstream states in an overflow error (`prompt is too long: N tokens > M
//! maximum`, `maximum context length is M tokens`) is the best knowledge of all short of the
//! operator's: it is learned for the model and ranks above discovery and the catalog, below
//! `--window` and the config. When the error counts the prompt alone (no mention of the
//! completion or `max_tokens`), the output reserve is not part of that limit, so the budget
//! built on it has no reserve: a request's `max_tokens` must not shrink E below the agent's
//! own system prompt when the provider would accept the prompt anyway.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use context_cascade::Budget;
use context_cascade::catalog::{Catalog, MatchKind};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use context_cascade::logged::clipped;

use crate::config::ProxyConfig;
use crate::ops::repeats;

/// How long one probe may take; a server that is slow to say its window is not asked again.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Model names whose probe answer (or learned limit) is kept. The names come from clients:
/// the probe cache starts over when full, and no new limit is learned past it (a limit is
/// also a stored row and a `/metrics` series).
const MODELS_KEPT: usize = 256;

/// Where a window came from, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowSource {
    /// `--window` (or `window.force` in the file) forces every model's window.
    Flag,
    /// The file's `[windows]` table names this model.
    Config,
    /// The upstream said (llama.cpp, vLLM, Ollama).
    Upstream,
    /// The catalog knows the model or its family.
    Catalog,
    /// Nobody knew: the catalog's default.
    Default,
    /// An overflow error from the upstream stated the limit.
    Learned,
}

impl WindowSource {
    /// The label used in metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WindowSource::Flag => "flag",
            WindowSource::Config => "config",
            WindowSource::Upstream => "upstream",
            WindowSource::Catalog => "catalog",
            WindowSource::Default => "default",
            WindowSource::Learned => "learned",
        }
    }
}

/// Resolves windows: `--window` > config per model > upstream > catalog > default.
#[derive(Debug)]
pub(crate) struct Windows {
    forced: Option<u64>,
    configured: BTreeMap<String, u64>,
    discover: bool,
    catalog: Catalog,
    discovered: Mutex<HashMap<String, Option<u64>>>,
    learned: Mutex<BTreeMap<String, Learned>>,
    /// Models a llama.cpp server reported the window of, with whether their first request
    /// was counted by its tokenizer yet (see `crate::window::tokenize`).
    llama_cpp: Mutex<HashMap<String, bool>>,
}

/// A limit an overflow error stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Learned {
    /// The limit, in the provider's tokens.
    pub limit: u64,
    /// Whether the error counted the output reserve in it (`... in the completion`,
    /// `max_tokens`): then the reserve stays in the budget.
    pub counts_reserve: bool,
}

impl Learned {
    /// What an overflow error body says about the limit: `None` when it quotes none.
    pub(crate) fn from_error(body: &str) -> Option<Learned> {
        let limit = context_cascade::classify(Some(400), body)?.limit_tokens?;
        let lower = body.to_ascii_lowercase();
        let counts_reserve = [
            "completion",
            "max_tokens",
            "max_output_tokens",
            "output tokens",
        ]
        .iter()
        .any(|w| lower.contains(w));
        Some(Learned {
            limit,
            counts_reserve,
        })
    }
}

impl Windows {
    /// The precedence of `config`'s `window.force`, `window.models`, `window.discover` and `catalog`.
    pub(crate) fn new(config: &ProxyConfig) -> Self {
        Windows {
            forced: config.window.force,
            configured: config.window.models.clone(),
            discover: config.window.discover,
            catalog: config.catalog.clone(),
            discovered: Mutex::new(HashMap::new()),
            learned: Mutex::new(BTreeMap::new()),
            llama_cpp: Mutex::new(HashMap::new()),
        }
    }

    /// Keeps the limit an overflow error stated for `model`; returns whether it is news
    /// (a smaller limit than the one already learned, or the first).
    pub(crate) fn learn(&self, model: &str, learned: Learned) -> bool {
        let mut map = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(model) {
            Some(known) if known.limit <= learned.limit => false,
            None if map.len() >= MODELS_KEPT => {
                if let Some(repeats) = repeats::admit("learned windows full", "") {
                    tracing::warn!(
                        model = ?clipped(model),
                        kept = MODELS_KEPT,
                        repeats,
                        "not learning another model's window: as many are kept as allowed"
                    );
                }
                false
            }
            _ => {
                tracing::info!(
                    model = ?clipped(model),
                    limit = learned.limit,
                    counts_reserve = learned.counts_reserve,
                    "context window learned from an overflow error"
                );
                map.insert(model.to_owned(), learned);
                true
            }
        }
    }

    /// The limit learned for `model`, if any.
    pub(crate) fn learned(&self, model: &str) -> Option<Learned> {
        let map = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        map.get(model).copied()
    }

    /// The budget for a window resolved by [`Windows::resolve`] and a request's output
    /// reserve: the reserve leaves the budget only for a learned limit on the prompt alone.
    pub(crate) fn budget(
        &self,
        model: &str,
        window: u64,
        source: WindowSource,
        reserve: u64,
    ) -> Budget {
        let prompt_only = source == WindowSource::Learned
            && self.learned(model).is_some_and(|l| !l.counts_reserve);
        Budget::new(window, if prompt_only { 0 } else { reserve })
    }

    /// The learned limits in the Prometheus text format (appended to `/metrics`).
    pub(crate) fn render_learned(&self) -> String {
        let map = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::from(
            "# HELP cascade_learned_window_tokens Context window stated by an overflow error, per model.\n\
             # TYPE cascade_learned_window_tokens gauge\n",
        );
        for (model, learned) in map.iter() {
            let model = model
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            out.push_str(&format!(
                "cascade_learned_window_tokens{{model=\"{model}\"}} {}\n",
                learned.limit
            ));
        }
        out
    }

    /// The window for `model`. `upstream` is the upstream's base URL; `headers` are the
    /// client's (already filtered), so that an upstream behind a key can answer the probes.
    pub(crate) async fn resolve(
        &self,
        client: &reqwest::Client,
        upstream: &str,
        headers: &HeaderMap,
        model: &str,
    ) -> (u64, WindowSource) {
        if let Some(window) = self.forced {
            return (window, WindowSource::Flag);
        }
        if let Some(window) = self.configured.get(model) {
            return (*window, WindowSource::Config);
        }
        if let Some(learned) = self.learned(model) {
            return (learned.limit, WindowSource::Learned);
        }
        if self.discover {
            let cached = self.cached(model);
            let found = match cached {
                Some(found) => found,
                None => {
                    let probed = probe(client, upstream, headers, model).await;
                    if let Some((window, server)) = probed {
                        tracing::info!(
                            model = ?clipped(model),
                            window,
                            ?server,
                            "context window reported by the upstream"
                        );
                        if server == Server::LlamaCpp {
                            let mut llama =
                                self.llama_cpp.lock().unwrap_or_else(|p| p.into_inner());
                            llama.entry(model.to_owned()).or_insert(false);
                        }
                    }
                    let found = probed.map(|(window, _)| window);
                    let mut discovered = self.discovered.lock().unwrap_or_else(|p| p.into_inner());
                    if discovered.len() >= MODELS_KEPT {
                        discovered.clear();
                    }
                    discovered.insert(model.to_owned(), found);
                    found
                }
            };
            if let Some(window) = found {
                return (window, WindowSource::Upstream);
            }
        }
        let lookup = self.catalog.lookup(model);
        if lookup.matched != MatchKind::Default {
            return (lookup.context_window, WindowSource::Catalog);
        }
        // Once a minute per name, and never the whole of a name a client made long.
        if let Some(repeats) = repeats::admit("unknown model", model) {
            tracing::warn!(
                model = ?clipped(model),
                repeats,
                "unknown model: assuming {} tokens of context (set window.models or --window)",
                lookup.context_window
            );
        }
        (lookup.context_window, WindowSource::Default)
    }

    /// Whether `model`'s request should be counted by the llama.cpp server that reported
    /// its window: true once per model (its first request), false for every other model.
    pub(crate) fn count_first_with_llama_cpp(&self, model: &str) -> bool {
        let mut llama = self.llama_cpp.lock().unwrap_or_else(|p| p.into_inner());
        match llama.get_mut(model) {
            Some(counted) if !*counted => {
                *counted = true;
                true
            }
            _ => false,
        }
    }

    fn cached(&self, model: &str) -> Option<Option<u64>> {
        self.discovered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .copied()
    }
}

/// Which kind of server reported a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    LlamaCpp,
    Vllm,
    Ollama,
}

/// Tries llama.cpp, vLLM and Ollama in turn.
async fn probe(
    client: &reqwest::Client,
    base: &str,
    headers: &HeaderMap,
    model: &str,
) -> Option<(u64, Server)> {
    let get = |path: &str| {
        client
            .get(format!("{base}{path}"))
            .headers(headers.clone())
            .timeout(PROBE_TIMEOUT)
            .send()
    };
    if let Some(props) = json_of(get("/props").await).await
        && let Some(n) = llama_cpp_window(&props)
    {
        return Some((n, Server::LlamaCpp));
    }
    if let Some(models) = json_of(get("/v1/models").await).await
        && let Some(n) = vllm_window(&models, model)
    {
        return Some((n, Server::Vllm));
    }
    let show = client
        .post(format!("{base}/api/show"))
        .headers(headers.clone())
        .timeout(PROBE_TIMEOUT)
        .json(&json!({ "model": model }))
        .send()
        .await;
    let window = json_of(show).await.and_then(|v| ollama_window(&v));
    window.map(|n| (n, Server::Ollama))
}

async fn json_of(response: reqwest::Result<reqwest::Response>) -> Option<Value> {
    let response = response.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json::<Value>().await.ok()
}

fn positive(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_u64).filter(|n| *n > 0)
}

/// llama.cpp `/props`: `default_generation_settings.n_ctx`, or `n_ctx` at the top.
pub(crate) fn llama_cpp_window(props: &Value) -> Option<u64> {
    positive(props.pointer("/default_generation_settings/n_ctx"))
        .or_else(|| positive(props.get("n_ctx")))
}

/// vLLM `/v1/models`: the `max_model_len` of the entry whose id is `model` (or the only
/// entry, when there is just one).
pub(crate) fn vllm_window(models: &Value, model: &str) -> Option<u64> {
    let data = models.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    positive(entry.get("max_model_len"))
}

/// Ollama `/api/show`: `model_info.<architecture>.context_length`.
pub(crate) fn ollama_window(show: &Value) -> Option<u64> {
    let info = show.get("model_info")?.as_object()?;
    info.iter()
        .find(|(k, _)| k.ends_with(".context_length"))
        .and_then(|(_, v)| positive(Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_servers_answer() {
        let props = json!({"default_generation_settings": {"n_ctx": 8192}});
        assert_eq!(llama_cpp_window(&props), Some(8192));
        assert_eq!(llama_cpp_window(&json!({"n_ctx": 4096})), Some(4096));
        let models =
            json!({"data": [{"id": "a", "max_model_len": 100}, {"id": "b", "max_model_len": 200}]});
        assert_eq!(vllm_window(&models, "b"), Some(200));
        assert_eq!(vllm_window(&models, "c"), None);
        let show =
            json!({"model_info": {"llama.context_length": 131072, "llama.embedding_length": 4096}});
        assert_eq!(ollama_window(&show), Some(131072));
        assert_eq!(ollama_window(&json!({})), None);
    }

    #[test]
    fn client_chosen_names_cannot_grow_the_learned_windows_without_bound() {
        let windows = Windows::new(&ProxyConfig::new("http://127.0.0.1:1"));
        let learned = Learned {
            limit: 4096,
            counts_reserve: false,
        };
        for i in 0..MODELS_KEPT {
            assert!(windows.learn(&format!("m{i}"), learned));
        }
        assert!(!windows.learn("one-more", learned));
        assert_eq!(windows.learned("one-more"), None);
        // A known model still learns a smaller limit.
        let smaller = Learned {
            limit: 2048,
            ..learned
        };
        assert!(windows.learn("m0", smaller));
    }

    #[test]
    fn a_stated_limit_ranks_below_the_operator_and_above_the_catalog() {
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 64970 tokens > 59275 maximum"}}"#;
        let learned = Learned::from_error(anthropic).unwrap();
        assert_eq!(learned.limit, 59275);
        assert!(!learned.counts_reserve);
        let mut config = ProxyConfig::new("http://127.0.0.1:1");
        config.window.discover = false;
        let windows = Windows::new(&config);
        assert!(windows.learn("claude-x", learned));
        assert!(!windows.learn("claude-x", learned));
        let client = reqwest::Client::new();
        let headers = HeaderMap::new();
        let resolve = |w: &Windows| {
            pollster::block_on(w.resolve(&client, "http://127.0.0.1:1", &headers, "claude-x"))
        };
        assert_eq!(resolve(&windows), (59275, WindowSource::Learned));
        // Claude Code's max_tokens 32000 would leave E below its own system prompt.
        let budget = windows.budget("claude-x", 59275, WindowSource::Learned, 32000);
        assert_eq!(budget.effective(), 59275);
        assert!(
            windows
                .render_learned()
                .contains("cascade_learned_window_tokens{model=\"claude-x\"} 59275")
        );
        config.window.models.insert("claude-x".into(), 1000);
        let configured = Windows::new(&config);
        configured.learn("claude-x", learned);
        assert_eq!(resolve(&configured), (1000, WindowSource::Config));
        let openai = r#"{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4294 tokens (3294 in the messages, 1000 in the completion).","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        let counted = Learned::from_error(openai).unwrap();
        assert!(counted.counts_reserve);
        assert_eq!(counted.limit, 4097);
    }
}
