-- Running tasks whose lease has run out at ?1, oldest expiry first, at most ?2 of them,
-- for the rescuer. The lease never outlasts the deadline, so an expired lease covers
-- both. Reads the partial index tasktable_tasks_lease (lease_expires_at WHERE state =
-- 'running'), whose order is the ORDER BY.
SELECT {task_columns} FROM tasktable_tasks
WHERE state = 'running' AND lease_expires_at <= ?1
ORDER BY lease_expires_at
LIMIT ?2
