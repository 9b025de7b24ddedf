//! `cascade compact`: writes the request compacted to fit the window, in its own format.

use std::path::PathBuf;

use context_cascade::Report;
use context_cascade::format::{self, WriteOptions};

use crate::commands::{CascadeArgs, Loaded};
use crate::error::CliError;
use crate::table::thousands;

/// Flags of `cascade compact`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompactArgs {
    /// The request body (OpenAI, Anthropic or a bare message array); `-` or nothing for stdin.
    pub(crate) file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) cascade: CascadeArgs,
    /// Write the JSON report (every step, tokens before and after, fits) to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Write the compacted request here instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Indent the output JSON.
    #[arg(long)]
    pub(crate) pretty: bool,
}

/// Compacts, writes the request and the report; `CannotFit` when even the irreducible part
/// (system, first user message, pins, current message) exceeds the window.
pub(crate) fn run(args: &CompactArgs) -> Result<(), CliError> {
    let Loaded {
        name: _,
        mut conversation,
        budget,
        manager,
        input_bytes,
        ..
    } = args.cascade.load(args.file.as_deref())?;
    let report = pollster::block_on(manager.compact_with_summary(&mut conversation, budget));

    let output_name = output_name(args.output.as_ref());
    let options = WriteOptions {
        strip_pins: true,
        pretty: args.pretty,
    };
    // Written into a buffer the size of the request read (a compacted body is rarely
    // longer; pages of it left unwritten cost nothing): a growing buffer copies itself at
    // each doubling and touches about twice the pages.
    let mut body = Vec::with_capacity(input_bytes + 1);
    format::to_writer(&conversation, options, &mut body)
        .map_err(|e| CliError::write(&output_name, e))?;
    body.push(b'\n');
    crate::input::write(args.output.as_ref(), &body)?;
    crate::release(conversation);
    crate::release(body);
    if let Some(path) = &args.report {
        let mut json = serde_json::to_vec_pretty(&report)
            .map_err(|e| CliError::write(path.display().to_string(), e))?;
        json.push(b'\n');
        crate::input::write(Some(path), &json)?;
    }
    eprintln!("cascade: {}", summary_line(&report));
    if report.fits {
        Ok(())
    } else {
        let reason = report.reason.clone().unwrap_or_else(|| {
            format!(
                "{} tokens remain, over the effective window of {}",
                thousands(report.tokens_after),
                thousands(report.window.saturating_sub(report.reserve))
            )
        });
        Err(CliError::CannotFit { reason })
    }
}

fn output_name(output: Option<&PathBuf>) -> String {
    match output {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "<stdout>".to_owned(),
    }
}

/// `191,257 → 24,310 tokens (293 → 41 messages; window 32,000, reserve 0); 3 steps: ...`
pub(crate) fn summary_line(report: &Report) -> String {
    let steps = if report.steps.is_empty() {
        "no step needed".to_owned()
    } else {
        format!(
            "{} step{}: {}",
            report.steps.len(),
            if report.steps.len() == 1 { "" } else { "s" },
            report.summary_line()
        )
    };
    let verdict = match (report.fits, report.degraded) {
        (true, false) => "fits",
        (true, true) => "fits (degraded: summary unavailable or partial)",
        (false, _) => "does not fit",
    };
    // Messages estimated although the tokenizer is public (too long, or a request planned
    // with the prior and counted only where sent): the count before is approximate.
    let about = if report.estimated_messages > 0 {
        "~"
    } else {
        ""
    };
    format!(
        "{about}{} → {} tokens ({} → {} messages; window {}, reserve {}); {steps}; {verdict}",
        thousands(report.tokens_before),
        thousands(report.tokens_after),
        report.messages_before,
        report.messages_after,
        thousands(report.window),
        thousands(report.reserve),
    )
}
