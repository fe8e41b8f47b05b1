//! The schema: migrating is idempotent, and safe when many processes start at once.

pub mod migrate;
