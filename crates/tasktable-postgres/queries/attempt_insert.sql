-- Records the attempts task_finish.sql ends, in input order, from the rows `done` (its
-- UPDATE ... RETURNING) gives back: the row after the update, with the attempt that
-- ended and the time the task was due. Part of task_finish.sql on PostgreSQL (its
-- `history` CTE), so that a finish is one statement: a data-modifying CTE sees the rows
-- another one returns, and only the tasks whose fence matched are recorded.
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error,
                                queue, kind, due_at, task_state)
SELECT id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error,
       queue, kind, due_at, state FROM done
ORDER BY ord
