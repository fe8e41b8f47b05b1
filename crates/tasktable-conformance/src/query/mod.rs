//! Reading tasks: filters and keyset pages, counts that stop at a cap, light pages, and
//! filters every backend refuses.

pub mod cheap;
pub mod filters;
pub mod list;
