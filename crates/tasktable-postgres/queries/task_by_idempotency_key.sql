-- The tasks that hold the idempotency keys $1, for the inputs task_insert.sql did not
-- insert because their key exists. A statement of its own after the insert, so under
-- READ COMMITTED it sees a row that a racing submit committed while the insert waited
-- for it.
SELECT idempotency_key, id FROM tasktable_tasks WHERE idempotency_key = ANY($1)
