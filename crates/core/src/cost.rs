//! What a session costs in money: every call of an agent loop priced by its provider's
//! prompt-cache rules, for the cascade and for the alternatives a user has (the CLI's
//! `cascade replay --cost` and the benchmark's "Cost per session" both price through here).
//!
//! # The model
//!
//! A provider bills a request's input in three parts: the prefix it already holds in its
//! cache (**cache read**), the rest, which it writes to the cache for the next call (**cache
//! write**: Anthropic bills it at 1.25× the input price, OpenAI at the input price), and
//! the reply (**output**). A call's cached prefix is what the request shares with the
//! previous request sent, message by message ([`crate::replay::common_prefix`]): a request
//! that extends the previous one reads all of it from the cache; one that the cascade
//! rewrote reads up to its first changed message and writes everything after. The cache
//! is assumed warm between calls (an agent calls again within the five minutes Anthropic
//! keeps it) and no minimum cacheable length applies.
//!
//! Summaries cost calls too: ④'s summarizer (priced as if a model wrote what the offline
//! summarizer writes, at the session's prices) and a client's own compaction, which sends
//! the whole history once more with its summary prompt and gets the summary back.
//!
//! The replies are the transcript's own: the same output for every strategy.
//!
//! ```
//! use context_cascade::cost::{Billed, Prices};
//!
//! // 100K tokens, 90K of them the previous request's prefix, 500 tokens of reply.
//! let billed = Billed::call(100_000, 90_000, 500);
//! let prices = Prices::for_model("claude-sonnet-4-5");
//! let dollars = billed.dollars(&prices);
//! // 90K × $0.30 + 10K × $3.75 + 500 × $15 per million tokens.
//! assert!((dollars - (0.027 + 0.0375 + 0.0075)).abs() < 1e-9);
//! ```

mod session;

pub use session::{ClientRule, Plan, SessionCost, price_session};

/// One model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Prices {
    /// The model family the prices are for.
    pub name: &'static str,
    /// Input not in the cache and not written to it (a request's uncached part, where the
    /// provider bills no write premium, is billed at [`Prices::cache_write`] instead).
    pub input: f64,
    /// Input read from the cache.
    pub cache_read: f64,
    /// Input written to the cache: Anthropic's 5-minute write, 1.25× input; OpenAI bills no
    /// premium (the input price).
    pub cache_write: f64,
    /// Output.
    pub output: f64,
}

/// The date of the prices below (docs/benchmarks.md, "Cost per session", says where they
/// come from and how they were checked).
pub const PRICES_AS_OF: &str = "2026-12-04";

impl Prices {
    /// Anthropic Claude Sonnet 4.x: $3 input, $15 output; cache read 0.1×, 5-minute write
    /// 1.25×.
    pub const CLAUDE_SONNET: Prices = Prices {
        name: "Claude Sonnet 4.x",
        input: 3.0,
        cache_read: 0.30,
        cache_write: 3.75,
        output: 15.0,
    };
    /// Anthropic Claude Opus 4.5 and later: $5 input, $25 output, same cache rules.
    pub const CLAUDE_OPUS: Prices = Prices {
        name: "Claude Opus 4.5+",
        input: 5.0,
        cache_read: 0.50,
        cache_write: 6.25,
        output: 25.0,
    };
    /// Anthropic Claude Haiku 4.5: $1 input, $5 output, same cache rules.
    pub const CLAUDE_HAIKU: Prices = Prices {
        name: "Claude Haiku 4.5",
        input: 1.0,
        cache_read: 0.10,
        cache_write: 1.25,
        output: 5.0,
    };
    /// OpenAI GPT-4o: $2.50 input, $1.25 cached input (0.5×), $10 output, no write premium.
    pub const GPT_4O: Prices = Prices {
        name: "GPT-4o",
        input: 2.50,
        cache_read: 1.25,
        cache_write: 2.50,
        output: 10.0,
    };
    /// OpenAI GPT-4.1: $2 input, $0.50 cached input (0.25×), $8 output.
    pub const GPT_4_1: Prices = Prices {
        name: "GPT-4.1",
        input: 2.0,
        cache_read: 0.50,
        cache_write: 2.0,
        output: 8.0,
    };
    /// OpenAI GPT-5: $1.25 input, $0.125 cached input (0.1×), $10 output.
    pub const GPT_5: Prices = Prices {
        name: "GPT-5",
        input: 1.25,
        cache_read: 0.125,
        cache_write: 1.25,
        output: 10.0,
    };

    /// The prices of a model id (a `provider/` prefix is ignored): Claude's families by
    /// name, OpenAI's GPT-4o, GPT-4.1 and GPT-5; any other model at GPT-5's, the
    /// cheapest cached input of the OpenAI-compatible APIs listed here.
    pub fn for_model(model: &str) -> Prices {
        let id = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        if id.contains("claude") {
            if id.contains("opus") {
                Prices::CLAUDE_OPUS
            } else if id.contains("haiku") {
                Prices::CLAUDE_HAIKU
            } else {
                Prices::CLAUDE_SONNET
            }
        } else if id.starts_with("gpt-4o") || id.starts_with("chatgpt-4o") {
            Prices::GPT_4O
        } else if id.starts_with("gpt-4.1") {
            Prices::GPT_4_1
        } else {
            Prices::GPT_5
        }
    }
}

/// Tokens billed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Billed {
    /// Input read from the provider's cache.
    pub cache_read: u64,
    /// Input written to the cache (or, where the provider bills no premium, plain input).
    pub cache_write: u64,
    /// Output.
    pub output: u64,
}

impl Billed {
    /// One call: a request of `tokens`, of which the first `cached` were the previous
    /// request's prefix, answered with `output` tokens.
    pub fn call(tokens: u64, cached: u64, output: u64) -> Billed {
        let cached = cached.min(tokens);
        Billed {
            cache_read: cached,
            cache_write: tokens - cached,
            output,
        }
    }

    /// Input tokens of every kind.
    pub fn input(&self) -> u64 {
        self.cache_read + self.cache_write
    }

    /// What these tokens cost at `prices`, in US dollars.
    pub fn dollars(&self, prices: &Prices) -> f64 {
        (self.cache_read as f64 * prices.cache_read
            + self.cache_write as f64 * prices.cache_write
            + self.output as f64 * prices.output)
            / 1e6
    }
}

impl std::ops::AddAssign for Billed {
    fn add_assign(&mut self, rhs: Billed) {
        self.cache_read += rhs.cache_read;
        self.cache_write += rhs.cache_write;
        self.output += rhs.output;
    }
}

/// The plans a session is priced under, named: the cascade as `config` sets it (④'s
/// summaries written when needed, and prepared ahead as the proxy's background summaries
/// do, at `config`'s threshold and with stand-ins at 0.2·E), SPEC's rule for ② and ③'s
/// first target, each client's own compaction, and no management.
pub fn standard_plans(config: &crate::CascadeConfig) -> Vec<(String, Plan)> {
    let cascade = |config: crate::CascadeConfig, ahead: bool| Plan::Cascade {
        config: Box::new(config),
        ahead,
    };
    let mut stand_ins = config.clone();
    stand_ins.background.summary_ratio = 0.2;
    stand_ins.experimental.prepared_summary_gap = 0.5;
    let mut spec = config.clone();
    let rules = crate::CascadeConfig::spec();
    spec.layer1.compact_short_of_watermark = rules.layer1.compact_short_of_watermark;
    spec.layer1.low_watermark = rules.layer1.low_watermark;
    spec.recovery.preemptive_target = rules.recovery.preemptive_target;
    vec![
        ("cascade".into(), cascade(config.clone(), false)),
        (
            "cascade, summaries ahead".into(),
            cascade(config.clone(), true),
        ),
        (
            "cascade, summaries ahead at 0.2·E with stand-ins".into(),
            cascade(stand_ins, true),
        ),
        (
            "cascade, SPEC's rule for ② and ③".into(),
            cascade(spec, false),
        ),
        (
            ClientRule::ClaudeCode.name().into(),
            Plan::Client(ClientRule::ClaudeCode),
        ),
        (
            ClientRule::Codex.name().into(),
            Plan::Client(ClientRule::Codex),
        ),
        ("no management".into(), Plan::Unmanaged),
    ]
}

#[cfg(test)]
mod tests;
