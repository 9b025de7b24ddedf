//! The one escalation policy: which recovery runs next, and whether what it did is kept.
//!
//! Every entry point that goes past Layer 1 (`prepare`, `compact_with_summary`, and the
//! retry loop of `call` after each overflow) walks the same ladder of [`Recovery`] steps,
//! SPEC's getRetryStrategy:
//!
//! ```text
//! attempt 1  ③ at 0.75·E (④ when ③ falls short)
//! attempt 2  ④ at 0.60·E
//! attempt 3  ④ at 0.50·E, half the recent messages, every old tool result compacted
//! attempt 4  ⑤ the bare notice, the current turn's results cut to share the room
//! ```
//!
//! and judges every attempt by one rule ([`Escalation::earns`]): measured from the last
//! state that was kept, the attempts since then must free at least `min_gain` of it, or
//! bring it from over the run's goal line to under it. Until they do, they stand
//! tentatively and the next attempt runs on top of them at once (no call is spent on
//! them); what never earns its rewrite is rolled back, so that shaving a few tokens never
//! rewrites the history and a second compaction changes nothing.
//!
//! This module only decides; the engine applies the steps and keeps the snapshots.

use crate::config::{Budget, CascadeConfig};

/// What one recovery attempt does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Recovery {
    /// ③ keeping N recent messages; ④ at the same target when ③ does not reach it.
    PruneThenSummarize {
        /// The target, as a share of E.
        target: f64,
    },
    /// ④ down to `target` (a share of E).
    Summarize {
        /// The target, as a share of E.
        target: f64,
        /// How many of the recent messages the summary keeps after it.
        tail: Tail,
        /// What happens to old tool results first.
        old_results: OldResults,
    },
    /// ⑤ level 3, keeping only system, first user, pinned, summary and current messages.
    BareNotice,
}

/// How many of SPEC's N recent messages a summary keeps after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// All N.
    Full,
    /// N / 2 (rounded down).
    Half,
}

impl Tail {
    /// The number of recent messages kept out of `recent`.
    pub(crate) fn of(self, recent: usize) -> usize {
        match self {
            Tail::Full => recent,
            Tail::Half => recent / 2,
        }
    }
}

/// What a summarizing attempt does to the old tool results before it summarizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldResults {
    /// Leaves them as ② left them.
    AsTheyAre,
    /// Compacts every one of them but the current turn's (② in `All` mode).
    Compact,
}

/// The recovery attempt `attempt` (1-based) under `config`; `None` past the last one.
pub(crate) fn rung(config: &CascadeConfig, attempt: usize) -> Option<Recovery> {
    rung_from(config, attempt, config.recovery.targets[0])
}

/// [`rung`] with `first` as the first attempt's target.
fn rung_from(config: &CascadeConfig, attempt: usize, first: f64) -> Option<Recovery> {
    let [_, second, third] = config.recovery.targets;
    match attempt {
        1 => Some(Recovery::PruneThenSummarize { target: first }),
        2 => Some(Recovery::Summarize {
            target: second,
            tail: Tail::Full,
            old_results: OldResults::AsTheyAre,
        }),
        3 => Some(Recovery::Summarize {
            target: third,
            tail: Tail::Half,
            old_results: OldResults::Compact,
        }),
        4 => Some(Recovery::BareNotice),
        _ => None,
    }
}

/// When a run of attempts has done its job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Goal {
    /// The kept state is at most this share of E (`prepare`: 1.0; `compact_with_summary`:
    /// the preemptive ratio). Crossing this line also earns an attempt its rewrite.
    Under(f64),
    /// One attempt earned its rewrite (the retry loop: then it is worth a call).
    Earned,
}

/// The progress of one run, as the engine reports it to the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// The estimate of the last kept state.
    pub(crate) kept_tokens: u64,
    /// Attempts run so far in this run.
    pub(crate) ran: usize,
    /// Whether an attempt of this run earned its rewrite.
    pub(crate) earned: bool,
}

/// A walk up the ladder. It may span several runs: the retry loop keeps one for the whole
/// call, so that every overflow resumes at the next attempt.
#[derive(Debug)]
pub(crate) struct Escalation<'a> {
    config: &'a CascadeConfig,
    goal: Goal,
    /// The last attempt handed out (0 before the first).
    attempt: usize,
    /// The first attempt's target, as a share of E.
    first_target: f64,
}

impl<'a> Escalation<'a> {
    /// A walk from attempt 1 towards `goal`, after an overflow (SPEC's ladder).
    pub(crate) fn new(config: &'a CascadeConfig, goal: Goal) -> Self {
        Escalation {
            config,
            goal,
            attempt: 0,
            first_target: config.recovery.targets[0],
        }
    }

    /// A walk before a call (shouldPreemptiveCompact): the first attempt cuts to
    /// `preemptive_target`, the others are the ladder's.
    pub(crate) fn before_call(config: &'a CascadeConfig, goal: Goal) -> Self {
        Escalation {
            first_target: config.recovery.preemptive_target,
            ..Escalation::new(config, goal)
        }
    }

    /// Resumes this walk with another goal (`compact_with_summary` goes on below the
    /// preemptive line where `prepare` stopped under E).
    pub(crate) fn towards(&mut self, goal: Goal) {
        self.goal = goal;
    }

    /// The next attempt of a run, or `None` when the run is done: its goal is met (a run
    /// always makes at least one attempt: the caller started it because recovery is due)
    /// or the ladder is exhausted.
    pub(crate) fn next(&mut self, progress: Progress, budget: Budget) -> Option<(u8, Recovery)> {
        let done = match self.goal {
            Goal::Under(share) => progress.ran > 0 && progress.kept_tokens <= budget.share(share),
            Goal::Earned => progress.earned,
        };
        if done {
            return None;
        }
        let recovery = rung_from(self.config, self.attempt + 1, self.first_target)?;
        self.attempt += 1;
        Some((u8::try_from(self.attempt).unwrap_or(u8::MAX), recovery))
    }

    /// The one gain rule: from `kept` tokens (the last kept state) to `now`, the attempts
    /// earn their rewrite when they free at least `min_gain` of it, or bring it from over
    /// the goal line to under it.
    pub(crate) fn earns(&self, kept: u64, now: u64, budget: Budget) -> bool {
        let freed = kept.saturating_sub(now);
        let crossed = match self.goal {
            Goal::Under(share) => {
                let line = budget.share(share);
                kept > line && now <= line
            }
            Goal::Earned => false,
        };
        freed as f64 >= self.config.recovery.min_gain * kept as f64 || crossed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(kept_tokens: u64, ran: usize, earned: bool) -> Progress {
        Progress {
            kept_tokens,
            ran,
            earned,
        }
    }

    #[test]
    fn a_run_makes_one_attempt_then_stops_at_its_goal() {
        let config = CascadeConfig::default();
        let budget = Budget::new(1_000, 0);
        let mut escalation = Escalation::new(&config, Goal::Under(1.0));
        assert_eq!(
            escalation
                .next(progress(900, 0, false), budget)
                .map(|r| r.0),
            Some(1)
        );
        assert_eq!(escalation.next(progress(900, 1, false), budget), None);
        assert_eq!(
            escalation
                .next(progress(1_100, 1, false), budget)
                .map(|r| r.0),
            Some(2)
        );
    }

    #[test]
    fn the_retry_loop_stops_at_the_first_gain_and_resumes_after_it() {
        let config = CascadeConfig::default();
        let budget = Budget::new(1_000, 0);
        let mut escalation = Escalation::new(&config, Goal::Earned);
        assert_eq!(
            escalation
                .next(progress(900, 0, false), budget)
                .map(|r| r.0),
            Some(1)
        );
        assert_eq!(escalation.next(progress(900, 1, true), budget), None);
        assert_eq!(
            escalation
                .next(progress(900, 0, false), budget)
                .map(|r| r.0),
            Some(2)
        );
        assert!(escalation.next(progress(900, 1, false), budget).is_some());
        assert!(escalation.next(progress(900, 2, false), budget).is_some());
        assert_eq!(escalation.next(progress(900, 3, false), budget), None);
    }

    #[test]
    fn before_a_call_the_first_attempt_cuts_to_the_preemptive_target() {
        let mut config = CascadeConfig::default();
        config.recovery.preemptive_target = 0.6;
        let budget = Budget::new(1_000, 0);
        let first = |mut e: Escalation<'_>| e.next(progress(950, 0, false), budget);
        let before = Escalation::before_call(&config, Goal::Under(1.0));
        let after = Escalation::new(&config, Goal::Under(1.0));
        assert_eq!(
            first(before),
            Some((1, Recovery::PruneThenSummarize { target: 0.6 }))
        );
        assert_eq!(
            first(after),
            Some((1, Recovery::PruneThenSummarize { target: 0.75 }))
        );
        let mut before = Escalation::before_call(&config, Goal::Under(0.5));
        before.next(progress(950, 0, false), budget);
        assert_eq!(
            before.next(progress(950, 1, false), budget),
            rung(&config, 2).map(|r| (2, r))
        );
    }

    #[test]
    fn an_attempt_earns_by_its_gain_or_by_crossing_the_goal_line() {
        let config = CascadeConfig::default();
        let budget = Budget::new(1_000, 0);
        let prepare = Escalation::new(&config, Goal::Under(1.0));
        assert!(prepare.earns(1_000, 900, budget));
        assert!(!prepare.earns(1_000, 901, budget));
        assert!(prepare.earns(1_050, 1_000, budget));
        assert!(!prepare.earns(990, 950, budget));
        let call = Escalation::new(&config, Goal::Earned);
        assert!(!call.earns(1_050, 1_000, budget));
    }
}
