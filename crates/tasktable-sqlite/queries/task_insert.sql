-- Inserts one task; submit runs it once per task, inside the write transaction.
-- ?1 kind, ?2 queue, ?3 state, ?4 payload, ?5 key, ?6 idempotency key, ?7 priority,
-- ?8 run_at, ?9 max attempts, ?10 backoff initial ms, ?11 multiplier, ?12 backoff max ms,
-- ?13 jitter, ?14 timeout ms, ?15 now (created_at and updated_at), ?16 target (core's
-- stored form, NULL for any worker), ?17 affinity ms, ?18 who submits it (NULL: unknown),
-- ?19 the submitter's traceparent (NULL: none).
--
-- A task whose idempotency key exists already is not inserted and returns no id; the
-- caller then looks it up (task_by_idempotency_key.sql).
INSERT INTO tasktable_tasks (
    kind, queue, state, payload, task_key, idempotency_key, priority, run_at, max_attempts,
    backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
    created_at, updated_at, target, affinity_ms, created_by, traceparent
) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, ?16, ?17, ?18, ?19)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id
