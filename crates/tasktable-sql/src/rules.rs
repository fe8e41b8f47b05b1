//! The rules of `tasktable-core` that the hot path's hand-written SQL applies inside its
//! statements, rendered once here so that no backend spells one itself.
//!
//! A rule stays in SQL only where it must read the row as it is when the statement runs;
//! deciding it beforehand in Rust would take another round trip, or read a value an
//! operator may change meanwhile. A backend's `queries/*.sql` names a rule by its marker
//! ([`RETRY_STATE`], [`AFFINITY`], [`CLAIM_WRITE`], [`FENCE`]), which the backend expands
//! with [`crate::hot::expand`] the first time it uses the statement. The shared lanes
//! (limited queues, runs, batches) write the same rules into the statements they build
//! ([`push_claim_write`], [`push_fence`]), so that the transition of a claim and the fence
//! of a worker's write are each spelled once for every statement that makes them.

use crate::{Arg, Dialect, Sql};
use tasktable_core::TaskState;

/// The marker a hot-path file writes where [`retry_state`] goes.
pub const RETRY_STATE: &str = "retry_state";

/// The marker a finish writes where [`affinity`]'s `SET` items go.
pub const AFFINITY: &str = "affinity";

/// The marker a claim writes where [`claim_write`]'s `SET` items go.
pub const CLAIM_WRITE: &str = "claim_write";

/// The marker a worker's write under a lease writes where [`fence`] goes.
pub const FENCE: &str = "fence";

/// A value a rendered rule writes: SQL of the statement's own (a placeholder, a column of
/// another table, an expression), or an argument bound where it stands.
#[derive(Debug, Clone)]
pub enum Val<'a> {
    /// SQL text written as it is: a placeholder the statement binds itself, a column, an
    /// expression.
    Sql(&'a str),
    /// A value bound as an argument where it stands.
    Arg(Arg),
}

impl Val<'_> {
    fn push(&self, sql: &mut Sql) {
        match self {
            Val::Sql(text) => sql.push(text),
            Val::Arg(arg) => sql.bind(arg.clone()),
        };
    }
}

/// What a claim writes into a task's row besides its counters, as values.
#[derive(Debug, Clone)]
pub struct ClaimWrite<'a> {
    /// The claim's time.
    pub now: Val<'a>,
    /// `now` plus the lease asked for, capped at [`tasktable_core::MAX_LEASE`].
    pub lease_until: Val<'a>,
    /// The claiming worker's id, written to `worker_id`.
    pub worker_id: Val<'a>,
    /// The claiming worker's host, written to `worker_host`.
    pub worker_host: Val<'a>,
    /// The claim's fresh credential for this row.
    pub credential: Val<'a>,
}

/// The `SET` items that lease a pending task to a worker, over the row `prefix`
/// qualifies: it runs, its attempt and its fencing token grow by one, its deadline is
/// `now` plus its timeout, its lease ends at `lease_until` or at the deadline, whichever
/// comes first, and it holds the worker, the credential and the times of the attempt.
/// Every item reads only columns no item before it writes, so MySQL, which applies `SET`
/// items left to right, agrees with PostgreSQL and SQLite. Values are written in the
/// order `now`, `lease_until` (twice), `now`, `worker_id`, `worker_host`, `credential`,
/// `now` (twice): with `?` placeholders, bind them so.
pub fn push_claim_write(sql: &mut Sql, prefix: &str, w: &ClaimWrite<'_>) {
    let d = sql.dialect();
    let p = prefix;
    push_claim_counters(sql, prefix);
    sql.push(",\n    deadline_at = ");
    push_deadline(sql, p, &w.now);
    sql.push(",\n    lease_expires_at = CASE WHEN ")
        .push(&format!("{p}timeout_ms IS NULL THEN "));
    w.lease_until.push(sql);
    sql.push(&format!(" ELSE {}(", least(d)));
    w.lease_until.push(sql);
    sql.push(", ");
    push_deadline(sql, p, &w.now);
    sql.push(") END,\n    worker_id = ");
    w.worker_id.push(sql);
    sql.push(",\n    worker_host = ");
    w.worker_host.push(sql);
    sql.push(",\n    lease_credential = ");
    w.credential.push(sql);
    sql.push(",\n    started_at = ");
    w.now.push(sql);
    sql.push(",\n    finished_at = NULL,\n    updated_at = ");
    w.now.push(sql);
}

/// [`push_claim_write`] as text, for a hot-path file whose values are all SQL of its own.
pub fn claim_write(d: Dialect, prefix: &str, w: &ClaimWrite<'_>) -> String {
    let mut sql = Sql::new(d, "");
    push_claim_write(&mut sql, prefix, w);
    debug_assert!(
        sql.args().is_empty(),
        "a hot-path file binds its own values"
    );
    sql.text().to_owned()
}

/// The counters every claim moves, a task's or a run's: the task runs, and its attempt
/// (a run's number, for a multi-run task) and its fencing token grow by one.
pub fn push_claim_counters(sql: &mut Sql, prefix: &str) {
    let p = prefix;
    sql.push(&format!(
        "state = '{}',\n    attempt = {p}attempt + 1,\n    lease_token = {p}lease_token + 1",
        TaskState::Running.as_str()
    ));
}

/// `now` plus the row's timeout, or NULL when it has none.
fn push_deadline(sql: &mut Sql, p: &str, now: &Val<'_>) {
    match sql.dialect() {
        Dialect::Postgres => {
            now.push(sql);
            sql.push(&format!(" + {p}timeout_ms * interval '1 millisecond'"));
        }
        Dialect::Sqlite => {
            sql.push(&format!(
                "CASE WHEN {p}timeout_ms IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', "
            ));
            now.push(sql);
            sql.push(&format!(
                ", '+' || ({p}timeout_ms / 1000.0) || ' seconds') END"
            ));
        }
        Dialect::MySql => {
            sql.push("DATE_ADD(");
            now.push(sql);
            sql.push(&format!(", INTERVAL {p}timeout_ms * 1000 MICROSECOND)"));
        }
    }
}

/// The smaller of two times, neither NULL.
fn least(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "min",
        Dialect::Postgres => "least",
        Dialect::MySql => "LEAST",
    }
}

/// The fence of a worker's write under a lease, over the row (a task's or a run's) that
/// `prefix` qualifies: the row still runs, under the lease's fencing token and its
/// credential (NULL only for a lease taken before credentials existed, and then on both
/// sides). The state is tested so that no planner chooses an index on it: a test of
/// `running` on a row found by its id, whatever the statistics say of how many run.
pub fn push_fence(sql: &mut Sql, prefix: &str, token: &Val<'_>, credential: &Val<'_>) {
    let d = sql.dialect();
    let p = prefix;
    let running = TaskState::Running.as_str();
    sql.push(&format!("{p}lease_token = "));
    token.push(sql);
    sql.push(&match d {
        Dialect::Postgres => format!(" AND ({p}state || '') = '{running}'"),
        Dialect::Sqlite => format!(" AND +{p}state = '{running}'"),
        Dialect::MySql => format!(" AND {p}state = '{running}'"),
    });
    sql.push(&format!(
        " AND {p}lease_credential {} ",
        match d {
            Dialect::Postgres => "IS NOT DISTINCT FROM",
            Dialect::Sqlite => "IS",
            Dialect::MySql => "<=>",
        }
    ));
    credential.push(sql);
}

/// [`push_fence`] as text, for a hot-path file.
pub fn fence(d: Dialect, prefix: &str, token: &str, credential: &str) -> String {
    let mut sql = Sql::new(d, "");
    push_fence(&mut sql, prefix, &Val::Sql(token), &Val::Sql(credential));
    sql.text().to_owned()
}

/// A hot-path file whose one marker is `{fence}`, with [`fence`] in its place.
pub fn fenced(file: &str, d: Dialect, prefix: &str, token: &str, credential: &str) -> String {
    crate::hot::expand(file, &[(FENCE, &fence(d, prefix, token, credential))])
}

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
