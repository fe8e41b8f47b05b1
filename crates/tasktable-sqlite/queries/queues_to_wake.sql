-- The queues of the tasks a finish gave back without delay (?1, ids as a JSON array),
-- whose idle workers are woken. Runs on a reader connection after the finish commits,
-- so the writer is not held for it; a task claimed again meanwhile is no longer pending
-- and wakes nobody.
SELECT DISTINCT queue FROM tasktable_tasks
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
