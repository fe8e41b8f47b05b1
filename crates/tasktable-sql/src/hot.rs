//! The hot path's SQL files, which each backend writes by hand.
//!
//! Submit, claim, renew, checkpoint, finish and the rescuer's scan stay hand-written per
//! backend, in `crates/tasktable-{sqlite,postgres,mysql}/queries/`, because that is where
//! the databases differ most and where every round trip counts. So that the backends can
//! be diffed file by file, every backend has the same files, one per step of the hot path,
//! named by what the step does (a test in this crate fails when one backend has a file
//! another lacks):
//!
//! | file | the step |
//! | --- | --- |
//! | `task_insert.sql` | insert submitted tasks |
//! | `task_by_idempotency_key.sql` | find the task that already holds an idempotency key |
//! | `queue_paused.sql` | whether the queue being claimed from is paused |
//! | `task_claim_select.sql` | choose (and, with row locks, lock) the due tasks |
//! | `task_claim.sql` | lease the chosen tasks |
//! | `task_renew.sql` | extend a lease |
//! | `task_checkpoint.sql` | save a checkpoint and progress |
//! | `lease_rows.sql` | read the lease of tasks a fenced write missed (`Cancelled`, `Retargeted` or `Lost`) |
//! | `task_finish_lock.sql` | lock a finish's rows and read their fences before writing |
//! | `task_finish.sql` | move tasks out of `running` |
//! | `attempt_insert.sql` | record the attempt in the history |
//! | `queues_to_wake.sql` | the queues a finish made work due in, to wake their workers |
//! | `task_list_expired.sql` | running tasks whose lease ran out, for the rescuer |
//!
//! Where one database does in one statement what another needs two for, the step's file
//! still holds the SQL that does the step, and says in its opening comment that it is part
//! of another statement, which names it by a marker: PostgreSQL's `task_claim_select.sql`
//! is the `untargeted`, `targeted` and `picked` CTEs of its `task_claim.sql`
//! (`{task_claim_select}`), and its
//! `attempt_insert.sql` and `queues_to_wake.sql` are the `history` CTE and the last
//! `SELECT` of its `task_finish.sql`; on SQLite and PostgreSQL `queue_paused.sql` is the
//! `NOT EXISTS` of `task_claim_select.sql`. Only PostgreSQL's `task_finish_lock.sql` has
//! no SQL, and says why: its `UPDATE` locks and re-checks the fence itself; SQLite's is a
//! plain read (it holds the only write lock), from which it chooses the items that apply
//! before it writes them all at once. MySQL reads the rows it claimed back with
//! [`crate::query::get_many`], the shared layer's query of tasks by id.
//!
//! A file names the parts it is built from by markers in braces: another file of the same
//! backend (`{queue_paused}`), a rule of core rendered by [`crate::rules`]
//! (`{retry_state}`), or the task columns ([`crate::row::TASK_COLUMNS`],
//! `{task_columns}`). The backend expands them with [`expand`] once, the first time it
//! uses the statement (a `LazyLock<String>`), so the text sent is the same on every call
//! and no call costs a statement more. MySQL's lists of values (`{ids}`, `{kinds}`,
//! `{case}`, `{credentials}`) depend on a call's size and are filled in per call.
//!
//! Every file opens with a comment saying what it does, its parameters, and where the
//! database or its planner forces the statement's shape.

/// `text` with every `{name}` of `parts` replaced by its text. A part that is a file of
/// its own goes in without its opening comment, which speaks of the file, not of the
/// statement it joins.
///
/// # Panics
///
/// When `text` has no marker for one of `parts`: the files are compiled into their
/// backend, so that is a mistake in the backend, found by any test that runs the
/// statement.
pub fn expand(text: &str, parts: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (name, part) in parts {
        let marker = format!("{{{name}}}");
        assert!(out.contains(&marker), "no {marker} to expand in:\n{text}");
        out = out.replace(&marker, &without_opening_comment(part));
    }
    out
}

fn without_opening_comment(part: &str) -> String {
    let mut rest = part.trim();
    while rest.starts_with("--") {
        rest = rest
            .split_once('\n')
            .map_or("", |(_, after)| after)
            .trim_start();
    }
    let mut body = rest.trim_end().to_owned();
    // A comment on the last line would swallow whatever follows the marker.
    if body.lines().last().is_some_and(|line| line.contains("--")) {
        body.push('\n');
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_replaced_wherever_they_stand() {
        let sql = expand(
            "SELECT {a} FROM t WHERE {b} AND {a} IS NOT NULL",
            &[("a", "x"), ("b", "y = 1")],
        );
        assert_eq!(sql, "SELECT x FROM t WHERE y = 1 AND x IS NOT NULL");
    }

    #[test]
    fn a_file_goes_in_without_its_opening_comment() {
        let part = "-- Says what the file is for.\n-- More of that.\nSELECT 1\n  -- why\n  AND x\n";
        assert_eq!(
            expand("EXISTS ({p})", &[("p", part)]),
            "EXISTS (SELECT 1\n  -- why\n  AND x)"
        );
    }

    #[test]
    fn a_comment_on_the_last_line_does_not_swallow_what_follows() {
        assert_eq!(
            expand("({p})", &[("p", "SELECT 1 -- one\n")]),
            "(SELECT 1 -- one\n)"
        );
    }

    #[test]
    #[should_panic(expected = "no {absent} to expand")]
    fn a_marker_the_file_lacks_is_a_mistake() {
        expand("SELECT 1", &[("absent", "x")]);
    }
}
