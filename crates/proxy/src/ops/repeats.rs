//! Warnings about the same thing, at most once a minute.
//!
//! What a client sends decides how often some warnings fire: 10,000 requests naming an
//! unknown model wrote 20,000 lines. A warning of one kind about one subject (a model
//! name, a peer) is logged the first time, then at most once per [`INTERVAL`], and that
//! line says how many times it was left out since the last one (`repeats`). The filter
//! keeps a hash of (kind, subject) per warning, at most [`SUBJECTS_KEPT`] at a time: a
//! client naming a new model on every request gets no more than that many lines a minute.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How often one warning about one subject may be logged.
pub(crate) const INTERVAL: Duration = Duration::from_secs(60);
/// Distinct warnings remembered at once; beyond them, new ones are not logged until the
/// oldest are a minute old.
pub(crate) const SUBJECTS_KEPT: usize = 256;

/// The proxy's one filter: warnings come from every part of it.
static REPEATS: LazyLock<Repeats> = LazyLock::new(Repeats::default);

/// Whether to log a warning of `kind` about `subject` now: `Some(n)` with the number of
/// times it was left out since it was last logged, `None` to leave it out.
pub(crate) fn admit(kind: &str, subject: &str) -> Option<u64> {
    REPEATS.admit(kind, subject, Instant::now())
}

/// The warnings logged lately, by the hash of their kind and subject.
#[derive(Debug, Default)]
pub(crate) struct Repeats {
    seen: Mutex<HashMap<u64, Seen>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    logged: Instant,
    left_out: u64,
}

impl Repeats {
    /// [`admit`] as of `now`.
    pub(crate) fn admit(&self, kind: &str, subject: &str, now: Instant) -> Option<u64> {
        let key = key(kind, subject);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = seen.get_mut(&key) {
            if now.duration_since(entry.logged) < INTERVAL {
                entry.left_out += 1;
                return None;
            }
            let left_out = entry.left_out;
            *entry = Seen {
                logged: now,
                left_out: 0,
            };
            return Some(left_out);
        }
        if seen.len() >= SUBJECTS_KEPT {
            seen.retain(|_, entry| now.duration_since(entry.logged) < INTERVAL);
            if seen.len() >= SUBJECTS_KEPT {
                return None;
            }
        }
        let entry = Seen {
            logged: now,
            left_out: 0,
        };
        seen.insert(key, entry);
        Some(0)
    }
}

/// A hash of the pair, so that a megabyte-long subject is not kept.
fn key(kind: &str, subject: &str) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(kind.as_bytes());
    // The kind's length, so that ("ab", "c") and ("a", "bc") differ.
    hasher.update(&(kind.len() as u64).to_le_bytes());
    hasher.update(subject.as_bytes());
    hasher.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_logged_once_a_minute_with_the_count_left_out() {
        let repeats = Repeats::default();
        let start = Instant::now();
        assert_eq!(repeats.admit("unknown model", "m", start), Some(0));
        for s in 1..60 {
            let at = start + Duration::from_secs(s);
            assert_eq!(repeats.admit("unknown model", "m", at), None);
        }
        // Another subject, or another kind about the same subject, is another warning.
        assert_eq!(repeats.admit("unknown model", "n", start), Some(0));
        assert_eq!(repeats.admit("learned window", "m", start), Some(0));
        let later = start + INTERVAL;
        assert_eq!(repeats.admit("unknown model", "m", later), Some(59));
        assert_eq!(repeats.admit("unknown model", "m", later), None);
    }

    #[test]
    fn new_subjects_beyond_the_bound_wait_for_old_ones_to_expire() {
        let repeats = Repeats::default();
        let start = Instant::now();
        let logged = (0..SUBJECTS_KEPT * 4)
            .filter(|i| (repeats.admit("k", &i.to_string(), start)).is_some())
            .count();
        assert_eq!(logged, SUBJECTS_KEPT);
        let later = start + INTERVAL;
        assert_eq!(repeats.admit("k", "new", later), Some(0));
        assert!(repeats.seen.lock().unwrap().len() <= SUBJECTS_KEPT);
    }
}
