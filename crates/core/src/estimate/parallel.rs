//! Exact counts of a large request's messages on several cores, when the program asks for it.
//!
//! An exact count costs about 40 ns a token on one core; a request of a few hundred
//! thousand tokens that nothing was counted of yet (a one-shot `cascade compact`) waits that
//! long for its total. The messages are independent, so they are counted in parallel first,
//! each into its own cache ([`Message::exact_tokens`]); the engine's sum then reads the
//! caches. Below [`PARALLEL_MIN_CHARS`] the threads cost more than they save, and one core
//! counts.
//!
//! Off unless the program turns it on ([`set_counting_threads`]): a library does not start
//! threads unasked, and a server that already runs one request per core (the proxy) gains
//! nothing from more threads per request. The `cascade` binary turns it on for its one-shot
//! commands.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Estimator, Weights, counts_exactly};
use crate::conversation::Message;

/// Characters not yet counted from which a request is counted on several cores: a thread
/// costs some tens of microseconds to start, and a one-shot command counts this much text
/// cold (the tables' pages read on first touch) in about 0.3 ms. Measured whole process,
/// `cascade compact` of gpt-4o bodies at 32K against the former 128 KiB: 109 kB 10.3 → 8.6 ms,
/// 87 kB 7.4 → 6.5 ms (medians of 31, side by side).
pub(crate) const PARALLEL_MIN_CHARS: u64 = 32 * 1024;
/// Threads a count may use, the caller's included (1: the caller alone, the default).
static THREADS: AtomicUsize = AtomicUsize::new(1);

/// Lets an exact count of a large request use up to `threads` threads, the caller's
/// included, and never more than the machine's cores (1, the default, counts on the
/// caller's thread alone). For a program that runs one job at a time, such as a one-shot
/// command; process-wide.
pub fn set_counting_threads(threads: usize) {
    THREADS.store(threads.max(1), Ordering::Relaxed);
}

/// Counts, on the threads [`set_counting_threads`] allows, every message of `messages` the
/// estimator counts exactly and has not counted yet, when they hold [`PARALLEL_MIN_CHARS`]
/// or more.
pub(crate) fn count_ahead(estimator: &Estimator, messages: &[Message]) {
    let allowed = THREADS.load(Ordering::Relaxed);
    let (Some(counter), true) = (estimator.counter, allowed > 1) else {
        return;
    };
    let key = counter.key();
    let pending: Vec<(&Message, u64)> = (messages.iter())
        .filter(|m| !m.has_exact_tokens(key))
        .filter_map(|m| {
            let counts = m.counts();
            counts_exactly(&counts).then(|| (m, Weights::chars(&counts)))
        })
        .collect();
    let chars: u64 = pending.iter().map(|(_, c)| c).sum();
    if chars < PARALLEL_MIN_CHARS {
        return;
    }
    // Asked only now: on Linux it reads the cgroup's CPU quota from /proc and /sys.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(allowed);
    if threads < 2 {
        return;
    }
    let mut shares = split(&pending, threads).into_iter();
    let mine = shares.next().unwrap_or_default();
    let count = |share: &[&Message]| {
        for message in share {
            estimator.message_tokens(message);
        }
    };
    std::thread::scope(|scope| {
        for share in shares {
            let spawned = std::thread::Builder::new()
                .name("cascade-count".into())
                .spawn_scoped(scope, move || count(&share));
            // No thread to be had: the engine's sum counts these itself.
            if spawned.is_err() {
                break;
            }
        }
        count(&mine);
    });
}

/// The messages of `pending` in at most `threads` shares of about equal characters: the
/// largest first, each to the share that holds the fewest so far. Counts do not depend on
/// the order; runs in order overshot their half by a whole message (on a 659 kB request the
/// first of two runs cost 1.7 times the second).
fn split<'m>(pending: &[(&'m Message, u64)], threads: usize) -> Vec<Vec<&'m Message>> {
    let mut largest_first: Vec<&(&Message, u64)> = pending.iter().collect();
    largest_first.sort_by_key(|&&(_, chars)| std::cmp::Reverse(chars));
    let mut shares: Vec<(u64, Vec<&Message>)> = vec![(0, Vec::new()); threads.max(1)];
    for &(message, chars) in largest_first {
        if let Some((load, share)) = shares.iter_mut().min_by_key(|(load, _)| *load) {
            *load += chars;
            share.push(message);
        }
    }
    shares
        .into_iter()
        .map(|(_, share)| share)
        .filter(|share| !share.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;
    use crate::conversation::Role;

    #[test]
    fn shares_are_balanced_and_keep_every_message_once() {
        let messages: Vec<Message> = (0..10)
            .map(|i| Message::text(Role::User, "x".repeat(100 * (i + 1))))
            .collect();
        let pending: Vec<(&Message, u64)> = messages
            .iter()
            .map(|m| (m, Weights::chars(&m.counts())))
            .collect();
        let chars: u64 = pending.iter().map(|(_, c)| c).sum();
        let largest = pending.iter().map(|(_, c)| *c).max().unwrap();
        for threads in 1..=4 {
            let shares = split(&pending, threads);
            assert!(shares.len() <= threads);
            let mut flat: Vec<*const Message> = shares
                .iter()
                .flatten()
                .map(|m| std::ptr::from_ref(*m))
                .collect();
            flat.sort();
            let mut all: Vec<*const Message> = messages.iter().map(std::ptr::from_ref).collect();
            all.sort();
            assert_eq!(flat, all);
            // No share holds more than its part and one message.
            for share in &shares {
                let load: u64 = share.iter().map(|m| Weights::chars(&m.counts())).sum();
                assert!(load <= chars / threads as u64 + largest, "{load}");
            }
        }
        // 5,500 characters in two shares.
        let loads: Vec<u64> = split(&pending, 2)
            .iter()
            .map(|s| s.iter().map(|m| Weights::chars(&m.counts())).sum())
            .collect();
        assert_eq!(loads, vec![2_800, 2_700]);
    }

    /// Counted ahead on several threads, a request totals what one thread counts, and
    /// every message's count is cached for the engine's sum.
    #[cfg(feature = "exact")]
    #[test]
    fn counting_ahead_counts_what_one_thread_counts() {
        use crate::estimate::TokenCounter;
        use crate::estimate::exact::{Encoding, ExactCounter};
        let counter: &'static ExactCounter =
            Box::leak(Box::new(ExactCounter::new(Encoding::O200kBase).unwrap()));
        let messages: Vec<Message> = (0..400)
            .map(|i| {
                let text = format!(
                    "step {i}: read src/module_{i}.rs, fn handler_{i}() -> u{}; ",
                    i * 7
                );
                Message::text(
                    if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    text.repeat(40),
                )
            })
            .collect();
        let mut conversation = crate::conversation::Conversation::new(crate::Format::OpenAi);
        conversation.messages = messages;
        let chars: u64 = conversation
            .messages
            .iter()
            .map(|m| Weights::chars(&m.counts()))
            .sum();
        assert!(chars >= PARALLEL_MIN_CHARS, "{chars}");
        let one_thread: u64 = conversation
            .messages
            .iter()
            .map(|m| counter.message(m))
            .sum::<u64>()
            + counter.request_overhead(&conversation);
        let estimator = Estimator::default().with_counter(Some(counter));
        set_counting_threads(4);
        count_ahead(&estimator, &conversation.messages);
        set_counting_threads(1);
        assert!(
            conversation
                .messages
                .iter()
                .all(|m| m.has_exact_tokens(counter.key()))
        );
        assert_eq!(estimator.tokens(&conversation), one_thread);
    }
}
