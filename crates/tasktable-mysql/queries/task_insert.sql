-- Inserts one task. Binds, in order: kind, queue, state, payload, key, idempotency key,
-- priority, run_at, max attempts, backoff initial ms, multiplier, backoff max ms, jitter,
-- timeout ms, now (created_at), now (updated_at), target (core's stored form, NULL for
-- any worker), affinity ms, who submits it (NULL: unknown), the submitter's traceparent
-- (NULL: none).
--
-- MySQL has no INSERT ... RETURNING and no ON CONFLICT DO NOTHING that says which row
-- won, so the batch is inserted one row at a time: the new id is LAST_INSERT_ID() of
-- this statement, and a duplicate idempotency key fails it with error 1062, which rolls
-- back only this statement. Then the existing task is looked up (task_by_idempotency_key).
INSERT INTO tasktable_tasks (
    kind, queue, state, payload, task_key, idempotency_key, priority, run_at, max_attempts,
    backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
    created_at, updated_at, target, affinity_ms, created_by, traceparent
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
