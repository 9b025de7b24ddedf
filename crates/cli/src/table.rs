//! Aligned text tables for the terminal, optionally ending in a bar column that takes the
//! width left over.

use crate::chart;

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A table: headers, rows of cells, and optionally one bar per row.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    bars: Vec<f64>,
}

/// Space between columns.
const GAP: &str = "  ";
/// Narrowest bar column worth drawing.
const MIN_BAR: usize = 8;
/// Widest bar column: longer bars add nothing but noise on wide terminals.
const MAX_BAR: usize = 50;

impl Table {
    /// A table with these columns.
    pub(crate) fn new(columns: &[(&str, Align)]) -> Self {
        Table {
            headers: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
            bars: Vec::new(),
        }
    }

    /// Adds a row without a bar.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Adds a row with a bar of length proportional to `value` (against the largest value).
    pub(crate) fn row_with_bar(&mut self, cells: Vec<String>, value: f64) {
        self.bars.resize(self.rows.len(), 0.0);
        self.rows.push(cells);
        self.bars.push(value);
    }

    /// Renders the table within `width` columns. A left-aligned last column (a preview, say)
    /// is cut to fit; bars get whatever width is left.
    pub(crate) fn render(&self, width: usize) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| text_width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(text_width(cell));
            }
        }
        let fixed = |w: &[usize]| w.iter().sum::<usize>() + GAP.len() * w.len().saturating_sub(1);
        let has_bars = !self.bars.is_empty();
        let bar_room = if has_bars { GAP.len() + MIN_BAR } else { 0 };
        // Shrink a trailing left-aligned column (previews) before giving up on the width.
        if let (Some(last), Some(Align::Left)) = (widths.len().checked_sub(1), self.align.last())
            && fixed(&widths) + bar_room > width
        {
            let others = fixed(&widths[..last]) + GAP.len();
            widths[last] = width
                .saturating_sub(others + bar_room)
                .max(text_width(&self.headers[last]))
                .min(widths[last]);
        }
        let bar_width = width
            .saturating_sub(fixed(&widths) + GAP.len())
            .clamp(MIN_BAR, MAX_BAR);
        let max_bar = self.bars.iter().copied().fold(0.0, f64::max);

        let mut out = String::new();
        let header: Vec<String> = self.headers.clone();
        self.render_line(&mut out, &header, &widths);
        trim_line_end(&mut out);
        out.push('\n');
        let rule_width = fixed(&widths) + if has_bars { GAP.len() + bar_width } else { 0 };
        out.push_str(&"─".repeat(rule_width.min(width.max(1))));
        out.push('\n');
        for (i, row) in self.rows.iter().enumerate() {
            self.render_line(&mut out, row, &widths);
            if has_bars {
                let value = self.bars.get(i).copied().unwrap_or(0.0);
                out.push_str(GAP);
                out.push_str(&chart::bar(value, max_bar, bar_width));
            }
            trim_line_end(&mut out);
            out.push('\n');
        }
        out
    }

    fn render_line(&self, out: &mut String, cells: &[String], widths: &[usize]) {
        for (i, width) in widths.iter().enumerate() {
            if i > 0 {
                out.push_str(GAP);
            }
            let cell = cells.get(i).map_or("", String::as_str);
            let cell = truncate(cell, *width);
            let pad = width.saturating_sub(text_width(&cell));
            match self.align.get(i).copied().unwrap_or(Align::Left) {
                Align::Left => {
                    out.push_str(&cell);
                    out.push_str(&" ".repeat(pad));
                }
                Align::Right => {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(&cell);
                }
            }
        }
    }
}

/// Cells are padded: trailing spaces at the end of a line are noise.
fn trim_line_end(out: &mut String) {
    let trimmed = out.trim_end_matches(' ').len();
    out.truncate(trimmed);
}

/// Display width, counting one column per character (previews are flattened to one line).
pub(crate) fn text_width(text: &str) -> usize {
    text.chars().count()
}

/// Cuts `text` to `width` characters, marking the cut with an ellipsis.
pub(crate) fn truncate(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Joins `parts` with ` · ` into lines no wider than `width` (a part wider than that gets a
/// line of its own); every line ends in a newline.
pub(crate) fn wrap_parts(parts: &[String], width: usize) -> String {
    const SEP: &str = " · ";
    let mut out = String::new();
    let mut line = String::new();
    for part in parts {
        if !line.is_empty() && text_width(&line) + SEP.len() + text_width(part) > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { SEP });
        }
        line.push_str(part);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `part` as a percentage of `whole`, one decimal.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".to_owned();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn truncate_marks_the_cut_and_respects_characters() {
        assert_eq!(truncate("héllo wörld", 5), "héll…");
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("日本語テキスト", 3), "日本…");
    }

    #[test]
    fn parts_wrap_at_the_width() {
        let parts: Vec<String> = ["file.json:", "openai", "model gpt-4o", "12 messages"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            wrap_parts(&parts, 80),
            "file.json: openai · model gpt-4o · 12 messages\n"
        );
        assert_eq!(
            wrap_parts(&parts, 30),
            "file.json: openai\nmodel gpt-4o · 12 messages\n"
        );
    }

    #[test]
    fn columns_line_up_and_fit_the_width() {
        let mut t = Table::new(&[
            ("role", Align::Left),
            ("tokens", Align::Right),
            ("preview", Align::Left),
        ]);
        t.row_with_bar(vec!["user".into(), "12".into(), "x".repeat(200)], 12.0);
        t.row_with_bar(
            vec!["assistant".into(), "3,400".into(), "hi".into()],
            3400.0,
        );
        let text = t.render(80);
        for line in text.lines() {
            assert!(text_width(line) <= 80, "{line:?}");
        }
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        // Right-aligned numbers end in the same column.
        let end = |l: &str, n: &str| l.find(n).map(|i| l[..i].chars().count() + n.len());
        assert_eq!(end(lines[2], "12"), end(lines[3], "3,400"));
        assert!(lines[3].contains('█'));
    }
}
