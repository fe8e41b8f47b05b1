-- Ends one attempt. Binds, in order: new state (NULL: pending, or failed when no attempts
-- are left), run_at if it goes back to pending, now, 1 to give the attempt back (else 0),
-- result, error, now, id, token, TRUE to apply only if the lease (which never outlasts
-- the deadline) has passed, now.
--
-- MySQL applies single-table SET assignments left to right, each seeing the values
-- assigned before it (PostgreSQL evaluates all of them against the old row). So `state`
-- comes first and decides from the attempt count the attempt ended with; run_at and
-- finished_at then read the new state; the attempt is given back only after that.
-- The WHERE clause reads the row as it was.
UPDATE tasktable_tasks SET
    state = COALESCE(?, IF(attempt >= max_attempts, 'failed', 'pending')),
    run_at = IF(state = 'pending', ?, run_at),
    finished_at = IF(state = 'pending', NULL, ?),
    attempt = attempt - ?,
    result = COALESCE(?, result),
    last_error = COALESCE(?, last_error),
    lease_expires_at = NULL,
    deadline_at = NULL,
    updated_at = ?
WHERE id = ? AND lease_token = ? AND state = 'running'
  AND (NOT ? OR lease_expires_at <= ?)
