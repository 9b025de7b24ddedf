//! Asking the upstream for a model's context window, and the window precedence.
//!
//! Local servers know their own window better than any catalog: llama.cpp reports it in
//! `GET /props`, vLLM in `GET /v1/models` (`max_model_len`), Ollama in `POST /api/show`
//! (`model_info.<arch>.context_length`). Answers (and the absence of one) are cached per
//! model, so each model costs at most one round of probes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use context_cascade::catalog::{Catalog, MatchKind};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::config::ProxyConfig;

/// How long one probe may take; a server that is slow to say its window is not asked again.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a window came from, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// `--window` (or `window` in the file) forces every model's window.
    Flag,
    /// The file's `[windows]` table names this model.
    Config,
    /// The upstream said (llama.cpp, vLLM, Ollama).
    Upstream,
    /// The catalog knows the model or its family.
    Catalog,
    /// Nobody knew: the catalog's default.
    Default,
}

impl WindowSource {
    /// The label used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            WindowSource::Flag => "flag",
            WindowSource::Config => "config",
            WindowSource::Upstream => "upstream",
            WindowSource::Catalog => "catalog",
            WindowSource::Default => "default",
        }
    }
}

/// Resolves windows: `--window` > config per model > upstream > catalog > default.
#[derive(Debug)]
pub struct Windows {
    forced: Option<u64>,
    configured: BTreeMap<String, u64>,
    discover: bool,
    catalog: Catalog,
    discovered: Mutex<HashMap<String, Option<u64>>>,
}

impl Windows {
    /// The precedence of `config`'s `window`, `windows`, `discover` and `catalog`.
    pub fn new(config: &ProxyConfig) -> Self {
        Windows {
            forced: config.window,
            configured: config.windows.clone(),
            discover: config.discover,
            catalog: config.catalog.clone(),
            discovered: Mutex::new(HashMap::new()),
        }
    }

    /// The window for `model`. `upstream` is the upstream's base URL; `headers` are the
    /// client's (already filtered), so that an upstream behind a key can answer the probes.
    pub async fn resolve(
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
        if self.discover {
            let cached = self.cached(model);
            let found = match cached {
                Some(found) => found,
                None => {
                    let found = probe(client, upstream, headers, model).await;
                    if let Some(window) = found {
                        tracing::info!(model, window, "context window reported by the upstream");
                    }
                    self.discovered
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(model.to_owned(), found);
                    found
                }
            };
            if let Some(window) = found {
                return (window, WindowSource::Upstream);
            }
        }
        let lookup = self.catalog.lookup(model);
        let source = if lookup.matched == MatchKind::Default {
            WindowSource::Default
        } else {
            WindowSource::Catalog
        };
        (lookup.context_window, source)
    }

    fn cached(&self, model: &str) -> Option<Option<u64>> {
        self.discovered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .copied()
    }
}

/// Tries llama.cpp, vLLM and Ollama in turn.
async fn probe(
    client: &reqwest::Client,
    base: &str,
    headers: &HeaderMap,
    model: &str,
) -> Option<u64> {
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
        return Some(n);
    }
    if let Some(models) = json_of(get("/v1/models").await).await
        && let Some(n) = vllm_window(&models, model)
    {
        return Some(n);
    }
    let show = client
        .post(format!("{base}/api/show"))
        .headers(headers.clone())
        .timeout(PROBE_TIMEOUT)
        .json(&json!({ "model": model }))
        .send()
        .await;
    json_of(show).await.and_then(|v| ollama_window(&v))
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
pub fn llama_cpp_window(props: &Value) -> Option<u64> {
    positive(props.pointer("/default_generation_settings/n_ctx"))
        .or_else(|| positive(props.get("n_ctx")))
}

/// vLLM `/v1/models`: the `max_model_len` of the entry whose id is `model` (or the only
/// entry, when there is just one).
pub fn vllm_window(models: &Value, model: &str) -> Option<u64> {
    let data = models.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    positive(entry.get("max_model_len"))
}

/// Ollama `/api/show`: `model_info.<architecture>.context_length`.
pub fn ollama_window(show: &Value) -> Option<u64> {
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
}
