-- Records the attempts task_finish.sql is about to end, one history row per chosen item in
-- input order, from the rows as the attempts left them (run_at is still the time the task
-- was due), under the same fence. Runs first, in the same write transaction. ?1 the chosen
-- items (one per task, read as rows by the finish_items marker), ?2 now, ?3 1 to apply
-- only if the lease or deadline passed. An item without a new state is a retry: core's
-- rule, expanded from its marker, picks pending or failed from the row's attempt and
-- current max_attempts. The items come first (CROSS JOIN) and find their rows by id;
-- `+state` keeps the state index out of it, as in task_finish.sql.
INSERT INTO tasktable_attempts
    (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error,
     queue, kind, due_at, task_state)
SELECT id, attempt, worker_id, worker_host, started_at, ?2, i_outcome, i_error,
       queue, kind, run_at, coalesce(i_state, {retry_state})
FROM ({finish_items}) AS items
CROSS JOIN tasktable_tasks ON id = i_id
WHERE {fence}
  AND (?3 = 0 OR lease_expires_at <= ?2)
ORDER BY i_ord
