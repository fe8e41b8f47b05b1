-- Multi-run tasks (see docs/multi-run.md). A task that wants several runs has `copies`
-- set, its counters kept beside it in the same transactions as its runs, its own target
-- in `run_target` and '|m|' in `target`: a name no worker answers to, so the hot claim's
-- lanes never take it. MySQL has no partial index: the multi-run claim finds the open
-- ones per queue in the targeted part of tasktable_tasks_claim. Each run is a row of
-- tasktable_runs, numbered from 1 by the task's `attempt` counter, with its own lease,
-- fencing token and checkpoint.
-- IF NOT EXISTS keeps each statement safe to run again (see 0001).
ALTER TABLE tasktable_tasks
    ADD COLUMN IF NOT EXISTS copies INT,
    ADD COLUMN IF NOT EXISTS at_once INT,
    ADD COLUMN IF NOT EXISTS repeat_runs BOOLEAN,
    ADD COLUMN IF NOT EXISTS joining_runs BOOLEAN,
    ADD COLUMN IF NOT EXISTS max_failed_runs INT,
    ADD COLUMN IF NOT EXISTS runs_active INT,
    ADD COLUMN IF NOT EXISTS runs_succeeded INT,
    ADD COLUMN IF NOT EXISTS runs_failed INT,
    ADD COLUMN IF NOT EXISTS run_target TEXT;
ALTER TABLE tasktable_tasks_archive
    ADD COLUMN IF NOT EXISTS copies INT,
    ADD COLUMN IF NOT EXISTS at_once INT,
    ADD COLUMN IF NOT EXISTS repeat_runs BOOLEAN,
    ADD COLUMN IF NOT EXISTS joining_runs BOOLEAN,
    ADD COLUMN IF NOT EXISTS max_failed_runs INT,
    ADD COLUMN IF NOT EXISTS runs_active INT,
    ADD COLUMN IF NOT EXISTS runs_succeeded INT,
    ADD COLUMN IF NOT EXISTS runs_failed INT,
    ADD COLUMN IF NOT EXISTS run_target TEXT;

CREATE TABLE IF NOT EXISTS tasktable_runs (
    task_id          BIGINT       NOT NULL,
    run              INT          NOT NULL,
    worker_id        VARCHAR(255) NOT NULL,
    worker_host      TEXT,
    state            VARCHAR(32)  NOT NULL,
    lease_token      BIGINT       NOT NULL,
    lease_credential CHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
    lease_expires_at DATETIME(6),
    deadline_at      DATETIME(6),
    checkpoint       JSON,
    progress         JSON,
    result           JSON,
    error            LONGTEXT,
    resumed_from     INT,
    started_at       DATETIME(6)  NOT NULL,
    finished_at      DATETIME(6),
    PRIMARY KEY (task_id, run),
    KEY tasktable_runs_worker (task_id, worker_id),
    KEY tasktable_runs_lease (state, lease_expires_at),
    CONSTRAINT tasktable_runs_task_fk FOREIGN KEY (task_id)
        REFERENCES tasktable_tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_runs_archive (
    task_id          BIGINT       NOT NULL,
    run              INT          NOT NULL,
    worker_id        VARCHAR(255) NOT NULL,
    worker_host      TEXT,
    state            VARCHAR(32)  NOT NULL,
    lease_token      BIGINT       NOT NULL,
    lease_credential CHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
    lease_expires_at DATETIME(6),
    deadline_at      DATETIME(6),
    checkpoint       JSON,
    progress         JSON,
    result           JSON,
    error            LONGTEXT,
    resumed_from     INT,
    started_at       DATETIME(6)  NOT NULL,
    finished_at      DATETIME(6),
    PRIMARY KEY (task_id, run)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
