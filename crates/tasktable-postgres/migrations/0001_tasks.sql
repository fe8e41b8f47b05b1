-- tasktable schema, version 1 (PostgreSQL).
-- Same tables and columns as the SQLite schema; timestamps are TIMESTAMPTZ (microsecond
-- precision) and JSON documents are JSONB.

CREATE TABLE tasktable_tasks (
    -- ALWAYS: only tasktable hands out ids. The submit draws them from the sequence itself
    -- (OVERRIDING SYSTEM VALUE) so it can tell which input row became which task.
    id                 BIGINT           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind               TEXT             NOT NULL,
    queue              TEXT             NOT NULL,
    state              TEXT             NOT NULL CHECK (state IN ('held', 'pending', 'running', 'succeeded', 'failed', 'cancelled')),
    payload            JSONB            NOT NULL,
    result             JSONB,
    checkpoint         JSONB,
    progress           JSONB,
    task_key           TEXT,
    idempotency_key    TEXT             UNIQUE,
    priority           INTEGER          NOT NULL DEFAULT 0,
    run_at             TIMESTAMPTZ      NOT NULL,
    attempt            INTEGER          NOT NULL DEFAULT 0,
    max_attempts       INTEGER          NOT NULL,
    backoff_initial_ms BIGINT           NOT NULL,
    backoff_multiplier DOUBLE PRECISION NOT NULL,
    backoff_max_ms     BIGINT           NOT NULL,
    backoff_jitter     DOUBLE PRECISION NOT NULL,
    timeout_ms         BIGINT,
    lease_token        BIGINT           NOT NULL DEFAULT 0,
    lease_expires_at   TIMESTAMPTZ,
    deadline_at        TIMESTAMPTZ,
    worker_id          TEXT,
    worker_host        TEXT,
    last_error         TEXT,
    created_at         TIMESTAMPTZ      NOT NULL,
    updated_at         TIMESTAMPTZ      NOT NULL,
    started_at         TIMESTAMPTZ,
    finished_at        TIMESTAMPTZ
);

-- The claim reads this index in claim order and stops after LIMIT rows.
CREATE INDEX tasktable_tasks_claim ON tasktable_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'pending';
-- The rescuer's scan for expired leases.
CREATE INDEX tasktable_tasks_lease ON tasktable_tasks (lease_expires_at) WHERE state = 'running';
CREATE INDEX tasktable_tasks_state ON tasktable_tasks (state, queue, kind);
CREATE INDEX tasktable_tasks_kind ON tasktable_tasks (kind, id);
CREATE INDEX tasktable_tasks_key ON tasktable_tasks (task_key) WHERE task_key IS NOT NULL;

CREATE TABLE tasktable_attempts (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     BIGINT      NOT NULL REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    attempt     INTEGER     NOT NULL,
    worker_id   TEXT,
    worker_host TEXT,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ NOT NULL,
    outcome     TEXT        NOT NULL,
    error       TEXT
);
CREATE INDEX tasktable_attempts_task ON tasktable_attempts (task_id, id);

CREATE TABLE tasktable_queues (
    name       TEXT        PRIMARY KEY,
    paused     BOOLEAN     NOT NULL DEFAULT false,
    updated_at TIMESTAMPTZ NOT NULL
);
