//! Which window a command works against: `--window`, else the `--config` file's
//! `[window]`, else the catalog entry of `--model` or of the body's `model` (with the file's
//! `[[model]]` entries), else the catalog's default (with a warning). The file's `[cascade]`
//! table configures the engine: the same schema the proxy reads.

use std::path::PathBuf;

use cascade_proxy::ProxyConfig;
use context_cascade::Budget;
use context_cascade::catalog::{Catalog, DEFAULT_CONTEXT_WINDOW, MatchKind, ModelEntry};
use context_cascade::{CascadeConfig, ContextManager, Conversation, Load};

use crate::error::CliError;

/// The window flags shared by `inspect`, `compact` and `replay`, and the config file.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WindowArgs {
    /// TOML config file, the proxy's (docs/configuration.md): its `[cascade]` settings,
    /// `[window]` and `[[model]]` entries apply.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Context window in tokens (takes precedence over the catalog).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) window: Option<u64>,
    /// Model id to look up in the catalog (default: the body's "model").
    #[arg(long, value_name = "ID")]
    pub(crate) model: Option<String>,
    /// Output reserve in tokens (default: the body's max_tokens / max_completion_tokens).
    #[arg(long, value_name = "N")]
    pub(crate) reserve: Option<u64>,
}

/// How far up the prior's estimate is taken before deciding exact counts cannot matter.
const PRIOR_MARGIN: f64 = 1.25;

/// Whether nothing in the cascade would fire on `conversation` even with its estimate a
/// quarter higher: no strategy runs, so counting it exactly changes nothing.
fn clearly_untouched(
    manager: &ContextManager,
    conversation: &Conversation,
    budget: Budget,
) -> bool {
    let estimator = manager.estimator(conversation.model().unwrap_or(""));
    let load = Load::of(conversation, &estimator);
    let up = |tokens: u64| (tokens as f64 * PRIOR_MARGIN).ceil() as u64;
    let load = Load {
        tokens: up(load.tokens),
        largest_result: up(load.largest_result),
    };
    manager.config().leaves_untouched(load, budget)
}

/// The window in force and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) budget: Budget,
    /// The model the window (and the starting token scale) was looked up for.
    pub(crate) model: Option<String>,
    /// The catalog entry the engine should find for the body's model id.
    alias: Option<ModelEntry>,
    /// "--window", "catalog: gpt-4o (exact)", "default" ...: shown by `inspect`.
    pub(crate) source: String,
    /// The engine's settings (the config file's `[cascade]`, else the defaults).
    cascade: CascadeConfig,
    /// The catalog with the config file's `[[model]]` entries.
    catalog: Catalog,
}

impl WindowArgs {
    /// Resolves the budget for `conversation`; fails on a config file that cannot work.
    pub(crate) fn resolve(&self, conversation: &Conversation) -> Result<Resolved, CliError> {
        let file = match &self.config {
            Some(path) => ProxyConfig::load(path).map_err(|e| CliError::Usage(e.to_string()))?,
            None => ProxyConfig::default(),
        };
        let model = self
            .model
            .clone()
            .or_else(|| conversation.model().map(str::to_owned));
        let catalog = file.catalog;
        let lookup = model.as_deref().map(|m| catalog.lookup(m));
        let configured = (model.as_deref()).and_then(|m| file.window.models.get(m).copied());
        let (window, source) = match (self.window, file.window.force, configured, &lookup) {
            (Some(w), ..) => (w, "--window".to_owned()),
            (None, Some(w), ..) => (w, "config: window.force".to_owned()),
            (None, None, Some(w), _) => (w, "config: window.models".to_owned()),
            (None, None, None, Some(l)) => match (&l.matched, &l.entry_id) {
                (MatchKind::Default, _) | (_, None) => {
                    // The catalog logs nothing itself: the window is a guess only here.
                    let model = context_cascade::logged::clipped(model.as_deref().unwrap_or(""));
                    tracing::warn!(
                        model = ?model,
                        "unknown model: assuming {} tokens of context",
                        l.context_window
                    );
                    (l.context_window, "default".to_owned())
                }
                (kind, Some(id)) => {
                    let kind = if *kind == MatchKind::Exact {
                        "exact"
                    } else {
                        "prefix"
                    };
                    (l.context_window, format!("catalog: {id} ({kind})"))
                }
            },
            (None, None, None, None) => {
                let window = DEFAULT_CONTEXT_WINDOW;
                tracing::warn!(
                    "no --window, --model or \"model\" in the body: assuming {window} tokens of context"
                );
                (window, "default".to_owned())
            }
        };
        let reserve = self
            .reserve
            .unwrap_or_else(|| conversation.output_reserve());
        if reserve >= window {
            tracing::warn!(
                reserve,
                window,
                "the output reserve leaves no room for input"
            );
        }
        let token_scale = lookup.and_then(|l| l.token_scale);
        if self.model.is_some() && conversation.model().is_none() && token_scale.is_some() {
            tracing::warn!(
                "the body names no model: estimates use the default token scale, not the \
                 starting scale of --model"
            );
        }
        // The engine keys its estimates on the body's model id and looks it up in its own
        // catalog: tell it what was resolved here, so `--model` decides the token scale too
        // and an unknown model is warned about once (above).
        let alias = conversation.model().map(|body| ModelEntry {
            id: body.to_owned(),
            context_window: window,
            prefix: false,
            token_scale,
            note: Some("resolved by the command line".to_owned()),
        });
        Ok(Resolved {
            budget: Budget::new(window, reserve),
            model,
            source,
            alias,
            cascade: file.cascade,
            catalog,
        })
    }
}

impl Resolved {
    /// The engine for this conversation: the config file's settings (else the defaults) and
    /// the offline summarizer, with the catalog told how the body's model was resolved
    /// (`--model` included).
    pub(crate) fn manager(&self) -> ContextManager {
        self.exact_counts(self.prior_manager())
    }

    /// The engine's settings (the config file's `[cascade]`, else the defaults).
    pub(crate) fn cascade(&self) -> &CascadeConfig {
        &self.cascade
    }

    /// Which counter counts a model exactly, as [`Resolved::manager`] counts: the resolved
    /// model's tokenizer, whatever the body names (`None` without feature `exact`).
    pub(crate) fn counters(&self) -> Option<context_cascade::estimate::CounterFor> {
        #[cfg(feature = "exact")]
        {
            let model = self.model.clone().unwrap_or_default();
            Some(std::sync::Arc::new(move |_: &str| {
                context_cascade::estimate::exact::counter_for_model(&model)
            }))
        }
        #[cfg(not(feature = "exact"))]
        None
    }

    /// The engine without exact counts: every model estimated with the prior.
    fn prior_manager(&self) -> ContextManager {
        let manager = ContextManager::new(self.cascade.clone());
        match &self.alias {
            Some(entry) => manager.with_catalog(self.catalog.clone().with_override(entry.clone())),
            None => manager.with_catalog(self.catalog.clone()),
        }
    }

    /// The engine that compacts `conversation`: [`Resolved::manager`], with exact counts
    /// only where they can change what the cascade does. A one-shot command loads nothing for
    /// them (the tables are in the binary), but counting costs about 20 ms per 313K tokens
    /// (docs/benchmarks.md §11). The prior is within 10% of o200k on every fixture
    /// (docs/benchmarks.md §3): a request whose estimate, a quarter up, stays under ②'s
    /// headroom with no tool result over ①'s share is left as it is whichever way it is
    /// counted, and is not counted. At the other end the engine itself plans a request the
    /// prior puts a quarter over the preemptive threshold with the prior, and counts only
    /// what it sends (`context_cascade`'s engine/planned.rs).
    pub(crate) fn manager_for(&self, conversation: &Conversation) -> ContextManager {
        let prior = self.prior_manager();
        if clearly_untouched(&prior, conversation, self.budget) {
            return prior;
        }
        self.exact_counts(prior)
    }

    /// Exact counts where the resolved model's tokenizer is public (feature `exact`): the
    /// model `--model` names counts, whatever the body says.
    #[cfg(feature = "exact")]
    fn exact_counts(&self, manager: ContextManager) -> ContextManager {
        manager.with_exact_counts_as(self.model.as_deref().unwrap_or_default())
    }

    #[cfg(not(feature = "exact"))]
    fn exact_counts(&self, manager: ContextManager) -> ContextManager {
        manager
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure
    use super::*;
    use context_cascade::format::parse;

    fn request(tool_output_chars: usize) -> Conversation {
        let body = serde_json::json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.rs ".repeat(tool_output_chars / 5)},
        ]});
        parse(&serde_json::to_vec(&body).unwrap(), None).unwrap()
    }

    #[test]
    fn exact_counts_are_skipped_only_where_no_strategy_can_fire() {
        let manager = ContextManager::new(CascadeConfig::default());
        let window = Budget::new(10_000, 0);
        // A few hundred tokens in a 10K window: nothing fires, however it is counted.
        assert!(clearly_untouched(&manager, &request(1_000), window));
        // About 6K tokens: under ②'s 7.5K headroom by the prior, not by a quarter more.
        assert!(!clearly_untouched(&manager, &request(22_000), window));
        // One result at ①'s share (half the window) while the whole, a quarter up, stays
        // under ②'s headroom (three quarters): ① alone decides.
        let conversation = request(16_000);
        let total = manager.estimate(&conversation);
        let window = Budget::new(total * 2, 0);
        assert!(total as f64 * PRIOR_MARGIN <= window.share(0.75) as f64);
        assert!(!clearly_untouched(&manager, &conversation, window));
    }
}
