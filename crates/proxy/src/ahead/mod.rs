//! Work done ahead of need: background summaries between requests.

pub(crate) mod background;
