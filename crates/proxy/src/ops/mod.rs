//! What the operator sees and sets: metrics, the status page, connection limits.

pub(crate) mod limits;
pub(crate) mod metrics;
pub(crate) mod status;
