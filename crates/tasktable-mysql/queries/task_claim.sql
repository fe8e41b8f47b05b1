-- Takes the tasks task_claim_select.sql chose and locked, in the same transaction. MySQL
-- has no UPDATE ... RETURNING: the claimed rows are read back afterwards, still locked,
-- with the shared layer's query of tasks by id (tasktable_sql::query::get_many).
-- Binds, in order: now, lease expiry (twice), worker id, worker host, each chosen id with
-- its fresh credential (the credentials marker is `CASE id WHEN ? THEN ? ... END`), now (twice),
-- each chosen id (one placeholder per id).
--
-- MySQL applies single-table SET assignments left to right, and each one sees the values
-- assigned before it (PostgreSQL evaluates all of them against the old row). The lease
-- therefore reads the deadline_at just set. LEAST() returns NULL if any argument is NULL
-- (PostgreSQL's least() ignores NULLs), hence the COALESCE for tasks without a timeout.
UPDATE tasktable_tasks SET
    state = 'running',
    attempt = attempt + 1,
    lease_token = lease_token + 1,
    -- NULL when the task has no timeout.
    deadline_at = DATE_ADD(?, INTERVAL timeout_ms * 1000 MICROSECOND),
    lease_expires_at = LEAST(?, COALESCE(deadline_at, ?)),
    worker_id = ?,
    worker_host = ?,
    lease_credential = {credentials},
    started_at = ?,
    finished_at = NULL,
    updated_at = ?
WHERE id IN ({ids}) AND state = 'pending'
