-- Records the attempt task_finish.sql just ended, from the row it left behind, in the
-- same transaction. Binds, in order: 1 if the attempt was given back (the row's count no
-- longer includes it, so add it back) else 0, now, outcome, error, the time the task was
-- due when it was claimed (read before the update, which may move run_at), task id.
INSERT INTO tasktable_attempts
    (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error,
     queue, kind, due_at, task_state)
SELECT id, attempt + ?, worker_id, worker_host, started_at, ?, ?, ?, queue, kind, ?, state
FROM tasktable_tasks WHERE id = ?
