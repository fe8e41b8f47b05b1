-- Reads the fences of a finish's tasks before it writes: the items that apply are chosen
-- from these rows (tasktable_store::finish_applies, as on MySQL), then recorded and ended
-- by one statement each for the whole batch (attempt_insert.sql, task_finish.sql). Nothing
-- to lock: the finish runs in a write transaction (BEGIN IMMEDIATE) that holds the
-- database's only write lock from its first statement, so these rows cannot change before
-- the writes, which state the fence again. ?1 the tasks' ids (a JSON array).
SELECT id, lease_token, lease_credential, state = 'running' AS running, lease_expires_at
FROM tasktable_tasks
WHERE id IN (SELECT value FROM json_each(?1))
