-- The archive (see docs/schema.md, "Retention"): a finished task that retention moves
-- instead of deleting goes to tasktable_tasks_archive with every column it had, and its
-- attempts to tasktable_attempts_archive, in the transaction that deletes them. The
-- columns are those of tasktable_tasks and tasktable_attempts, without their defaults,
-- checks, keys and foreign keys (an archived idempotency key may be used again by a new
-- task), so a migration that adds a column to either adds it here too; the conformance
-- suite archives every column and reads it back. Indexed by id and by finished_at, for
-- reading and pruning by age.

CREATE TABLE tasktable_tasks_archive (
    id                 BIGINT PRIMARY KEY,
    kind               TEXT NOT NULL,
    queue              TEXT NOT NULL,
    state              TEXT NOT NULL,
    payload            JSONB NOT NULL,
    result             JSONB,
    checkpoint         JSONB,
    progress           JSONB,
    task_key           TEXT,
    idempotency_key    TEXT,
    priority           INTEGER NOT NULL,
    run_at             TIMESTAMPTZ NOT NULL,
    attempt            INTEGER NOT NULL,
    max_attempts       INTEGER NOT NULL,
    backoff_initial_ms BIGINT NOT NULL,
    backoff_multiplier DOUBLE PRECISION NOT NULL,
    backoff_max_ms     BIGINT NOT NULL,
    backoff_jitter     DOUBLE PRECISION NOT NULL,
    timeout_ms         BIGINT,
    lease_token        BIGINT NOT NULL,
    lease_credential   TEXT,
    lease_expires_at   TIMESTAMPTZ,
    deadline_at        TIMESTAMPTZ,
    worker_id          TEXT,
    worker_host        TEXT,
    last_error         TEXT,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    started_at         TIMESTAMPTZ,
    finished_at        TIMESTAMPTZ,
    schedule_id        BIGINT,
    slot_at            TIMESTAMPTZ
);

CREATE INDEX tasktable_tasks_archive_finished ON tasktable_tasks_archive (finished_at);

CREATE TABLE tasktable_attempts_archive (
    id          BIGINT PRIMARY KEY,
    task_id     BIGINT NOT NULL,
    attempt     INTEGER NOT NULL,
    worker_id   TEXT,
    worker_host TEXT,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ NOT NULL,
    outcome     TEXT NOT NULL,
    error       TEXT,
    queue       TEXT,
    kind        TEXT,
    due_at      TIMESTAMPTZ,
    task_state  TEXT
);

CREATE INDEX tasktable_attempts_archive_finished ON tasktable_attempts_archive (finished_at);

CREATE INDEX tasktable_attempts_archive_task ON tasktable_attempts_archive (task_id, id);
