//! Terminal bar charts drawn with Unicode block characters (eighths for the fractional
//! end), sized to the terminal.

use std::io::IsTerminal;

/// Partial blocks, one to seven eighths wide.
const EIGHTHS: [char; 7] = ['▏', '▎', '▍', '▌', '▋', '▊', '▉'];
const FULL: char = '█';
const EMPTY: char = '░';
const OVER: char = '▓';

/// Width used when stdout is not a terminal and `COLUMNS` is unset.
const DEFAULT_WIDTH: usize = 100;

/// The width to draw in: the terminal's, else `$COLUMNS`, else 100 (bounded to 40–240).
pub(crate) fn terminal_width() -> usize {
    let from_terminal = if std::io::stdout().is_terminal() {
        console::Term::stdout()
            .size_checked()
            .map(|(_, cols)| usize::from(cols))
    } else {
        None
    };
    from_terminal
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .unwrap_or(DEFAULT_WIDTH)
        .clamp(40, 240)
}

/// A bar `value / max` of `width` cells, in eighths of a cell; padded with spaces to `width`.
pub(crate) fn bar(value: f64, max: f64, width: usize) -> String {
    let eighths = if max > 0.0 && value > 0.0 {
        // A non-zero value always shows at least a sliver.
        ((value / max).min(1.0) * (width * 8) as f64)
            .round()
            .max(1.0) as usize
    } else {
        0
    };
    let mut out = String::with_capacity(width * 3);
    out.extend(std::iter::repeat_n(FULL, eighths / 8));
    let mut cells = eighths / 8;
    if eighths % 8 > 0 {
        out.push(EIGHTHS[eighths % 8 - 1]);
        cells += 1;
    }
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(cells)));
    out
}

/// A gauge of `used` against `capacity`: full blocks for the used part, light shade for the
/// room left. Past capacity the gauge spans `used`: full blocks up to the window, dark shade
/// for the excess.
pub(crate) fn gauge(used: u64, capacity: u64, width: usize) -> String {
    if capacity == 0 || width == 0 {
        return String::new();
    }
    if used > capacity {
        let inside = ((capacity as f64 / used as f64) * width as f64).round() as usize;
        let inside = inside.min(width.saturating_sub(1));
        let mut out: String = std::iter::repeat_n(FULL, inside).collect();
        out.extend(std::iter::repeat_n(OVER, width - inside));
        return out;
    }
    let filled = ((used as f64 / capacity as f64) * width as f64).round() as usize;
    let filled = if used > 0 { filled.max(1) } else { 0 }.min(width);
    let mut out: String = std::iter::repeat_n(FULL, filled).collect();
    out.extend(std::iter::repeat_n(EMPTY, width - filled));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(s: &str) -> usize {
        s.chars().count()
    }

    #[test]
    fn bars_scale_to_the_maximum() {
        assert_eq!(bar(10.0, 10.0, 5), "█████");
        assert_eq!(bar(5.0, 10.0, 4), "██  ");
        assert_eq!(bar(0.0, 10.0, 3), "   ");
        // 1/16 of 4 cells = 2 eighths.
        assert_eq!(bar(1.0, 16.0, 4), "▎   ");
        for v in [0.0, 0.3, 1.0, 7.7, 9.99, 10.0] {
            assert_eq!(cells(&bar(v, 10.0, 13)), 13);
        }
    }

    #[test]
    fn tiny_values_still_show() {
        assert_eq!(bar(1.0, 1_000_000.0, 10).chars().next(), Some('▏'));
    }

    #[test]
    fn gauge_shows_room_left_and_overflow() {
        assert_eq!(gauge(50, 100, 4), "██░░");
        assert_eq!(gauge(0, 100, 3), "░░░");
        assert_eq!(gauge(200, 100, 4), "██▓▓");
        assert_eq!(cells(&gauge(33, 100, 20)), 20);
    }
}
