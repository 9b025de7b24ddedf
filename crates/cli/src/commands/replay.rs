//! `cascade replay`: replays a transcript as an agent loop and shows, call by call, the
//! context size and every strategy fired.

use std::io::IsTerminal;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use crate::chart::terminal_width;
use crate::commands::{CascadeArgs, Loaded};
use crate::error::CliError;
use crate::table::{Align, Table, percent, thousands};
use crate::timeline::{Timeline, call_count, replay};

/// Transcripts with more calls than this get a progress bar (on a terminal).
const PROGRESS_THRESHOLD: usize = 50;

/// Flags of `cascade replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The transcript (OpenAI, Anthropic or a bare message array); `-` for stdin.
    pub file: PathBuf,
    #[command(flatten)]
    pub cascade: CascadeArgs,
    /// Draw the timeline as an SVG chart into this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Print instead what the session costs in tokens and money under the cascade and
    /// the alternatives (clients compacting by themselves, no management), priced with
    /// the model's published prompt-cache rules.
    #[arg(long)]
    pub cost: bool,
}

/// Replays, prints the timeline and totals, draws the plot.
pub(crate) fn run(args: &ReplayArgs) -> Result<(), CliError> {
    let Loaded {
        name,
        conversation,
        budget,
        manager,
        config,
        counters,
        ..
    } = args.cascade.load(Some(&args.file))?;
    if args.cost {
        let text = super::replay_cost::render(&name, &conversation, budget, &config, counters);
        return crate::input::write(None, text.as_bytes());
    }

    let turns = call_count(&conversation);
    let progress = (turns > PROGRESS_THRESHOLD && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(turns as u64);
        if let Ok(style) = ProgressStyle::with_template("replaying {bar:40} {pos}/{len} calls") {
            bar.set_style(style);
        }
        bar
    });
    let timeline = replay(&conversation, &manager, budget, |_| {
        if let Some(bar) = &progress {
            bar.inc(1);
        }
    });
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }

    let mut text = render(&name, &timeline, terminal_width());
    if let Some(path) = &args.plot {
        let title = args
            .file
            .file_name()
            .map_or_else(|| name.clone(), |f| f.to_string_lossy().into_owned());
        crate::plot::draw(&timeline, &title, path)?;
        text += &format!("plot written to {}\n", path.display());
    }
    crate::input::write(None, text.as_bytes())
}

fn render(name: &str, timeline: &Timeline, width: usize) -> String {
    let budget = timeline.budget;
    let effective = budget.effective();
    let mut out = format!(
        "{name}: {} calls · window {} · reserve {} · effective {}\n\
         turn: messages of the transcript before the call (the reply's index) · in: tokens before prepare (carried \
         forward + new messages) · sent: after prepare · no cascade: the whole history\n\n",
        timeline.calls.len(),
        thousands(budget.window),
        thousands(budget.reserve),
        thousands(effective),
    );
    let mut table = Table::new(&[
        ("call", Align::Right),
        ("turn", Align::Right),
        ("msgs", Align::Right),
        ("in", Align::Right),
        ("sent", Align::Right),
        ("% win", Align::Right),
        ("no cascade", Align::Right),
        ("strategies fired", Align::Left),
    ]);
    for call in &timeline.calls {
        let mut fired = call.label.clone();
        if !call.fits {
            fired += " · does not fit";
        }
        table.row(vec![
            call.call.to_string(),
            call.turn.to_string(),
            thousands(call.messages as u64),
            thousands(call.tokens_in),
            thousands(call.tokens_sent),
            percent(call.tokens_sent, effective),
            thousands(call.uncompacted),
            fired,
        ]);
    }
    out += &table.render(width);
    out += &totals(timeline);
    out
}

fn totals(timeline: &Timeline) -> String {
    let calls = &timeline.calls;
    let effective = timeline.budget.effective();
    let sent: u64 = calls.iter().map(|c| c.tokens_sent).sum();
    let without: u64 = calls.iter().map(|c| c.uncompacted).sum();
    let peak = calls.iter().map(|c| c.tokens_sent).max().unwrap_or(0);
    let over_without = calls.iter().filter(|c| c.uncompacted > effective).count();
    let not_fitting = calls.iter().filter(|c| !c.fits).count();
    let degraded = calls.iter().filter(|c| c.degraded).count();
    let mut out = String::from("\nTotals\n");
    out += &format!(
        "calls {} · compacted in {} · peak sent {} ({} of the window)\n",
        calls.len(),
        timeline.calls_compacted(),
        thousands(peak),
        percent(peak, effective),
    );
    let fired = timeline
        .strategy_counts()
        .iter()
        .map(|(s, n)| format!("{}={n}", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    out += &format!(
        "strategies fired (calls): {}\n",
        if fired.is_empty() { "none" } else { &fired }
    );
    let saved = if without > 0 {
        format!(" ({} less)", percent(without.saturating_sub(sent), without))
    } else {
        String::new()
    };
    out += &format!(
        "tokens sent over the session {} vs {} without the cascade{saved}\n",
        thousands(sent),
        thousands(without),
    );
    out += &format!(
        "calls over the window without the cascade {over_without} · still not fitting {not_fitting} · degraded {degraded}\n"
    );
    // Every call but the first, as `context_cascade::replay` measures prefix stability.
    let stability = timeline.stability;
    out += &format!(
        "calls whose request extends the previous one unchanged (prompt-cache friendly) {} of {} ({})\n",
        stability.extending,
        stability.compared,
        percent(stability.extending as u64, stability.compared as u64),
    );
    out
}
