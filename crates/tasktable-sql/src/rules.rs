//! The rules of `tasktable-core` that the hot path's hand-written SQL applies inside its
//! statements, rendered once here so that no backend spells one itself.
//!
//! A rule stays in SQL only where it must read the row as it is when the statement runs;
//! deciding it beforehand in Rust would take another round trip, or read a value an
//! operator may change meanwhile. A backend's `queries/*.sql` names a rule by its marker
//! ([`RETRY_STATE`]), which the backend expands with [`crate::hot::expand`] the first time
//! it uses the statement.

use crate::Dialect;
use tasktable_core::TaskState;

/// The marker a hot-path file writes where [`retry_state`] goes.
pub const RETRY_STATE: &str = "retry_state";

/// The marker a finish writes where [`affinity`]'s `SET` items go.
pub const AFFINITY: &str = "affinity";

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

/// The `SET` items of a finish that start and end a retry's wait for the worker of the
/// attempt that just ended ([`tasktable_core::Task::affinity_until`]), over the row that
/// `prefix` qualifies. `pending` is the finish's SQL test of "this task goes back to
/// pending" and `run_at` its new `run_at`.
///
/// A task with an affinity that goes back to pending has its own target kept in
/// `affinity_target` (unless a wait already keeps it there), its `target` narrowed to
/// `|w:<worker_id>|`, so that only that worker's targeted lane claims it, and
/// `affinity_until` set to `run_at` plus the wait. Any other finish puts the task's own
/// target back and clears the wait; `affinity_target` means something only while
/// `affinity_until` is set. The items are written so that MySQL, which applies `SET`
/// items left to right with each seeing those before it, agrees with PostgreSQL and
/// SQLite, which read the old row throughout: `affinity_target` first (it reads the old
/// `target`), then `target` (it reads `affinity_target`, changed only where it is not
/// read), then `affinity_until`; a `pending` and `run_at` that read the new row on MySQL
/// are what its finish passes.
pub fn affinity(d: Dialect, prefix: &str, pending: &str, run_at: &str) -> String {
    let p = prefix;
    let waits = format!("({pending}) AND {p}affinity_ms IS NOT NULL AND {p}worker_id IS NOT NULL");
    let own =
        format!("CASE WHEN {p}affinity_until IS NULL THEN {p}target ELSE {p}affinity_target END");
    let worker = match d {
        Dialect::MySql => format!("CONCAT('|w:', {p}worker_id, '|')"),
        Dialect::Sqlite | Dialect::Postgres => format!("'|w:' || {p}worker_id || '|'"),
    };
    let until = match d {
        Dialect::Postgres => format!("{run_at} + {p}affinity_ms * interval '1 millisecond'"),
        Dialect::Sqlite => format!(
            "strftime('%Y-%m-%dT%H:%M:%fZ', {run_at}, '+' || ({p}affinity_ms / 1000.0) || ' seconds')"
        ),
        Dialect::MySql => format!("DATE_ADD({run_at}, INTERVAL {p}affinity_ms * 1000 MICROSECOND)"),
    };
    format!(
        "affinity_target = CASE WHEN {waits} THEN {own} ELSE {p}affinity_target END,\n    \
         target = CASE WHEN {waits} THEN {worker} ELSE {own} END,\n    \
         affinity_until = CASE WHEN {waits} THEN {until} ELSE NULL END"
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
