//! How much of the provider's prompt cache each rule for ② keeps (issue 15, "the
//! cache-friendly default"): every transcript of `fixtures/transcripts` and the example
//! session, replayed as `cascade replay FILE --window N` replays them (the one call-point
//! rule and measure of `context_cascade::replay`), at 32K, 64K and 128K, under each rule.
//!
//! `cargo run --release -p cascade-bench --bin cache_rules [-- --runs N]` prints, per file,
//! window and rule:
//! - **extend**: the share of calls after the first whose request extends the previous
//!   one unchanged (the cached prefix survives);
//! - **re-billed**: tokens billed uncached because a request did not extend the previous
//!   one: for each such call, the estimated tokens of its request from the first message
//!   that differs from the previous request to the end (`replay::Replay::rebilled_tokens`);
//! - **fit**: calls whose request fits the effective window;
//! - **② run**: the longest run of consecutive calls on which ② fired, and **②/③④⑤**:
//!   the calls on which ② fired and those on which Layer 2/3 did;
//! - **sent**: tokens sent over the session (what the rule leaves in the requests).
//!
//! The replays are deterministic (the offline summarizer, no calibration), so one run is
//! the figure; `--runs N` only repeats them to time them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use context_cascade::replay::{self, Replay};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation, Strategy, format};

/// The windows of the issue.
const WINDOWS: [u64; 3] = [32_000, 64_000, 128_000];

/// A rule for ② and what follows it, as a configuration.
struct Rule {
    name: &'static str,
    config: CascadeConfig,
}

fn rules() -> Vec<Rule> {
    // SPEC: ② compacts short of the watermark; ③ before a call cuts to 0.75·E.
    let mut spec = CascadeConfig::default();
    spec.layer1.compact_short_of_watermark = true;
    spec.recovery.preemptive_target = spec.recovery.targets[0];
    let mut wait = spec.clone();
    wait.layer1.compact_short_of_watermark = false;
    let mut deeper = wait.clone();
    deeper.recovery.preemptive_target = 0.50;
    vec![
        Rule {
            name: "SPEC: short=true, ③ to 0.75",
            config: spec,
        },
        Rule {
            name: "short=false, ③ to 0.75",
            config: wait,
        },
        Rule {
            name: "default: short=false, ③ to 0.6",
            config: CascadeConfig::default(),
        },
        Rule {
            name: "short=false, ③ to 0.5",
            config: deeper,
        },
    ]
}

/// What one replay measured.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    calls: usize,
    compared: usize,
    extending: usize,
    rebilled: u64,
    fit: usize,
    compact_run: usize,
    compact_calls: usize,
    layer23_calls: usize,
    sent: u64,
}

impl Figures {
    fn of(run: &Replay) -> Self {
        let mut f = Figures {
            calls: run.calls.len(),
            compared: run.stability.compared,
            extending: run.stability.extending,
            rebilled: run.rebilled_tokens,
            ..Figures::default()
        };
        let mut run_length = 0;
        for call in &run.calls {
            let fired = |s: Strategy| call.report.steps.iter().any(|step| step.strategy == s);
            let compact = fired(Strategy::CompactToolResults);
            run_length = if compact { run_length + 1 } else { 0 };
            f.compact_run = f.compact_run.max(run_length);
            f.compact_calls += usize::from(compact);
            let deeper = fired(Strategy::PruneHistory)
                || fired(Strategy::Summarize)
                || fired(Strategy::Degrade);
            f.layer23_calls += usize::from(deeper);
            f.fit += usize::from(call.report.fits);
            f.sent += call.report.tokens_after;
        }
        f
    }

    fn add(&mut self, o: &Figures) {
        self.calls += o.calls;
        self.compared += o.compared;
        self.extending += o.extending;
        self.rebilled += o.rebilled;
        self.fit += o.fit;
        self.compact_run = self.compact_run.max(o.compact_run);
        self.compact_calls += o.compact_calls;
        self.layer23_calls += o.layer23_calls;
        self.sent += o.sent;
    }

    fn share(&self) -> f64 {
        if self.compared == 0 {
            1.0
        } else {
            self.extending as f64 / self.compared as f64
        }
    }

    fn cells(&self) -> String {
        format!(
            "{:.1}% | {} | {}/{} | {} | {}/{} | {}",
            self.share() * 100.0,
            thousands(self.rebilled),
            self.fit,
            self.calls,
            self.compact_run,
            self.compact_calls,
            self.layer23_calls,
            thousands(self.sent),
        )
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The files replayed: every fixture transcript, then the example session.
fn inputs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = root.join("fixtures/transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files.push(root.join("examples/claude-code-session.json"));
    Ok(files)
}

/// Parses a file as `cascade replay` does (format detected, reserve from the body).
fn load(path: &Path) -> Result<Conversation, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    format::parse(&bytes, None).map_err(|e| format!("{}: {e}", path.display()))
}

fn run_one(conversation: &Conversation, config: &CascadeConfig, window: u64) -> Replay {
    let manager = ContextManager::new(config.clone());
    let budget = Budget::new(window, conversation.output_reserve());
    pollster::block_on(replay::replay(conversation, &manager, budget, |_, _| {}))
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut runs = 1usize;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).ok_or("--runs N")?,
            other => {
                return Err(format!(
                    "unexpected argument {other} (usage: cache_rules [--runs N])"
                ));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = inputs(&root)?;
    let conversations: Vec<(String, Conversation)> = files
        .iter()
        .map(|p| {
            let name = p.file_stem().map(|s| s.to_string_lossy().into_owned());
            load(p).map(|c| (name.unwrap_or_default(), c))
        })
        .collect::<Result<_, _>>()?;
    let rules = rules();
    println!(
        "extend: calls after the first whose request extends the previous one · re-billed: tokens billed uncached \
         after the first changed message of each call that does not extend · fit: calls that fit E / calls · \
         ② run: longest run of consecutive calls with ② · ②/③④⑤: calls with ② / with Layer 2-3 · sent: tokens sent\n"
    );
    println!("| file | window | rule | extend | re-billed | fit | ② run | ②/③④⑤ | sent |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut totals = vec![vec![Figures::default(); WINDOWS.len()]; rules.len()];
    let mut timing = vec![0.0f64; rules.len()];
    for (name, conversation) in &conversations {
        // The example session is a fixture with another envelope: shown, not counted twice.
        let counted = !name.starts_with("claude-code-session");
        for (w, &window) in WINDOWS.iter().enumerate() {
            for (r, rule) in rules.iter().enumerate() {
                let start = Instant::now();
                let mut run = run_one(conversation, &rule.config, window);
                for _ in 1..runs {
                    run = run_one(conversation, &rule.config, window);
                }
                timing[r] += start.elapsed().as_secs_f64() / runs as f64;
                let figures = Figures::of(&run);
                if counted {
                    totals[r][w].add(&figures);
                }
                println!(
                    "| {name} | {}K | {} | {} |",
                    window / 1000,
                    rule.name,
                    figures.cells()
                );
            }
        }
    }
    println!(
        "\nTotals over the {} fixtures (the example session left out)\n",
        conversations.len() - 1
    );
    println!("| window | rule | extend | re-billed | fit | ② run | ②/③④⑤ | sent |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for (w, &window) in WINDOWS.iter().enumerate() {
        for (r, rule) in rules.iter().enumerate() {
            println!(
                "| {}K | {} | {} |",
                window / 1000,
                rule.name,
                totals[r][w].cells()
            );
        }
    }
    for (r, rule) in rules.iter().enumerate() {
        let mut all = Figures::default();
        totals[r].iter().for_each(|t| all.add(t));
        println!("| all | {} | {} |", rule.name, all.cells());
    }
    println!();
    for (r, rule) in rules.iter().enumerate() {
        println!("replay time, {}: {:.2} s", rule.name, timing[r]);
    }
    Ok(())
}
