-- Running tasks whose lease has run out at $1 (NULL: now()), oldest expiry first, at most
-- $2 of them, for the rescuer. The lease never outlasts the deadline, so an expired lease
-- covers both. Reads the partial index tasktable_tasks_lease (lease_expires_at WHERE
-- state = 'running').
SELECT {task_columns} FROM tasktable_tasks
WHERE state = 'running' AND lease_expires_at <= coalesce($1::timestamptz, now())
ORDER BY lease_expires_at, id
LIMIT $2
