//! The timeline chart: tokens per request against the window, as inline SVG (no script,
//! no external resource).
//!
//! x is the request, y the estimated tokens. Two lines: the request as it came in (grey)
//! and as it went upstream (blue); the window (red, dashed) and the budget left after the
//! output reserve (orange, dotted) as steps; a dot on each request where a strategy ran.

use std::fmt::Write as _;

use super::record::CallRecord;

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 160.0;
/// Room for the y labels on the left and the x labels below.
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 18.0;
const TOP: f64 = 6.0;
const RIGHT: f64 = 6.0;

/// The chart of `calls` (oldest first) as an `<svg>` element.
pub(crate) fn chart(calls: &[CallRecord]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">"#
    );
    let _ = write!(
        out,
        "<title>tokens per request against the window, {} request(s)</title>",
        calls.len()
    );
    let top = calls
        .iter()
        .map(|c| c.window.max(c.tokens_before).max(c.tokens_after))
        .max()
        .unwrap_or(0)
        .max(1);
    let scale = Scale {
        n: calls.len(),
        top: top as f64,
    };
    axes(&mut out, &scale, calls);
    let window = |c: &CallRecord| c.window;
    let budget = |c: &CallRecord| c.window.saturating_sub(c.reserve);
    if calls.iter().any(|c| c.reserve > 0) {
        steps_line(&mut out, &scale, calls, budget, "budget");
    }
    steps_line(&mut out, &scale, calls, window, "window");
    line(&mut out, &scale, calls, |c| c.tokens_before, "in");
    line(&mut out, &scale, calls, |c| c.tokens_after, "sent");
    for (i, call) in calls.iter().enumerate() {
        if call.steps.is_empty() {
            continue;
        }
        let names: Vec<&str> = call.steps.iter().map(|s| s.strategy.as_str()).collect();
        let _ = write!(
            out,
            r#"<circle class="fired" cx="{:.1}" cy="{:.1}" r="3"><title>request {}: {}</title></circle>"#,
            scale.x(i),
            scale.y(call.tokens_after),
            call.number,
            names.join(", ")
        );
    }
    out.push_str("</svg>");
    out
}

struct Scale {
    n: usize,
    top: f64,
}

impl Scale {
    fn x(&self, i: usize) -> f64 {
        let span = WIDTH - LEFT - RIGHT;
        if self.n <= 1 {
            return LEFT + span / 2.0;
        }
        LEFT + span * i as f64 / (self.n - 1) as f64
    }

    fn y(&self, tokens: u64) -> f64 {
        let span = HEIGHT - TOP - BOTTOM;
        TOP + span * (1.0 - (tokens as f64 / self.top).min(1.0))
    }
}

fn axes(out: &mut String, scale: &Scale, calls: &[CallRecord]) {
    let bottom = HEIGHT - BOTTOM;
    let _ = write!(
        out,
        r##"<path class="axis" d="M{LEFT} {TOP}V{bottom}H{}" fill="none" stroke="#888"/>"##,
        WIDTH - RIGHT
    );
    for tokens in [scale.top as u64, scale.top as u64 / 2] {
        let _ = write!(
            out,
            r##"<text x="{}" y="{:.1}" font-size="10" text-anchor="end" fill="#444">{}</text>"##,
            LEFT - 4.0,
            scale.y(tokens) + 3.0,
            short(tokens)
        );
    }
    if let (Some(first), Some(last)) = (calls.first(), calls.last()) {
        let y = HEIGHT - 4.0;
        let _ = write!(
            out,
            r##"<text x="{LEFT}" y="{y}" font-size="10" fill="#444">#{}</text><text x="{}" y="{y}" font-size="10" text-anchor="end" fill="#444">#{}</text>"##,
            first.number,
            WIDTH - RIGHT,
            last.number
        );
    }
}

/// `12.3k`, `1.2M`: the y labels.
pub(crate) fn short(tokens: u64) -> String {
    match tokens {
        0..1_000 => tokens.to_string(),
        1_000..1_000_000 => format!("{:.1}k", tokens as f64 / 1e3),
        _ => format!("{:.1}M", tokens as f64 / 1e6),
    }
}

fn line(
    out: &mut String,
    scale: &Scale,
    calls: &[CallRecord],
    value: impl Fn(&CallRecord) -> u64,
    class: &str,
) {
    let mut points = String::new();
    for (i, call) in calls.iter().enumerate() {
        let _ = write!(
            points,
            "{}{:.1},{:.1}",
            if i == 0 { "" } else { " " },
            scale.x(i),
            scale.y(value(call))
        );
    }
    let _ = write!(
        out,
        r#"<polyline class="{class}" points="{points}" fill="none"/>"#
    );
}

/// A line that holds its value until the next request (the window can change).
fn steps_line(
    out: &mut String,
    scale: &Scale,
    calls: &[CallRecord],
    value: impl Fn(&CallRecord) -> u64,
    class: &str,
) {
    let mut d = String::new();
    for (i, call) in calls.iter().enumerate() {
        let y = scale.y(value(call));
        if i == 0 {
            let start = if calls.len() == 1 { LEFT } else { scale.x(0) };
            let _ = write!(d, "M{start:.1} {y:.1}");
        } else {
            let _ = write!(d, "V{y:.1}");
        }
        let end = if i + 1 < calls.len() {
            scale.x(i + 1)
        } else {
            WIDTH - RIGHT
        };
        let _ = write!(d, "H{end:.1}");
    }
    let _ = write!(out, r#"<path class="{class}" d="{d}" fill="none"/>"#);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::status::record::Outcome;

    fn call(number: u64, before: u64, after: u64) -> CallRecord {
        CallRecord {
            number,
            at: 0,
            window: 1000,
            reserve: 100,
            tokens_before: before,
            tokens_after: after,
            messages_before: 3,
            messages_after: 3,
            steps: Vec::new(),
            calls: 1,
            overflows: 0,
            fits: true,
            outcome: Outcome::Answered,
            extends_previous: None,
        }
    }

    #[test]
    fn one_point_per_request_on_each_line() {
        let calls: Vec<CallRecord> = (1..=4).map(|n| call(n, n * 200, n * 150)).collect();
        let svg = chart(&calls);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        let sent = svg.split(r#"class="sent" points=""#).nth(1).unwrap();
        let points = sent.split('"').next().unwrap();
        assert_eq!(points.split(' ').count(), 4);
        assert!(svg.contains(r#"class="window""#) && svg.contains(r#"class="budget""#));
        // Nothing fired: no dots.
        assert!(!svg.contains("<circle"));
    }

    #[test]
    fn an_empty_or_single_timeline_still_draws() {
        assert!(chart(&[]).contains("</svg>"));
        let svg = chart(&[call(7, 10, 10)]);
        assert!(svg.contains("#7"));
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(short(999), "999");
        assert_eq!(short(12_345), "12.3k");
        assert_eq!(short(1_500_000), "1.5M");
    }
}
