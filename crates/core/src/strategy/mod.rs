//! The five strategies, cheapest first, one file each. Each is a plain function over a
//! [`Conversation`](crate::Conversation) and the budget in its step context
//! ([`crate::step::StepContext`]) that changes the conversation in place and returns what
//! it did as a [`Step`](crate::Step) (`None` when it had nothing to do). None of them calls
//! another or knows the engine: what ③–⑤ share is in `crate::middle`, and the engine
//! (`crate::engine`) decides which runs when.
//!
//! * ① `truncate`: cut one oversized tool result;
//! * ② `compact_tools`: replace old tool results with a placeholder;
//! * ③ `prune`: take out the middle of the history, leaving a notice and its trail;
//! * ④ `summarize`: replace the middle with a summary;
//! * ⑤ `degrade`: when the summary fails, a partial summary, a summary of the small
//!   messages, or the bare notice.

pub(crate) mod compact_tools;
pub(crate) mod degrade;
pub(crate) mod prune;
pub(crate) mod summarize;
pub(crate) mod truncate;
