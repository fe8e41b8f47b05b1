-- Due tasks of one queue in claim order; reads the partial index tasktable_tasks_claim.
-- ?1 queue, ?2 now, ?3 kinds (JSON array), ?4 limit
SELECT id FROM tasktable_tasks
WHERE state = 'pending' AND queue = ?1 AND run_at <= ?2
  AND kind IN (SELECT value FROM json_each(?3))
  AND NOT EXISTS (SELECT 1 FROM tasktable_queues q WHERE q.name = ?1 AND q.paused)
ORDER BY priority DESC, run_at, id
LIMIT ?4
