-- The leases of tasks $1, read after a fenced write matched none of them, to tell
-- whether an operator cancelled a task or its lease passed to someone else. One read for
-- all of a batch's misses.
SELECT id, state, lease_token, lease_credential FROM tasktable_tasks WHERE id = ANY($1)
