-- Due tasks of one queue in claim order; reads the partial index tasktable_tasks_claim.
-- ?1 queue, ?2 now, ?3 kinds (JSON array), ?4 limit. Nothing is locked: the claim runs
-- inside BEGIN IMMEDIATE, which holds the only write lock until task_claim.sql has taken
-- these rows.
SELECT id FROM tasktable_tasks
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
  AND kind IN (SELECT value FROM json_each(?3))
  AND NOT EXISTS ({queue_paused})
ORDER BY priority DESC, run_at, id
LIMIT ?4
