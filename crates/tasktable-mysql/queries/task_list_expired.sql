-- Running tasks whose lease has run out, oldest expiry first, for the rescuer. Binds, in
-- order: now (NULL: the database's clock), limit. The lease never outlasts the deadline,
-- so an expired lease covers both.
--
-- Reads the index tasktable_tasks_lease (state, lease_expires_at), which ends in the id
-- as every InnoDB secondary index does, so the ORDER BY needs no sort.
SELECT {task_columns} FROM tasktable_tasks
WHERE state = 'running' AND lease_expires_at <= COALESCE(?, UTC_TIMESTAMP(6))
ORDER BY lease_expires_at, id
LIMIT ?
