//! The middle of the history, and what strategies ③–⑤ share to take it out.
//!
//! ③ prune, ④ summarize and ⑤ degrade all replace the same thing, the middle, with one
//! message: a notice or a summary. What they share lives here, so that no strategy reaches
//! into another:
//!
//! * `split`: which messages are the middle (what must stay, where the kept tail starts);
//! * `replace`: putting the replacement in place, with the trail of what it took out;
//! * `notice`: the notice with its trail (③, and ⑤'s last level);
//! * `reason`: why a request cannot fit (the part that must stay, against the budget);
//! * `plan` and `summary`: a summary's range and room, the summarizer's call and the
//!   checks on what it wrote (④, and ⑤'s first two levels).

mod notice;
mod plan;
mod reason;
mod replace;
mod split;
mod summary;

pub(crate) use notice::prune_with;
pub(crate) use plan::{Failure, Plan, plan};
pub(crate) use reason::why_it_cannot_fit;
pub(crate) use split::{
    Fate, KeepRules, Split, Summaries, exchange_starts, irreducible, longest_tail, notice_message,
};
pub(crate) use summary::{check, summarize_messages, write_summary};
