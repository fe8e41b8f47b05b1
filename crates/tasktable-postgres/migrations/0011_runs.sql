-- Multi-run tasks (see docs/multi-run.md). A task that wants several runs has `copies`
-- set, its counters kept beside it in the same transactions as its runs, its own target
-- in `run_target` and '|m|' in `target`: a name no worker answers to, so the hot claim's
-- lanes never take it, and tasktable_tasks_runs lists the open ones per queue for the
-- multi-run claim. Each run is a row of tasktable_runs, numbered from 1 by the task's
-- `attempt` counter, with its own lease, fencing token and checkpoint.
ALTER TABLE tasktable_tasks
    ADD COLUMN copies INTEGER,
    ADD COLUMN at_once INTEGER,
    ADD COLUMN repeat_runs BOOLEAN,
    ADD COLUMN joining_runs BOOLEAN,
    ADD COLUMN max_failed_runs INTEGER,
    ADD COLUMN runs_active INTEGER,
    ADD COLUMN runs_succeeded INTEGER,
    ADD COLUMN runs_failed INTEGER,
    ADD COLUMN run_target TEXT;
ALTER TABLE tasktable_tasks_archive
    ADD COLUMN copies INTEGER,
    ADD COLUMN at_once INTEGER,
    ADD COLUMN repeat_runs BOOLEAN,
    ADD COLUMN joining_runs BOOLEAN,
    ADD COLUMN max_failed_runs INTEGER,
    ADD COLUMN runs_active INTEGER,
    ADD COLUMN runs_succeeded INTEGER,
    ADD COLUMN runs_failed INTEGER,
    ADD COLUMN run_target TEXT;
CREATE INDEX tasktable_tasks_runs ON tasktable_tasks (queue, priority DESC, run_at, id)
    WHERE target = '|m|' AND state IN ('pending', 'running');

CREATE TABLE tasktable_runs (
    task_id          BIGINT NOT NULL REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    run              INTEGER NOT NULL,
    worker_id        TEXT NOT NULL,
    worker_host      TEXT,
    state            TEXT NOT NULL,
    lease_token      BIGINT NOT NULL,
    lease_credential TEXT,
    lease_expires_at TIMESTAMPTZ,
    deadline_at      TIMESTAMPTZ,
    checkpoint       JSONB,
    progress         JSONB,
    result           JSONB,
    error            TEXT,
    resumed_from     INTEGER,
    started_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,
    PRIMARY KEY (task_id, run)
);
CREATE INDEX tasktable_runs_worker ON tasktable_runs (task_id, worker_id);
CREATE INDEX tasktable_runs_lease ON tasktable_runs (lease_expires_at) WHERE state = 'running';

CREATE TABLE tasktable_runs_archive (
    task_id          BIGINT NOT NULL,
    run              INTEGER NOT NULL,
    worker_id        TEXT NOT NULL,
    worker_host      TEXT,
    state            TEXT NOT NULL,
    lease_token      BIGINT NOT NULL,
    lease_credential TEXT,
    lease_expires_at TIMESTAMPTZ,
    deadline_at      TIMESTAMPTZ,
    checkpoint       JSONB,
    progress         JSONB,
    result           JSONB,
    error            TEXT,
    resumed_from     INTEGER,
    started_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,
    PRIMARY KEY (task_id, run)
);
