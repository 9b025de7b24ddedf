//! What the operator sees and sets: metrics, the status page, connection limits, the
//! log's bound on repeated warnings.

pub(crate) mod accept;
pub(crate) mod connection;
pub(crate) mod limits;
pub(crate) mod metrics;
pub(crate) mod peers;
pub(crate) mod repeats;
pub(crate) mod status;
