//! What the proxy keeps about conversations and models: the store (SQLite or Redis), the
//! sticky prefix and its decisions, remembered facts, tenancy, the summary cache, and
//! following what other replicas persist.

pub mod decisions;
pub mod identity;
pub mod memory;
pub mod shared;
pub mod stability;
pub mod store;
pub mod summary_cache;
pub mod tenancy;
pub(crate) mod writes;
