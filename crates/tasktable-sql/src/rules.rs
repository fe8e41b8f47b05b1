//! The rules of `tasktable-core` that the hot path's hand-written SQL applies inside its
//! statements, rendered once here so that no backend spells one itself.
//!
//! A rule stays in SQL only where it must read the row as it is when the statement runs;
//! deciding it beforehand in Rust would take another round trip, or read a value an
//! operator may change meanwhile. A backend's `queries/*.sql` names a rule by its marker
//! ([`RETRY_STATE`]), which the backend expands with [`crate::hot::expand`] the first time
//! it uses the statement.

use tasktable_core::TaskState;

/// The marker a hot-path file writes where [`retry_state`] goes.
pub const RETRY_STATE: &str = "retry_state";

/// Where a retried attempt leaves its task, as an SQL expression over the task row that
/// `prefix` qualifies (`""`, or an alias with its dot such as `"t."`): `'pending'` while
/// attempts are left, else `'failed'` for good. It is
/// [`tasktable_core::outcome::retry_state`] in SQL, written the same way round, and the
/// conformance suite checks the two agree on every backend. It reads `attempt` and
/// `max_attempts` from the row when the statement runs, so a `max_attempts` an operator
/// changed while the task ran decides.
pub fn retry_state(prefix: &str) -> String {
    format!(
        "CASE WHEN {prefix}attempt < {prefix}max_attempts THEN '{}' ELSE '{}' END",
        TaskState::Pending.as_str(),
        TaskState::Failed.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_rule_reads_the_row_it_is_given() {
        assert_eq!(
            retry_state("t."),
            "CASE WHEN t.attempt < t.max_attempts THEN 'pending' ELSE 'failed' END"
        );
        assert_eq!(
            retry_state(""),
            "CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END"
        );
    }
}
