INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
