-- The lease of task ?1, read after a fenced write matched no row, to tell whether an
-- operator cancelled the task, took it back with a new target (the latest attempt of a
-- pending task, through tasktable_attempts_task), or the lease passed to someone else.
-- One task a statement: SQLite's writes after a claim go one task at a time, on the
-- connection that holds the write transaction.
SELECT t.state, t.lease_token, t.lease_credential,
       CASE WHEN t.state = 'pending' THEN (SELECT a.outcome FROM tasktable_attempts a WHERE a.task_id = t.id ORDER BY a.id DESC LIMIT 1) END AS last_outcome
FROM tasktable_tasks t WHERE t.id = ?1
