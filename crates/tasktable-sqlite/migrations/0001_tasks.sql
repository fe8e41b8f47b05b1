-- tasktable schema, version 1 (SQLite).
-- Timestamps are UTC text in one fixed format, 'YYYY-MM-DDTHH:MM:SS.SSSZ', so they sort
-- and compare as strings and SQLite's date functions read them.

CREATE TABLE tasktable_tasks (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    kind               TEXT    NOT NULL,
    queue              TEXT    NOT NULL,
    state              TEXT    NOT NULL CHECK (state IN ('held', 'pending', 'running', 'succeeded', 'failed', 'cancelled')),
    payload            TEXT    NOT NULL,
    result             TEXT,
    checkpoint         TEXT,
    progress           TEXT,
    task_key           TEXT,
    idempotency_key    TEXT    UNIQUE,
    priority           INTEGER NOT NULL DEFAULT 0,
    run_at             TEXT    NOT NULL,
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    backoff_initial_ms INTEGER NOT NULL,
    backoff_multiplier REAL    NOT NULL,
    backoff_max_ms     INTEGER NOT NULL,
    backoff_jitter     REAL    NOT NULL,
    timeout_ms         INTEGER,
    lease_token        INTEGER NOT NULL DEFAULT 0,
    lease_expires_at   TEXT,
    deadline_at        TEXT,
    worker_id          TEXT,
    worker_host        TEXT,
    last_error         TEXT,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL,
    started_at         TEXT,
    finished_at        TEXT
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
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    worker_id   TEXT,
    worker_host TEXT,
    started_at  TEXT,
    finished_at TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    error       TEXT
);
CREATE INDEX tasktable_attempts_task ON tasktable_attempts (task_id, id);

CREATE TABLE tasktable_queues (
    name       TEXT    PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT    NOT NULL
);
