-- $1 queue, $2 paused. A resumed queue may have due work: wake idle workers on commit.
WITH up AS (
    INSERT INTO tasktable_queues (name, paused, updated_at) VALUES ($1, $2, now())
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
    RETURNING name, paused
)
SELECT name, CASE WHEN NOT paused THEN pg_notify('tasktable_wake', name) END AS woke FROM up
