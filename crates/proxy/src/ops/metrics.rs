//! Counters for `GET /metrics`, written by hand in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use context_cascade::Calibration;
use context_cascade::Report;

/// Every counter the proxy keeps. One lock: updates are a few map operations.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<Counters>,
}

#[derive(Debug, Default, Clone)]
struct Counters {
    requests: BTreeMap<(String, u16), u64>,
    strategies: BTreeMap<String, u64>,
    tokens_saved: u64,
    uncached_tokens: u64,
    upstream_calls: u64,
    overflow_errors: u64,
    overflow_recoveries: u64,
    overflow_exhausted: u64,
    summary_hits: u64,
    summary_misses: u64,
    summary_stand_ins: u64,
    llama_cpp_counts: u64,
    facts_stored: u64,
    facts_injected: u64,
    prefix_reused: u64,
    fast_path: u64,
    discovery: BTreeMap<String, u64>,
    connections_closed: BTreeMap<&'static str, u64>,
}

/// Why the connection limits closed (or refused) a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionClosed {
    /// Its request head was not complete at the header deadline.
    HeadTimeout,
    /// Its client held too many connections without a complete head: it was the oldest.
    Evicted,
    /// It came in over the connection limit and asked for something besides `/healthz`
    /// (answered 503).
    OverCapacity,
}

impl ConnectionClosed {
    /// The `reason` label.
    fn as_str(self) -> &'static str {
        match self {
            ConnectionClosed::HeadTimeout => "head_timeout",
            ConnectionClosed::Evicted => "evicted",
            ConnectionClosed::OverCapacity => "over_capacity",
        }
    }
}

/// A copy of the counters, for tests and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Calls made to the upstream on the cascade routes.
    pub upstream_calls: u64,
    /// Overflow errors the upstream answered.
    pub overflow_errors: u64,
    /// Requests answered after recovering from an overflow.
    pub overflow_recoveries: u64,
    /// Requests that still overflowed after every recovery step.
    pub overflow_exhausted: u64,
    /// Summaries served from the cache.
    pub summary_hits: u64,
    /// Summaries the summarizer had to write.
    pub summary_misses: u64,
    /// Remember requests stored.
    pub facts_stored: u64,
    /// Stored facts put back into a request.
    pub facts_injected: u64,
    /// Requests whose known prefix was re-applied (sticky prefix).
    pub prefix_reused: u64,
    /// Requests sent upstream as they came without being parsed whole (the fast path).
    pub fast_path: u64,
    /// Tokens the strategies freed.
    pub tokens_saved: u64,
    /// Tokens the provider bills uncached because a compaction changed the request
    /// (`Report::uncached_tokens`, summed).
    pub uncached_tokens: u64,
}

/// How a request on a cascade route ended, for [`Metrics::report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// The upstream answered (after recovering from any overflow it reported).
    Answered,
    /// Every recovery step was spent and the conversation still overflowed.
    Exhausted,
    /// The upstream failed with something other than an overflow.
    Failed,
}

impl Metrics {
    fn with(&self, f: impl FnOnce(&mut Counters)) {
        // A poisoned lock only means another request panicked mid-update; counters are
        // still usable.
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard);
    }

    /// One request answered on `route` with `status`.
    pub(crate) fn request(&self, route: &str, status: u16) {
        self.with(|c| *c.requests.entry((route.to_owned(), status)).or_default() += 1);
    }

    /// What the cascade did for one request: strategies, tokens saved, calls, overflows,
    /// and how the request ended.
    pub(crate) fn report(&self, report: &Report, outcome: CallOutcome) {
        let recovered = outcome == CallOutcome::Answered;
        let exhausted = outcome == CallOutcome::Exhausted;
        self.with(|c| {
            for step in &report.steps {
                *c.strategies
                    .entry(step.strategy.as_str().to_owned())
                    .or_default() += 1;
            }
            c.tokens_saved += report.tokens_freed();
            c.uncached_tokens += report.uncached_tokens;
            c.upstream_calls += report.calls as u64;
            let overflows = report.overflows;
            c.overflow_errors += overflows as u64;
            if recovered && overflows > 0 {
                c.overflow_recoveries += 1;
            }
            if exhausted {
                c.overflow_exhausted += 1;
            }
        });
    }

    /// A summary served from (or missed in) the cache.
    pub(crate) fn summary_cache(&self, hit: bool) {
        self.with(|c| {
            if hit {
                c.summary_hits += 1;
            } else {
                c.summary_misses += 1;
            }
        });
    }

    /// A model's first request was counted by its llama.cpp server.
    pub(crate) fn llama_cpp_count(&self) {
        self.with(|c| c.llama_cpp_counts += 1);
    }

    /// A summary of a shorter range stood in for one the cache did not have.
    pub(crate) fn summary_stand_in(&self) {
        self.with(|c| c.summary_stand_ins += 1);
    }

    /// Remembered facts newly stored / re-injected.
    pub(crate) fn facts(&self, stored: usize, injected: usize) {
        self.with(|c| {
            c.facts_stored += stored as u64;
            c.facts_injected += injected as u64;
        });
    }

    /// A request built on the previous request's compacted prefix.
    pub(crate) fn prefix_reused(&self) {
        self.with(|c| c.prefix_reused += 1);
    }

    /// A request the fast path sent upstream as it came.
    pub(crate) fn fast_path(&self) {
        self.with(|c| c.fast_path += 1);
    }

    /// Where a model's window came from (`flag`, `config`, `upstream`, `catalog`, `default`).
    pub(crate) fn window_source(&self, source: &str) {
        self.with(|c| *c.discovery.entry(source.to_owned()).or_default() += 1);
    }

    /// A connection the limits closed, and why.
    pub(crate) fn connection_closed(&self, reason: ConnectionClosed) {
        self.with(|c| *c.connections_closed.entry(reason.as_str()).or_default() += 1);
    }

    /// The counters as they are now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        self.with(|c| {
            s = Snapshot {
                upstream_calls: c.upstream_calls,
                overflow_errors: c.overflow_errors,
                overflow_recoveries: c.overflow_recoveries,
                overflow_exhausted: c.overflow_exhausted,
                summary_hits: c.summary_hits,
                summary_misses: c.summary_misses,
                facts_stored: c.facts_stored,
                facts_injected: c.facts_injected,
                prefix_reused: c.prefix_reused,
                fast_path: c.fast_path,
                tokens_saved: c.tokens_saved,
                uncached_tokens: c.uncached_tokens,
            }
        });
        s
    }

    /// The Prometheus text exposition, with the EMA scale per model from `calibration`.
    pub(crate) fn render(&self, calibration: &Calibration) -> String {
        let mut c = Counters::default();
        self.with(|counters| c = counters.clone());
        let mut out = String::new();
        header(
            &mut out,
            "cascade_requests_total",
            "counter",
            "Requests answered, by route and status.",
        );
        for ((route, status), n) in &c.requests {
            let _ = writeln!(
                out,
                "cascade_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        let strategies = c.strategies.iter().map(|(s, n)| (s.as_str(), n));
        let family = ("cascade_strategies_applied_total", "counter", "strategy");
        labelled(
            &mut out,
            family,
            "Cascade steps applied, by strategy.",
            strategies,
        );
        for (name, help, value) in PLAIN {
            let value = value(&c);
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            header(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
        let sources = c.discovery.iter().map(|(s, n)| (s.as_str(), n));
        let family = ("cascade_window_source_total", "counter", "source");
        labelled(
            &mut out,
            family,
            "Where context windows came from.",
            sources,
        );
        let closed = c.connections_closed.iter().map(|(r, n)| (*r, n));
        let family = ("cascade_connections_closed_total", "counter", "reason");
        let help = "Connections the client limits closed: head_timeout, evicted (the oldest \
                    of a client holding too many without a complete head), over_capacity \
                    (answered 503 beyond limits.max_connections).";
        labelled(&mut out, family, help, closed);
        let scales = calibration
            .models()
            .map(|(model, scale)| (model, scale.scale));
        let family = ("cascade_token_scale", "gauge", "model");
        let help = "EMA calibration scale (real / prior tokens) per model.";
        labelled(&mut out, family, help, scales);
        out
    }
}

/// A counter or gauge without labels: its name, its help, and how to read its value.
type Plain = (&'static str, &'static str, fn(&Counters) -> u64);

/// The counters and gauges without labels, in the order `/metrics` lists them.
const PLAIN: [Plain; 15] = [
    (
        "cascade_tokens_saved_total",
        "Estimated prompt tokens removed by the cascade.",
        |c| c.tokens_saved,
    ),
    (
        "cascade_compaction_uncached_tokens_total",
        "Estimated prompt tokens after the first message a compaction changed: billed uncached by a provider's prompt cache because of it.",
        |c| c.uncached_tokens,
    ),
    (
        "cascade_upstream_calls_total",
        "Calls made to the upstream on the cascade routes.",
        |c| c.upstream_calls,
    ),
    (
        "cascade_overflow_errors_total",
        "Upstream answers recognised as context overflows.",
        |c| c.overflow_errors,
    ),
    (
        "cascade_overflow_recoveries_total",
        "Requests that succeeded after at least one overflow.",
        |c| c.overflow_recoveries,
    ),
    (
        "cascade_overflow_exhausted_total",
        "Requests that still overflowed after the last retry.",
        |c| c.overflow_exhausted,
    ),
    (
        "cascade_summary_cache_hits_total",
        "Summaries served from the cache.",
        |c| c.summary_hits,
    ),
    (
        "cascade_summary_cache_misses_total",
        "Summaries that had to be computed.",
        |c| c.summary_misses,
    ),
    (
        "cascade_llama_cpp_counts_total",
        "First requests of a model counted by its llama.cpp server's tokenizer.",
        |c| c.llama_cpp_counts,
    ),
    (
        "cascade_summary_stand_ins_total",
        "Summaries of a shorter range used for one not cached (prepared_summary_gap), by requests and background jobs.",
        |c| c.summary_stand_ins,
    ),
    (
        "cascade_memory_facts_stored_total",
        "Remembered facts stored.",
        |c| c.facts_stored,
    ),
    (
        "cascade_memory_facts_injected_total",
        "Remembered facts re-injected into a system prompt.",
        |c| c.facts_injected,
    ),
    (
        "cascade_prefix_reused_total",
        "Requests built on the previous request's compacted prefix.",
        |c| c.prefix_reused,
    ),
    (
        "cascade_fast_path_total",
        "Requests sent upstream as they came, without parsing them whole (nothing to compact).",
        |c| c.fast_path,
    ),
    ("cascade_up", "Whether the proxy is serving.", |_| 1),
];

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes a family with one label, `(name, kind, label)`: its header, then a line per
/// label value (escaped) and value.
fn labelled<'a, V: std::fmt::Display>(
    out: &mut String,
    (name, kind, label): (&str, &str, &str),
    help: &str,
    rows: impl Iterator<Item = (&'a str, V)>,
) {
    header(out, name, kind, help);
    for (key, value) in rows {
        let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {value}", escape(key));
    }
}

/// Escapes a label value (backslash, quote, newline).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_labels() {
        let m = Metrics::default();
        m.request("/v1/messages", 200);
        m.request("/v1/messages", 200);
        m.summary_cache(true);
        let text = m.render(&Calibration::new());
        assert!(text.contains("cascade_requests_total{route=\"/v1/messages\",status=\"200\"} 2"));
        assert!(text.contains("cascade_summary_cache_hits_total 1"));
        assert_eq!(escape("a\"b"), "a\\\"b");
        m.connection_closed(ConnectionClosed::Evicted);
        m.connection_closed(ConnectionClosed::Evicted);
        let text = m.render(&Calibration::new());
        assert!(text.contains("cascade_connections_closed_total{reason=\"evicted\"} 2"));
    }

    #[test]
    fn counts_the_tokens_compactions_leave_uncached() {
        let m = Metrics::default();
        let report = Report {
            format: context_cascade::Format::OpenAi,
            window: 1_000,
            reserve: 0,
            tokens_before: 900,
            tokens_after: 600,
            messages_before: 10,
            messages_after: 10,
            steps: Vec::new(),
            fits: true,
            degraded: false,
            calls: 1,
            overflows: 0,
            token_scale: 1.0,
            first_changed: Some(4),
            uncached_tokens: 250,
            reason: None,
            estimated_messages: 0,
        };
        m.report(&report, CallOutcome::Answered);
        m.report(&report, CallOutcome::Answered);
        assert_eq!(m.snapshot().uncached_tokens, 500);
        let text = m.render(&Calibration::new());
        assert!(text.contains("# TYPE cascade_compaction_uncached_tokens_total counter"));
        assert!(text.contains("cascade_compaction_uncached_tokens_total 500"));
    }
}
