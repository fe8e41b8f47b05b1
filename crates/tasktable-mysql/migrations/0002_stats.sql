-- tasktable schema, version 2 (MySQL 8 and MariaDB 10.6+): what statistics need.
--
-- Each attempt keeps the queue and kind it ran under, when its task was due (so queue
-- wait = started_at - due_at) and the state it left the task in. Finished minutes are
-- summed into tasktable_stats, one row per minute, queue and kind, so a statistics query
-- reads rollups instead of every attempt (see tasktable_store::stats).
--
-- IF NOT EXISTS keeps each statement safe to run again (see 0001). MySQL has no
-- IF NOT EXISTS for columns and indexes; the migrator drops it there, and each ALTER is
-- atomic on its own.

ALTER TABLE tasktable_attempts
    ADD COLUMN IF NOT EXISTS queue      VARCHAR(255),
    ADD COLUMN IF NOT EXISTS kind       VARCHAR(255),
    ADD COLUMN IF NOT EXISTS due_at     DATETIME(6),
    ADD COLUMN IF NOT EXISTS task_state VARCHAR(16),
    ADD INDEX IF NOT EXISTS tasktable_attempts_finished (finished_at);
-- run_at joins the state index so the oldest due pending task of each queue and kind is
-- read from the index alone.
ALTER TABLE tasktable_tasks
    ADD INDEX IF NOT EXISTS tasktable_tasks_created (created_at),
    DROP INDEX IF EXISTS tasktable_tasks_state,
    ADD INDEX tasktable_tasks_state (state, queue, kind, run_at);
UPDATE tasktable_attempts a JOIN tasktable_tasks t ON t.id = a.task_id
SET a.queue = t.queue, a.kind = t.kind
WHERE a.queue IS NULL;

CREATE TABLE IF NOT EXISTS tasktable_stats (
    minute    DATETIME(6)  NOT NULL,
    queue     VARCHAR(255) NOT NULL,
    kind      VARCHAR(255) NOT NULL,
    submitted BIGINT       NOT NULL,
    succeeded BIGINT       NOT NULL,
    failed    BIGINT       NOT NULL,
    retried   BIGINT       NOT NULL,
    cancelled BIGINT       NOT NULL,
    -- Counts per bucket of tasktable_store::stats::BUCKET_BOUNDS_MS, comma-separated.
    wait_hist TEXT         NOT NULL,
    run_hist  TEXT         NOT NULL,
    PRIMARY KEY (minute, queue, kind)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- Everything before rolled_until is in tasktable_stats.
CREATE TABLE IF NOT EXISTS tasktable_stats_rolled (
    id           INT         NOT NULL PRIMARY KEY,
    rolled_until DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
