-- The leases of tasks $1, read after a fenced write matched none of them, to tell
-- whether an operator cancelled a task, took it back with a new target (the latest
-- attempt of a pending task, through tasktable_attempts_task), or its lease passed to
-- someone else. One read for all of a batch's misses.
SELECT t.id, t.state, t.lease_token, t.lease_credential,
       CASE WHEN t.state = 'pending' THEN (SELECT a.outcome FROM tasktable_attempts a WHERE a.task_id = t.id ORDER BY a.id DESC LIMIT 1) END AS last_outcome
FROM tasktable_tasks t WHERE t.id = ANY($1)
