//! The replay timeline as an SVG chart (plotters' SVG backend): tokens per call against the
//! window, with a marker wherever a strategy fired.

use std::path::Path;

use plotters::prelude::*;

use context_cascade::Strategy;

use crate::error::CliError;
use crate::timeline::Timeline;

const SIZE: (u32, u32) = (1100, 560);

/// Marker colour of each strategy, and its legend label.
fn strategy_style(strategy: Strategy) -> (RGBColor, &'static str) {
    match strategy {
        Strategy::TruncateToolResult => (RGBColor(230, 140, 0), "① truncate tool result"),
        Strategy::CompactToolResults => (RGBColor(0, 150, 80), "② compact tool results"),
        Strategy::PruneHistory => (RGBColor(130, 60, 180), "③ prune history"),
        Strategy::Summarize => (RGBColor(210, 30, 60), "④ summarize"),
        Strategy::Degrade => (BLACK, "⑤ degrade"),
    }
}

const ALL_STRATEGIES: [Strategy; 5] = [
    Strategy::TruncateToolResult,
    Strategy::CompactToolResults,
    Strategy::PruneHistory,
    Strategy::Summarize,
    Strategy::Degrade,
];

/// Draws `timeline` into the SVG file `path`; `title` names the transcript.
pub(crate) fn draw(timeline: &Timeline, title: &str, path: &Path) -> Result<(), CliError> {
    let name = path.display().to_string();
    draw_inner(timeline, title, path).map_err(|e| CliError::write(name, e))
}

fn draw_inner(
    timeline: &Timeline,
    title: &str,
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let budget = timeline.budget;
    let calls = &timeline.calls;
    let last_call = calls.len().max(1) as f64;
    let busiest = calls.iter().map(|c| c.tokens_in).max().unwrap_or(0);
    // The history without the cascade can dwarf the window; the axis stops above what was
    // actually sent (with room for the legend), and that curve is clipped at the top.
    let y_max = (busiest.max(budget.window) as f64 * 1.4).max(1.0);

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("cascade replay: {title}"), ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..last_call + 0.5, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("model call")
        .y_desc("tokens (estimate)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| crate::table::thousands(*y as u64))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    let at = |n: usize| n as f64;
    chart
        .draw_series(LineSeries::new(
            [
                (0.0, budget.window as f64),
                (last_call + 0.5, budget.window as f64),
            ],
            RED.stroke_width(2),
        ))?
        .label(format!("window {}", crate::table::thousands(budget.window)))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
    if budget.reserve > 0 {
        let effective = budget.effective() as f64;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, effective), (last_call + 0.5, effective)],
                6,
                4,
                RED.stroke_width(1),
            ))?
            .label("window less output reserve")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(1)));
    }
    let grey = RGBColor(160, 160, 160);
    chart
        .draw_series(DashedLineSeries::new(
            calls
                .iter()
                .map(|c| (at(c.call), (c.uncompacted as f64).min(y_max))),
            5,
            4,
            grey.stroke_width(1),
        ))?
        .label("full history, without the cascade")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], grey.stroke_width(1)));
    let light_blue = RGBColor(150, 190, 240);
    chart
        .draw_series(LineSeries::new(
            calls.iter().map(|c| (at(c.call), c.tokens_in as f64)),
            light_blue.stroke_width(1),
        ))?
        .label("before prepare (carried + new)")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], light_blue.stroke_width(1)));
    let blue = RGBColor(30, 90, 200);
    chart
        .draw_series(LineSeries::new(
            calls.iter().map(|c| (at(c.call), c.tokens_sent as f64)),
            blue.stroke_width(2),
        ))?
        .label("sent")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], blue.stroke_width(2)));

    for strategy in ALL_STRATEGIES {
        let (colour, label) = strategy_style(strategy);
        let fired: Vec<(f64, f64)> = calls
            .iter()
            .filter(|c| c.strategies.contains(&strategy))
            .map(|c| (at(c.call), c.tokens_sent as f64))
            .collect();
        if fired.is_empty() {
            continue;
        }
        // Markers of later strategies are smaller, so coinciding ones stay visible.
        let radius = 7 - strategy as i32;
        chart
            .draw_series(
                fired
                    .into_iter()
                    .map(move |p| Circle::new(p, radius, colour.filled())),
            )?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, colour.filled()));
    }

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    root.present()?;
    Ok(())
}
