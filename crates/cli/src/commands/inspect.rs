//! `cascade inspect`: where the tokens of a request go, against the window.

use std::path::PathBuf;

use context_cascade::CascadeConfig;
use context_cascade::estimate::Estimator;

use crate::breakdown::{Breakdown, TOOL_DEFINITIONS};
use crate::chart::{gauge, terminal_width};
use crate::commands::FormatArg;
use crate::error::CliError;
use crate::table::{Align, Table, percent, thousands, wrap_parts};
use crate::window::{Resolved, WindowArgs};

/// How many of the largest messages to list.
const TOP_MESSAGES: usize = 10;
/// Widest gauge of the total against the window.
const GAUGE_WIDTH: usize = 60;

/// Flags of `cascade inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// The request body (OpenAI, Anthropic or a bare message array); `-` for stdin.
    pub(crate) file: PathBuf,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    /// Force the input format instead of detecting it.
    #[arg(long, value_enum)]
    pub(crate) format: Option<FormatArg>,
}

/// Prints the breakdown.
pub(crate) fn run(args: &InspectArgs) -> Result<(), CliError> {
    let (name, conversation) =
        crate::input::read_conversation(Some(&args.file), args.format.map(Into::into))?;
    let resolved = args.window.resolve(&conversation)?;
    // The estimator the engine uses for this body (`compact` and `replay` count the same):
    // the model family's starting scale times the margin of an uncalibrated estimate.
    let estimator = resolved
        .manager()
        .estimator(conversation.model().unwrap_or(""));
    let breakdown = Breakdown::of(&conversation, &estimator, TOP_MESSAGES);
    let exact = exact_count(&conversation);
    let text = render(
        &name,
        &conversation,
        &resolved,
        &estimator,
        &breakdown,
        exact,
    );
    crate::input::write(None, text.as_bytes())
}

/// The exact o200k_base count (feature `exact`); a tokenizer that cannot load is a warning,
/// not a failure of the whole breakdown.
#[cfg(feature = "exact")]
fn exact_count(conversation: &context_cascade::Conversation) -> Option<u64> {
    use context_cascade::estimate::exact::{Encoding, ExactCounter};
    match ExactCounter::new(Encoding::O200kBase) {
        Ok(counter) => Some(counter.count_conversation(conversation) as u64),
        Err(error) => {
            tracing::warn!(%error, "exact token counts unavailable");
            None
        }
    }
}

#[cfg(not(feature = "exact"))]
fn exact_count(_conversation: &context_cascade::Conversation) -> Option<u64> {
    None
}

fn render(
    name: &str,
    conversation: &context_cascade::Conversation,
    resolved: &Resolved,
    estimator: &Estimator,
    b: &Breakdown,
    exact: Option<u64>,
) -> String {
    let width = terminal_width();
    let budget = resolved.budget;
    let effective = budget.effective();
    let model = resolved.model.as_deref().unwrap_or("(none)");
    let chars_per_token = if b.total_tokens > 0 {
        b.chars as f64 / b.total_tokens as f64
    } else {
        0.0
    };
    let mut header: Vec<Vec<String>> = vec![
        vec![
            format!("{name}:"),
            conversation.format.as_str().to_owned(),
            format!("model {model}"),
            format!("{} messages", thousands(b.messages as u64)),
            format!("{} characters", thousands(b.chars)),
        ],
        vec![
            format!("window {} ({})", thousands(budget.window), resolved.source),
            format!("reserve {}", thousands(budget.reserve)),
            format!("effective {}", thousands(effective)),
        ],
        vec![
            format!(
                "estimate {} tokens = {} of the effective window",
                thousands(b.total_tokens),
                percent(b.total_tokens, effective)
            ),
            multiplier_note(estimator),
            format!("≈ {chars_per_token:.2} characters per token"),
        ],
    ];
    if let Some(exact) = exact {
        header.push(vec![format!(
            "exact (o200k_base) {} tokens = {} of the effective window",
            thousands(exact),
            percent(exact, effective),
        )]);
    }
    let mut out: String = header
        .iter()
        .map(|parts| wrap_parts(parts, width))
        .collect();
    let label = if b.total_tokens > effective {
        format!(
            " {} over the window by {} tokens",
            percent(b.total_tokens, effective),
            thousands(b.total_tokens - effective)
        )
    } else {
        format!(" {} used", percent(b.total_tokens, effective))
    };
    let gauge_width = width
        .saturating_sub(label.chars().count() + 2)
        .clamp(10, GAUGE_WIDTH);
    out += &format!(
        "[{}]{label}\n",
        gauge(b.total_tokens, effective, gauge_width)
    );

    out += "\nBy role\n";
    let mut roles = Table::new(&[
        ("role", Align::Left),
        ("messages", Align::Right),
        ("tokens", Align::Right),
        ("share", Align::Right),
    ]);
    for group in &b.by_role {
        let messages = if group.label == TOOL_DEFINITIONS {
            "-".to_owned()
        } else {
            thousands(group.messages as u64)
        };
        roles.row_with_bar(
            vec![
                group.label.clone(),
                messages,
                thousands(group.tokens),
                percent(group.tokens, b.total_tokens),
            ],
            group.tokens as f64,
        );
    }
    out += &roles.render(width);

    out += "\nBy tool (calls: name and arguments; results: resolved to the calling tool)\n";
    if b.by_tool.is_empty() {
        out += "no tool calls\n";
    } else {
        let mut tools = Table::new(&[
            ("tool", Align::Left),
            ("calls", Align::Right),
            ("call tokens", Align::Right),
            ("results", Align::Right),
            ("result tokens", Align::Right),
            ("share", Align::Right),
        ]);
        for tool in &b.by_tool {
            tools.row_with_bar(
                vec![
                    tool.name.clone(),
                    thousands(tool.calls as u64),
                    thousands(tool.call_tokens),
                    thousands(tool.results as u64),
                    thousands(tool.result_tokens),
                    percent(tool.tokens(), b.total_tokens),
                ],
                tool.tokens() as f64,
            );
        }
        out += &tools.render(width);
    }

    out += &format!("\nLargest messages (top {})\n", b.largest.len());
    let mut largest = Table::new(&[
        ("#", Align::Right),
        ("role", Align::Left),
        ("tool", Align::Left),
        ("tokens", Align::Right),
        ("share", Align::Right),
        ("preview", Align::Left),
    ]);
    for m in &b.largest {
        largest.row(vec![
            m.index.to_string(),
            m.role.clone(),
            crate::table::truncate(&m.tools, 24),
            thousands(m.tokens),
            percent(m.tokens, b.total_tokens),
            m.preview.clone(),
        ]);
    }
    out += &largest.render(width);
    out
}

/// Explains the multiplier applied to the prior.
fn multiplier_note(estimator: &Estimator) -> String {
    let margin = CascadeConfig::default().calibration.uncalibrated_margin;
    let starting = estimator.multiplier / margin;
    let base = if (starting - 1.0).abs() > 1e-9 {
        format!("starting scale ×{starting:.2} for this model family, ")
    } else {
        String::new()
    };
    format!(
        "prior ×{:.2} ({base}×{margin:.1} safety margin until calibrated)",
        estimator.multiplier
    )
}
