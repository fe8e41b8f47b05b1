-- Moves the tasks task_finish_lock.sql chose out of `running`. MySQL has no arrays to
-- bind, so each per-task value travels as a case list: `CASE id WHEN ? THEN ? ... END`
-- over the chosen items, binding each id with its value. Binds, in order: new state (NULL
-- for a retry: core's rule picks pending or failed), run_at if the task goes back to
-- pending, now (finished_at), 1 to give the attempt back, result, error, now
-- (updated_at), each id (one placeholder per id), token, credential.
--
-- MySQL applies single-table SET assignments left to right, each seeing the values
-- assigned before it (PostgreSQL and SQLite evaluate all of them against the old row).
-- So `state` comes first and decides, from the attempt that just ended and the row's
-- current max_attempts (an operator may have changed it while the task ran); run_at and
-- finished_at then read the new state; the attempt is given back only after that.
--
-- The fence is stated again, though task_finish_lock.sql has checked it and still holds
-- the rows: every backend's finish states it in its UPDATE.
UPDATE tasktable_tasks SET
    state = COALESCE({case}, {retry_state}),
    run_at = IF(state = 'pending', {case}, run_at),
    finished_at = IF(state IN ('pending', 'held'), NULL, ?),
    attempt = attempt - {case},
    result = COALESCE({case}, result),
    last_error = COALESCE({case}, last_error),
    lease_expires_at = NULL,
    deadline_at = NULL,
    updated_at = ?,
    -- A retry of a task with an affinity waits for this worker (core's rule, rules.rs),
    -- reading the state and run_at assigned above.
    {affinity}
WHERE id IN ({ids}) AND {fence}
