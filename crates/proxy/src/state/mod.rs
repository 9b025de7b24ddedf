//! What the proxy keeps: the store (SQLite or Redis), and on it the sticky prefix and its
//! decisions, remembered facts, the summary cache, whose state a request may see
//! (tenancy), and the key recall's originals are sealed with (sealing).

pub(crate) mod decisions;
pub(crate) mod identity;
pub mod memory;
pub(crate) mod sealing;
pub(crate) mod stability;
pub(crate) mod sticky_memory;
pub mod store;
pub(crate) mod summary_cache;
pub(crate) mod tenancy;
pub(crate) mod writes;

// What the rest of the proxy uses of the state, in one place: the request pipeline
// (`route`), the observers, the calibration and background jobs go through these names.
pub(crate) use self::stability::{Edit, LazyHashes, Sticky, hash_at};
pub(crate) use self::store::{StateStore, open as open_store};
pub(crate) use self::summary_cache::CachingSummarizer;
pub(crate) use self::tenancy::{Tenancy, Tenant};
