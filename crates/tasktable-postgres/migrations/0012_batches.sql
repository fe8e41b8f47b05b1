-- Batches (docs/batches.md): a batch is a task whose payload is the data its items read;
-- its spec, progress and operators' control live in tasktable_batches, one row per batch
-- task, and the items that failed for good (up to a cap) in tasktable_batch_failures.

CREATE TABLE tasktable_batches (
    task_id             BIGINT PRIMARY KEY REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    items               BIGINT,
    parallelism         INTEGER NOT NULL,
    rate                INTEGER,
    window_size         BIGINT NOT NULL,
    error_budget        BIGINT NOT NULL,
    item_retries        INTEGER NOT NULL,
    item_backoff_ms     BIGINT NOT NULL,
    prestart_timeout_ms BIGINT NOT NULL,
    control             TEXT NOT NULL,
    low_water           BIGINT NOT NULL,
    end_at              BIGINT,
    errors              BIGINT NOT NULL,
    items_per_second    DOUBLE PRECISION,
    data_version        BIGINT NOT NULL,
    saved_at            TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL
);

CREATE TABLE tasktable_batch_failures (
    task_id   BIGINT NOT NULL REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    item      BIGINT NOT NULL,
    error     TEXT NOT NULL,
    tries     INTEGER NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (task_id, item)
);

CREATE TABLE tasktable_batches_archive (LIKE tasktable_batches);
ALTER TABLE tasktable_batches_archive ADD PRIMARY KEY (task_id);
CREATE TABLE tasktable_batch_failures_archive (LIKE tasktable_batch_failures);
ALTER TABLE tasktable_batch_failures_archive ADD PRIMARY KEY (task_id, item);
