//! What the operator sees and sets: metrics, the status page, connection limits.

pub mod limits;
pub mod metrics;
pub mod status;
