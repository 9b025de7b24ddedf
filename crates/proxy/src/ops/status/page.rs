//! The status page as server-rendered HTML: no script, one inline style sheet, one inline
//! SVG chart per conversation shown in detail.
//!
//! Everything written comes from the recorder's counts, the metrics counters and the
//! calibration of admitted model names; every text is escaped all the same.

use std::fmt::Write as _;

use context_cascade::Scale;

use super::record::{Bounds, CallRecord, StepRecord, Timeline, Totals};
use super::svg;

/// Conversations shown in detail when none is asked for (the others are listed).
pub(crate) const DETAILED: usize = 5;
/// Compactions listed per conversation (the latest ones).
const COMPACTIONS_LISTED: usize = 12;
/// Seconds between two automatic reloads of the page.
const REFRESH_SECS: u32 = 30;

/// Everything the page shows.
pub(crate) struct View<'a> {
    /// The conversations, most recently seen first.
    pub timelines: &'a [Timeline],
    /// Totals over every request recorded.
    pub totals: Totals,
    /// What the recorder keeps.
    pub bounds: Bounds,
    /// Summaries served from the cache, and written afresh.
    pub summary_hits: u64,
    /// Summaries the summarizer had to write.
    pub summary_misses: u64,
    /// The calibration of the admitted model names.
    pub calibration: Vec<(String, Scale)>,
    /// The conversation asked for (`?c=ID`): only it is shown in detail.
    pub selected: Option<&'a str>,
    /// What every link must carry to stay authorized (`token=...`), already encoded.
    pub link_query: Option<String>,
    /// Now, seconds since the Unix epoch.
    pub now: u64,
}

/// Escapes text for HTML content and double-quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;max-width:1100px}\
h1{font-size:20px}h2{font-size:16px;margin-top:24px}h3{font-size:14px}\
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}.note{color:#666;font-size:12px}\
.chart .in{stroke:#aaa;stroke-width:1.5}.chart .sent{stroke:#1f6feb;stroke-width:1.5}\
.chart .window{stroke:#d1242f;stroke-dasharray:4 3}.chart .budget{stroke:#e09000;stroke-dasharray:1 3}\
.chart .fired{fill:#8250df}.key span{margin-right:12px}";

/// The whole page.
pub(crate) fn render(view: &View<'_>) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>context-cascade proxy status</title><style>{STYLE}</style></head><body>\
         <h1>context-cascade proxy status</h1>\
         <p class=\"note\">This replica only, from memory since it started (the last {} \
         conversations, the last {} requests of each). Conversations are shown by a hash of \
         their key, never by content. Generated {} UTC; reloads every {REFRESH_SECS} s.</p>",
        view.bounds.conversations,
        view.bounds.calls,
        clock(view.now)
    );
    overview(&mut out, view);
    calibration(&mut out, &view.calibration);
    conversations(&mut out, view);
    let detailed: Vec<&Timeline> = match view.selected {
        Some(id) => view.timelines.iter().filter(|t| t.id == id).collect(),
        None => view.timelines.iter().take(DETAILED).collect(),
    };
    if view.selected.is_some() && detailed.is_empty() {
        out.push_str("<p>That conversation is not (or no longer) kept here.</p>");
    }
    for timeline in detailed {
        detail(&mut out, timeline);
    }
    out.push_str("</body></html>\n");
    out
}

fn overview(out: &mut String, view: &View<'_>) {
    let totals = &view.totals;
    let lookups = view.summary_hits + view.summary_misses;
    let hit_rate = if lookups == 0 {
        "no summaries yet".to_owned()
    } else {
        format!(
            "{} ({} of {})",
            percent(view.summary_hits as f64 / lookups as f64),
            view.summary_hits,
            lookups
        )
    };
    let stability = if totals.stability.compared == 0 {
        "no request to compare yet".to_owned()
    } else {
        format!(
            "{} ({} of {})",
            percent(totals.stability.share()),
            totals.stability.extending,
            totals.stability.compared
        )
    };
    let _ = write!(
        out,
        "<h2>Overview</h2><table id=\"overview\">\
         <tr><th class=\"l\">requests recorded</th><td>{}</td></tr>\
         <tr><th class=\"l\">requests compacted</th><td>{}</td></tr>\
         <tr><th class=\"l\">conversations kept</th><td>{} ({} dropped, least recent first)</td></tr>\
         <tr><th class=\"l\">summary cache hit rate</th><td>{hit_rate}</td></tr>\
         <tr><th class=\"l\">prefix stability (requests extending the previous one)</th><td>{stability}</td></tr>\
         </table>",
        totals.requests,
        totals.compacted,
        view.timelines.len(),
        totals.evicted
    );
}

fn calibration(out: &mut String, models: &[(String, Scale)]) {
    out.push_str("<h2>Calibration per model</h2>");
    if models.is_empty() {
        out.push_str("<p>No model calibrated yet.</p>");
        return;
    }
    out.push_str(
        "<table id=\"calibration\"><tr><th class=\"l\">model</th>\
         <th>real / estimated tokens</th><th>observations</th></tr>",
    );
    for (model, scale) in models {
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{:.3}</td><td>{}</td></tr>",
            escape(model),
            scale.scale,
            scale.observations
        );
    }
    out.push_str("</table>");
}

fn conversations(out: &mut String, view: &View<'_>) {
    out.push_str("<h2>Conversations</h2>");
    if view.timelines.is_empty() {
        out.push_str("<p>No conversation seen yet.</p>");
        return;
    }
    out.push_str(
        "<table id=\"conversations\"><tr><th class=\"l\">conversation</th><th class=\"l\">model</th>\
         <th>requests</th><th>compacted</th><th>last tokens / window</th>\
         <th>prefix stability</th><th>last seen</th></tr>",
    );
    for t in view.timelines {
        let last = t.calls.back();
        let tokens = last.map_or_else(String::new, |c| {
            format!("{} / {}", svg::short(c.tokens_after), svg::short(c.window))
        });
        let extra = view
            .link_query
            .as_deref()
            .map_or_else(String::new, |q| format!("&amp;{}", escape(q)));
        let _ = write!(
            out,
            "<tr class=\"conversation\" data-id=\"{id}\"><td class=\"l\"><a href=\"?c={id}{extra}\">{id}</a></td>\
             <td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{tokens}</td><td>{}</td><td>{} ago</td></tr>",
            escape(t.model.as_deref().unwrap_or("-")),
            t.requests,
            t.compactions(),
            stability_cell(t),
            ago(view.now.saturating_sub(t.last_seen())),
            id = escape(&t.id),
        );
    }
    out.push_str("</table>");
}

fn stability_cell(t: &Timeline) -> String {
    if t.stability.compared == 0 {
        "-".to_owned()
    } else {
        format!(
            "{} ({}/{})",
            percent(t.stability.share()),
            t.stability.extending,
            t.stability.compared
        )
    }
}

fn detail(out: &mut String, t: &Timeline) {
    let calls: Vec<CallRecord> = t.calls.iter().cloned().collect();
    let _ = write!(
        out,
        "<section class=\"timeline\" id=\"c-{id}\"><h2>Conversation {id}</h2>\
         <p>{} request(s) seen, the last {} kept; first seen {} UTC; prefix stability {}.</p>",
        t.requests,
        calls.len(),
        clock(t.first_seen),
        stability_cell(t),
        id = escape(&t.id),
    );
    out.push_str(&svg::chart(&calls));
    out.push_str(
        "<p class=\"note key\"><span>grey: tokens as the request came in</span>\
         <span>blue: as sent upstream</span><span>red dashed: window</span>\
         <span>orange dotted: window less the output reserve</span>\
         <span>dots: a strategy ran</span></p>",
    );
    let fired: Vec<&CallRecord> = calls.iter().filter(|c| !c.steps.is_empty()).collect();
    if fired.is_empty() {
        out.push_str("<p>No compaction: every request fitted.</p></section>");
        return;
    }
    let shown = &fired[fired.len().saturating_sub(COMPACTIONS_LISTED)..];
    let _ = write!(
        out,
        "<h3>Compactions ({} of the requests kept; the last {} listed)</h3>\
         <table class=\"compactions\"><tr><th>request</th><th>time</th><th class=\"l\">strategy</th>\
         <th>tokens before &#8594; after</th><th>messages removed</th>\
         <th>trail: files</th><th>errors</th><th>commands</th><th>user requests</th>\
         <th>left out</th><th>trail tokens</th><th class=\"l\">request</th></tr>",
        fired.len(),
        shown.len()
    );
    for call in shown {
        for (i, step) in call.steps.iter().enumerate() {
            step_row(out, call, step, i == 0);
        }
    }
    out.push_str("</table></section>");
}

fn step_row(out: &mut String, call: &CallRecord, step: &StepRecord, first: bool) {
    let mut name = step.strategy.as_str().to_owned();
    if let Some(level) = step.level {
        let _ = write!(name, " (level {level})");
    }
    if let Some(attempt) = step.attempt {
        let _ = write!(name, ", recovery {attempt}");
    }
    if step.inside_current_turn {
        name.push_str(", inside the current turn");
    }
    let trail = match step.trail {
        Some(t) => format!(
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            t.files, t.errors, t.commands, t.requests, t.left_out, t.tokens
        ),
        None => "<td colspan=\"6\" class=\"l note\">no trail</td>".to_owned(),
    };
    let outcome = if first {
        let mut text = format!("{}, {} call(s)", call.outcome.as_str(), call.calls);
        if call.overflows > 0 {
            let _ = write!(text, ", {} overflow(s)", call.overflows);
        }
        if !call.fits {
            text.push_str(", over budget");
        }
        text
    } else {
        String::new()
    };
    let _ = write!(
        out,
        "<tr class=\"step\"><td>{}</td><td>{}</td><td class=\"l strategy\">{}</td>\
         <td>{} &#8594; {}</td><td>{}</td>{trail}<td class=\"l\">{}</td></tr>",
        if first {
            format!("#{}", call.number)
        } else {
            String::new()
        },
        if first { clock(call.at) } else { String::new() },
        escape(&name),
        step.tokens_before,
        step.tokens_after,
        step.messages_removed,
        escape(&outcome),
    );
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// `HH:MM:SS` of a Unix time (UTC).
fn clock(unix: u64) -> String {
    let day = unix % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

fn ago(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        _ => format!("{} h", seconds / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::status::record::Recorder;
    use context_cascade::{Budget, CallError, Called, CascadeConfig, ContextManager, format};
    use serde_json::json;

    /// A conversation whose compaction writes a trail naming a file, an error and the
    /// user's request: none of it may reach the page.
    fn compacted_timeline() -> (Vec<Timeline>, Totals) {
        let secret_request = "please refactor SECRET_REQUEST_TEXT in the parser";
        let mut messages = vec![json!({"role": "system", "content": "You are an agent."})];
        messages.push(json!({"role": "user", "content": secret_request}));
        for i in 0..30 {
            let id = format!("call_{i}");
            if i == 3 {
                let follow_up = "also rename SECRET_FOLLOW_UP in the lexer";
                messages.push(json!({"role": "user", "content": follow_up}));
            }
            let thought = format!("SECRET_THOUGHT {}", "the parser is wrong ".repeat(60));
            messages.push(json!({"role": "assistant", "content": thought, "tool_calls": [{
                "id": id, "type": "function", "function": {"name": "read_file",
                "arguments": json!({"path": format!("src/secret_dir/secret_file_{i}.rs")}).to_string()}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": id,
                "content": format!("error[E0308]: SECRET_CONTENT {}", "x ".repeat(1500))}));
        }
        messages.push(json!({"role": "user", "content": "and now the SECRET_LAST_QUESTION"}));
        let body = json!({"model": "gpt-4o", "messages": messages});
        let mut sent = format::parse(body.to_string().as_bytes(), None).unwrap();
        let manager = ContextManager::new(CascadeConfig::default());
        let report = pollster::block_on(manager.prepare(&mut sent, Budget::new(6_000, 0)));
        let trail = report
            .trail()
            .unwrap_or_else(|| panic!("{}", report.summary_line()));
        assert!(trail.files > 0 && trail.requests > 0, "{trail:?}");
        let recorder = Recorder::new(Bounds::default());
        let result: Result<Called<()>, CallError> = Ok(Called { output: (), report });
        recorder.record("tenant-key", Some("gpt-4o"), &result, &sent);
        recorder.snapshot()
    }

    fn view<'a>(timelines: &'a [Timeline], totals: Totals) -> View<'a> {
        View {
            timelines,
            totals,
            bounds: Bounds::default(),
            summary_hits: 3,
            summary_misses: 1,
            calibration: vec![(
                "gpt-4o".into(),
                Scale {
                    scale: 1.25,
                    observations: 4,
                    weight: 0.0,
                },
            )],
            selected: None,
            link_query: None,
            now: 0,
        }
    }

    #[test]
    fn the_page_shows_counts_and_never_content() {
        let (timelines, totals) = compacted_timeline();
        let html = render(&view(&timelines, totals));
        for secret in ["SECRET", "secret_file", "secret_dir", "read_file", "E0308"] {
            assert!(!html.contains(secret), "{secret} leaked into the page");
        }
        assert!(html.contains(&timelines[0].id));
        assert!(html.contains("<svg") && html.contains("<polyline"));
        assert!(html.contains("class=\"l strategy\""));
        assert!(html.contains("75.0% (3 of 4)"), "summary cache hit rate");
        assert!(html.contains("1.250"), "calibration");
        assert!(html.len() < 16 * 1024, "{} bytes", html.len());
    }

    #[test]
    fn names_are_escaped() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        let (timelines, totals) = compacted_timeline();
        let mut v = view(&timelines, totals);
        v.calibration[0].0 = "<script>alert(1)</script>".into();
        v.link_query = Some("token=a\"b".into());
        let html = render(&v);
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(!html.contains("a\"b"));
    }

    #[test]
    fn a_selected_conversation_is_the_only_one_in_detail() {
        let (timelines, totals) = compacted_timeline();
        let mut v = view(&timelines, totals);
        v.selected = Some("000000000000");
        let html = render(&v);
        assert!(!html.contains("<svg"));
        assert!(html.contains("no longer"));
        let id = timelines[0].id.clone();
        v.selected = Some(&id);
        assert!(render(&v).contains("<svg"));
    }

    #[test]
    fn clock_and_ago() {
        assert_eq!(clock(86_400 + 3661), "01:01:01");
        assert_eq!(ago(59), "59 s");
        assert_eq!(ago(120), "2 min");
        assert_eq!(ago(7200), "2 h");
    }
}
