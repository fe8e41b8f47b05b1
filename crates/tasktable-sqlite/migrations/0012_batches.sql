-- Batches (docs/batches.md): a batch is a task whose payload is the data its items read;
-- its spec, progress and operators' control live in tasktable_batches, one row per batch
-- task, and the items that failed for good (up to a cap) in tasktable_batch_failures.

CREATE TABLE tasktable_batches (
    task_id             INTEGER PRIMARY KEY REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    items               INTEGER,
    parallelism         INTEGER NOT NULL,
    rate                INTEGER,
    window_size         INTEGER NOT NULL,
    error_budget        INTEGER NOT NULL,
    item_retries        INTEGER NOT NULL,
    item_backoff_ms     INTEGER NOT NULL,
    prestart_timeout_ms INTEGER NOT NULL,
    control             TEXT NOT NULL,
    low_water           INTEGER NOT NULL,
    end_at              INTEGER,
    errors              INTEGER NOT NULL,
    items_per_second    REAL,
    data_version        INTEGER NOT NULL,
    saved_at            TEXT,
    created_at          TEXT NOT NULL
);

CREATE TABLE tasktable_batch_failures (
    task_id   INTEGER NOT NULL REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    item      INTEGER NOT NULL,
    error     TEXT NOT NULL,
    tries     INTEGER NOT NULL,
    failed_at TEXT NOT NULL,
    PRIMARY KEY (task_id, item)
);

CREATE TABLE tasktable_batches_archive (
    task_id             INTEGER PRIMARY KEY,
    items               INTEGER,
    parallelism         INTEGER NOT NULL,
    rate                INTEGER,
    window_size         INTEGER NOT NULL,
    error_budget        INTEGER NOT NULL,
    item_retries        INTEGER NOT NULL,
    item_backoff_ms     INTEGER NOT NULL,
    prestart_timeout_ms INTEGER NOT NULL,
    control             TEXT NOT NULL,
    low_water           INTEGER NOT NULL,
    end_at              INTEGER,
    errors              INTEGER NOT NULL,
    items_per_second    REAL,
    data_version        INTEGER NOT NULL,
    saved_at            TEXT,
    created_at          TEXT NOT NULL
);

CREATE TABLE tasktable_batch_failures_archive (
    task_id   INTEGER NOT NULL,
    item      INTEGER NOT NULL,
    error     TEXT NOT NULL,
    tries     INTEGER NOT NULL,
    failed_at TEXT NOT NULL,
    PRIMARY KEY (task_id, item)
);
