-- Records the attempt task_finish.sql is about to end, from the row as the attempt left
-- it (run_at is still the time the task was due), under the same fence. Runs first, in
-- the same write transaction; no row inserted means the lease was lost. ?1 new state
-- (NULL for a retry: core's rule, expanded from its marker, picks pending or failed from
-- the row's attempt and current max_attempts), ?2 outcome, ?3 error, ?4 now, ?5 id, ?6 token,
-- ?7 1 to apply only if the lease or deadline passed, ?8 credential (`IS`: NULL matches
-- NULL).
INSERT INTO tasktable_attempts
    (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error,
     queue, kind, due_at, task_state)
SELECT id, attempt, worker_id, worker_host, started_at, ?4, ?2, ?3,
       queue, kind, run_at, coalesce(?1, {retry_state})
FROM tasktable_tasks
WHERE id = ?5 AND lease_token = ?6 AND state = 'running' AND lease_credential IS ?8
  AND (?7 = 0 OR lease_expires_at <= ?4)
