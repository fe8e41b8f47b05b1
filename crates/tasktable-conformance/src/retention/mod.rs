//! Retention: finished tasks past their state's age go, in batches, deleted or archived
//! with every column and their attempts; nothing else is touched, and statistics already
//! rolled up survive.

pub mod purge;
