-- The lease of task ?1, read after a fenced write matched no row, to tell whether an
-- operator cancelled the task or the lease passed to someone else. One task a statement:
-- SQLite's writes after a claim go one task at a time, on the connection that holds the
-- write transaction.
SELECT state, lease_token, lease_credential FROM tasktable_tasks WHERE id = ?1
