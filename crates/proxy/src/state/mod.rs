//! What the proxy keeps: the store (SQLite or Redis), and on it the sticky prefix and its
//! decisions, remembered facts, the summary cache, and whose state a request may see
//! (tenancy).

pub(crate) mod decisions;
pub mod memory;
pub(crate) mod stability;
pub mod store;
pub(crate) mod summary_cache;
pub(crate) mod tenancy;
