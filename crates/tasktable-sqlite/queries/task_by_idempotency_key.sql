-- The task that holds idempotency key ?1, after task_insert.sql found it taken. Runs in
-- the same write transaction: SQLite has one writer, so the row cannot vanish meanwhile.
SELECT id FROM tasktable_tasks WHERE idempotency_key = ?1
