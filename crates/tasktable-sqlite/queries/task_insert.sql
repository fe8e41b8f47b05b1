INSERT INTO tasktable_tasks (
    kind, queue, state, payload, task_key, idempotency_key, priority, run_at, max_attempts,
    backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
    created_at, updated_at
) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id
