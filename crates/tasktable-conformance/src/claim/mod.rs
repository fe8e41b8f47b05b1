//! Claims and the leases they give: which tasks a claim takes and in which order, an
//! attempt from claim to end, one finish call for many tasks, what a worker may write,
//! fencing by token and by credential, the rescue of leases that ran out, and where a
//! retried attempt ends (core's rule, applied by each backend's SQL).

pub mod attempts;
pub mod batch;
pub mod credentials;
pub mod fencing;
pub mod order;
pub mod output;
pub mod rescue;
pub mod rules;
