-- tasktable schema, version 2 (PostgreSQL): what statistics need.
--
-- Each attempt keeps the queue and kind it ran under, when its task was due (so queue
-- wait = started_at - due_at) and the state it left the task in. Finished minutes are
-- summed into tasktable_stats, one row per minute, queue and kind, so a statistics query
-- reads rollups instead of every attempt (see tasktable_store::stats).

ALTER TABLE tasktable_attempts
    ADD COLUMN queue      TEXT,
    ADD COLUMN kind       TEXT,
    ADD COLUMN due_at     TIMESTAMPTZ,
    ADD COLUMN task_state TEXT;
UPDATE tasktable_attempts a SET queue = t.queue, kind = t.kind
FROM tasktable_tasks t WHERE t.id = a.task_id;

CREATE INDEX tasktable_attempts_finished ON tasktable_attempts (finished_at);
CREATE INDEX tasktable_tasks_created ON tasktable_tasks (created_at);
-- run_at joins the state index so the oldest due pending task of each queue and kind is
-- read from the index alone.
DROP INDEX tasktable_tasks_state;
CREATE INDEX tasktable_tasks_state ON tasktable_tasks (state, queue, kind, run_at);

CREATE TABLE tasktable_stats (
    minute    TIMESTAMPTZ NOT NULL,
    queue     TEXT        NOT NULL,
    kind      TEXT        NOT NULL,
    submitted BIGINT      NOT NULL,
    succeeded BIGINT      NOT NULL,
    failed    BIGINT      NOT NULL,
    retried   BIGINT      NOT NULL,
    cancelled BIGINT      NOT NULL,
    -- Counts per bucket of tasktable_store::stats::BUCKET_BOUNDS_MS, comma-separated.
    wait_hist TEXT        NOT NULL,
    run_hist  TEXT        NOT NULL,
    PRIMARY KEY (minute, queue, kind)
);

-- Everything before rolled_until is in tasktable_stats.
CREATE TABLE tasktable_stats_rolled (
    id           INTEGER     PRIMARY KEY CHECK (id = 1),
    rolled_until TIMESTAMPTZ NOT NULL
);
