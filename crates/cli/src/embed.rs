//! What `cascade compact` does, on a body in memory: the Python wheel's `compact` calls this
//! so that its output is the CLI's, byte for byte (the same parse, duplicate-key check,
//! window resolution, engine and writer).

use std::path::PathBuf;
use std::sync::Arc;

use context_cascade::format::{self, WriteOptions};
use context_cascade::summarizer::Summarizer;
use context_cascade::{Calibration, Report};

use crate::commands::{CascadeArgs, SummarizerArgs};
use crate::error::CliError;
use crate::input::Input;
use crate::window::WindowArgs;

/// The flags of `cascade compact` that apply to a body in memory.
#[derive(Default, Clone)]
pub struct CompactOptions {
    /// `--window`: the context window in tokens.
    pub window: Option<u64>,
    /// `--model`: the catalog entry to look the window up for.
    pub model: Option<String>,
    /// `--reserve`: the output reserve in tokens.
    pub reserve: Option<u64>,
    /// `--config`: the proxy's TOML file (its `[cascade]`, `[window]`, `[[model]]`).
    pub config: Option<PathBuf>,
    /// `--pretty`: indent the output.
    pub pretty: bool,
    /// Who writes the summaries of strategy ④ (the offline summarizer when `None`).
    pub summarizer: Option<Arc<dyn Summarizer>>,
    /// The token scales learnt so far (a long-lived caller's), restored before compacting.
    pub calibration: Option<Calibration>,
}

/// A compacted request and what the engine did to it.
#[derive(Debug)]
pub struct Compacted {
    /// The request in its own format, without the newline the CLI appends.
    pub body: Vec<u8>,
    /// The report `cascade compact --report` writes.
    pub report: Report,
    /// The token scales after the call, for the caller's next one.
    pub calibration: Calibration,
}

/// Why a body could not be compacted.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The body (or the config file) is not what was expected at `path` (a JSON path).
    #[error("{path}: {problem}")]
    BadInput {
        /// Where: a JSON path into the body, `$` for the whole, or the flag's name.
        path: String,
        /// What was expected there.
        problem: String,
    },
    /// Options that cannot work together, or a config file that cannot be used.
    #[error("{0}")]
    Usage(String),
}

impl From<CliError> for EmbedError {
    fn from(error: CliError) -> Self {
        match error {
            CliError::BadInput { path, problem, .. } => EmbedError::BadInput { path, problem },
            other => EmbedError::Usage(other.to_string()),
        }
    }
}

/// The CLI's flags for `options` (no `--format`: detected, as the CLI does by default).
fn cascade_args(options: &CompactOptions) -> CascadeArgs {
    CascadeArgs {
        window: WindowArgs {
            config: options.config.clone(),
            window: options.window,
            model: options.model.clone(),
            reserve: options.reserve,
        },
        format: None,
        summarizer: SummarizerArgs {
            summarizer: None,
            summarizer_model: None,
            summarizer_api: None,
        },
    }
}

/// Compacts `body` (an OpenAI, Anthropic, Responses request or a bare message array) as
/// `cascade compact` with `options` would; a body that cannot fit comes back compacted as
/// far as it goes with `report.fits == false`, as the CLI writes it before exiting 1.
pub fn compact(body: &[u8], options: &CompactOptions) -> Result<Compacted, EmbedError> {
    let args = cascade_args(options);
    let input = Input {
        name: "<body>".to_owned(),
        bytes: body.to_vec(),
    };
    let mut loaded = args.load_input(input)?;
    if let Some(summarizer) = &options.summarizer {
        loaded.manager = loaded.manager.with_summarizer(Arc::clone(summarizer));
    }
    if let Some(calibration) = &options.calibration {
        loaded.manager.restore_calibration(calibration.clone());
    }
    let mut conversation = loaded.conversation;
    let report = pollster::block_on(
        loaded
            .manager
            .compact_with_summary(&mut conversation, loaded.budget),
    );
    let write = WriteOptions {
        strip_pins: true,
        pretty: options.pretty,
    };
    let body = format::to_vec(&conversation, write).map_err(|e| EmbedError::BadInput {
        path: "$".to_owned(),
        problem: format!("cannot write the compacted request: {e}"),
    })?;
    Ok(Compacted {
        body,
        report,
        calibration: loaded.manager.calibration(),
    })
}

/// The engine's token estimate of `body` (what `cascade inspect` totals), for `model` or
/// the body's own `model`.
pub fn estimate(body: &[u8], model: Option<&str>) -> Result<u64, EmbedError> {
    let options = CompactOptions {
        model: model.map(str::to_owned),
        ..CompactOptions::default()
    };
    let args = cascade_args(&options);
    let input = Input {
        name: "<body>".to_owned(),
        bytes: body.to_vec(),
    };
    let loaded = args.load_input(input)?;
    let model = model.or(loaded.conversation.model()).unwrap_or("");
    Ok(loaded.manager.estimator(model).tokens(&loaded.conversation))
}

/// Folds in the prompt tokens the provider counted for `body` (the `usage` of its answer)
/// into `options.calibration`; returns the calibration to use from then on.
pub fn observe(
    body: &[u8],
    options: &CompactOptions,
    real_prompt_tokens: u64,
) -> Result<Calibration, EmbedError> {
    let input = Input {
        name: "<body>".to_owned(),
        bytes: body.to_vec(),
    };
    let loaded = cascade_args(options).load_input(input)?;
    if let Some(calibration) = &options.calibration {
        loaded.manager.restore_calibration(calibration.clone());
    }
    let model = options
        .model
        .as_deref()
        .or(loaded.conversation.model())
        .unwrap_or("");
    let prior = loaded.manager.prior(&loaded.conversation);
    loaded.manager.observe(model, prior, real_prompt_tokens);
    Ok(loaded.manager.calibration())
}
