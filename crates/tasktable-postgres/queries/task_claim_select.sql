-- Chooses and locks up to $4 due tasks of queue $1 in claim order. Part of
-- task_claim.sql on PostgreSQL (its `picked` CTE, which also says why it is a CTE), so
-- that a claim is one statement; `clock` is that statement's now. $3 kinds.
--
-- Reads the partial index tasktable_tasks_claim, whose order is the ORDER BY, so the
-- scan stops after LIMIT rows. SKIP LOCKED passes over rows another claimer holds, so
-- concurrent workers never wait on each other.
SELECT t.id
FROM tasktable_tasks t, clock
WHERE t.state = 'pending' AND t.queue = $1 AND t.run_at <= clock.now
  AND t.kind = ANY($3::text[])
  AND NOT EXISTS ({queue_paused})
ORDER BY t.priority DESC, t.run_at, t.id
LIMIT $4
FOR UPDATE OF t SKIP LOCKED
