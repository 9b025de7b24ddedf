//! `cascade`: keep long LLM agent conversations inside the model's context window.
//!
//! A library as well as the binary: [`run`] is the whole command (the binary's `main` and
//! the Python wheel's `cascade` console script both call it), and [`embed`] gives the
//! compaction `cascade compact` does to a body in memory, byte for byte the same.
//!
//! Exit codes (also in `cascade --help`, from `error::EXIT_CODES`): 0 success; 1 the
//! conversation cannot fit the window (`compact`); 2 bad input or usage, reported as one line
//! on stderr (`cascade: <file>: <JSON path>: <what was expected>`); 3 the proxy could not
//! start or stopped on an error.

// Unit tests may unwrap: a failure there is a test failure.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod breakdown;
mod chart;
mod commands;
mod error;
mod input;
mod plot;
mod table;
mod timeline;
mod window;

pub mod embed;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

use crate::commands::{classify, compact, config, inspect, models, proxy, replay};
use crate::error::CliError;

/// What a worker thread of the proxy's runtime runs each time it runs out of work: set once
/// by the program that chose the allocator (the `cascade` binary gives jemalloc's thread
/// cache back); the Python module sets nothing.
static ON_WORKER_IDLE: OnceLock<fn()> = OnceLock::new();

/// Sets what an idle worker of the proxy's runtime runs (the first call wins).
pub fn on_worker_idle(hook: fn()) {
    let _ = ON_WORKER_IDLE.set(hook);
}

/// Runs the hook set by [`on_worker_idle`], if any.
pub(crate) fn worker_idle() {
    if let Some(hook) = ON_WORKER_IDLE.get() {
        hook();
    }
}

/// Whether the process exits once [`run`] returns: set by the binary's `main` only (the
/// Python module's `run` may be called many times in one interpreter).
static EXITS_AFTER_COMMAND: AtomicBool = AtomicBool::new(false);

/// Tells [`run`] that the process exits when the command returns: a one-shot command then
/// leaves its request to the OS instead of freeing it message by message.
pub fn exit_after_command() {
    EXITS_AFTER_COMMAND.store(true, Ordering::Relaxed);
}

/// Drops `value`, or leaves it to the OS when the process is about to exit
/// ([`exit_after_command`]): freeing a 4 MB request piece by piece takes ~1 ms.
pub(crate) fn release<T>(value: T) {
    if EXITS_AFTER_COMMAND.load(Ordering::Relaxed) {
        std::mem::forget(value);
    }
}

/// Threads a one-shot command's exact count may use (never more than the cores): counting is
/// bound by memory lookups, and past four threads a request's share per thread is small.
const COUNTING_THREADS: usize = 4;

/// Settles what a process that runs the command line `args` and then exits may do, and
/// says whether it runs a one-shot command: any command but the proxy runs one job, so a
/// large request's exact count may use the idle cores. A `proxy` anywhere among the
/// arguments keeps the proxy's settings (the safe side). The binary's `main` and the Python
/// wheel's `cascade` console script both call it before [`run`].
pub fn settle_process<T: AsRef<std::ffi::OsStr>>(args: &[T]) -> bool {
    let one_shot = !args.iter().any(|arg| arg.as_ref() == "proxy");
    if one_shot {
        context_cascade::estimate::set_counting_threads(COUNTING_THREADS);
    }
    one_shot
}

/// Keep long LLM agent conversations inside the model's context window.
#[derive(Debug, Parser)]
#[command(name = "cascade", version, about, propagate_version = true, after_help = error::EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show where the tokens of a request go: by role, by tool, the largest messages.
    Inspect(inspect::InspectArgs),
    /// List the model catalog (context windows, token scales).
    Models(models::ModelsArgs),
    /// Compact a request to fit the window; writes it in the same format.
    Compact(compact::CompactArgs),
    /// Replay a transcript as an agent loop: context size and strategies, call by call.
    Replay(replay::ReplayArgs),
    /// Tell whether a provider's error body is a context-window overflow (one JSON line).
    Classify(classify::ClassifyArgs),
    /// Run the transparent proxy: any agent, OpenAI- or Anthropic-compatible, streaming.
    Proxy(proxy::ProxyArgs),
    /// Print the proxy's effective settings and where each came from (default, file, flag).
    Config(config::ConfigArgs),
}

/// Runs the command line `args` (the program name first, as `std::env::args_os` gives it)
/// and returns the exit code. `--help`, `--version` and usage errors are printed by clap
/// as the binary always did (usage errors exit 2).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    init_tracing();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            // Printing can fail only on a closed stdout/stderr; the exit code still says it.
            let _ = error.print();
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                _ => 2,
            };
        }
    };
    let result = match &cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Models(args) => models::run(args),
        Command::Classify(args) => classify::run(args),
        Command::Compact(args) => compact::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Config(args) => config::run(args),
    };
    finish(result)
}

/// Maps a command's outcome to the exit code, printing a failure as one line.
fn finish(result: Result<(), CliError>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("cascade: {}", one_line(&error.to_string()));
            error.exit_code()
        }
    }
}

/// Error texts quoted from elsewhere (serde, the OS) could hold a newline: keep one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Logs to stderr: warnings by default, `RUST_LOG` when set; no timestamps (a CLI's
/// messages are read by people, next to their own output).
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .without_time()
        // A log line that cannot be written (stderr closed, a pipe whose reader left) is
        // lost; reporting that on stderr again would panic the request that logged it.
        .log_internal_errors(false)
        // `try_init`: a Python process may run several commands; the first one's logger
        // stays (a second `init` would panic).
        .try_init()
        .ok();
}
