-- Ends one attempt (attempt_insert.sql has recorded it). ?1 new state (NULL for a retry:
-- core's rule picks pending or failed), ?2 run_at if it goes back to pending, ?3 1 to
-- give the attempt back, ?4 result, ?5 error, ?6 now, ?7 id, ?8 token, ?9 1 to apply only
-- if the lease or deadline passed, ?10 credential (`IS`: NULL matches NULL).
--
-- Every SET expression sees the row as it was before this UPDATE, so the new state is
-- written out again wherever run_at and finished_at depend on it, and the retry rule
-- reads the attempt that just ended and the row's current max_attempts (an operator may
-- have changed it while the task ran).
UPDATE tasktable_tasks SET
    state = coalesce(?1, {retry_state}),
    run_at = CASE WHEN coalesce(?1, {retry_state}) = 'pending'
                  THEN ?2 ELSE run_at END,
    finished_at = CASE WHEN coalesce(?1, {retry_state}) IN ('pending', 'held')
                  THEN NULL ELSE ?6 END,
    attempt = attempt - ?3,
    result = coalesce(?4, result),
    last_error = coalesce(?5, last_error),
    lease_expires_at = NULL,
    deadline_at = NULL,
    updated_at = ?6,
    -- A retry of a task with an affinity waits for this worker (core's rule, rules.rs).
    {affinity}
WHERE id = ?7 AND lease_token = ?8 AND state = 'running' AND lease_credential IS ?10
  AND (?9 = 0 OR lease_expires_at <= ?6)
