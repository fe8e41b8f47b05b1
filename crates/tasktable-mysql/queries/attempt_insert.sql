-- Records the attempts task_finish.sql has just ended, from the rows it left, in id
-- order. Each case marker is a list `CASE id WHEN ? THEN ? ... END` as in task_finish.sql.
-- Binds, in order: 1 where the attempt was given back, now (finished_at), outcome, error,
-- the time each task was due (task_finish_lock.sql read it before run_at could move),
-- each id (the ids marker: one placeholder per id).
--
-- MySQL has no UPDATE ... RETURNING, so the history is copied after the UPDATE, in the
-- same transaction, from rows it still holds locked. The row's attempt count no longer
-- includes a refunded attempt: it is added back, so the history names the attempt that
-- just ended.
INSERT INTO tasktable_attempts
    (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error,
     queue, kind, due_at, task_state)
SELECT id, attempt + {case}, worker_id, worker_host, started_at, ?, {case}, {case},
       queue, kind, {case}, state
FROM tasktable_tasks WHERE id IN ({ids}) ORDER BY id
