-- Batches (docs/batches.md): a batch is a task whose payload is the data its items read;
-- its spec, progress and operators' control live in tasktable_batches, one row per batch
-- task, and the items that failed for good (up to a cap) in tasktable_batch_failures.

CREATE TABLE IF NOT EXISTS tasktable_batches (
    task_id             BIGINT NOT NULL,
    items               BIGINT,
    parallelism         INT NOT NULL,
    rate                INT,
    window_size         BIGINT NOT NULL,
    error_budget        BIGINT NOT NULL,
    item_retries        INT NOT NULL,
    item_backoff_ms     BIGINT NOT NULL,
    prestart_timeout_ms BIGINT NOT NULL,
    control             VARCHAR(16) NOT NULL,
    low_water           BIGINT NOT NULL,
    end_at              BIGINT,
    errors              BIGINT NOT NULL,
    items_per_second    DOUBLE,
    data_version        BIGINT NOT NULL,
    saved_at            DATETIME(6),
    created_at          DATETIME(6) NOT NULL,
    PRIMARY KEY (task_id),
    CONSTRAINT tasktable_batches_task_fk FOREIGN KEY (task_id)
        REFERENCES tasktable_tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_batch_failures (
    task_id   BIGINT      NOT NULL,
    item      BIGINT      NOT NULL,
    error     LONGTEXT    NOT NULL,
    tries     INT         NOT NULL,
    failed_at DATETIME(6) NOT NULL,
    PRIMARY KEY (task_id, item),
    CONSTRAINT tasktable_batch_failures_task_fk FOREIGN KEY (task_id)
        REFERENCES tasktable_tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_batches_archive (
    task_id             BIGINT NOT NULL,
    items               BIGINT,
    parallelism         INT NOT NULL,
    rate                INT,
    window_size         BIGINT NOT NULL,
    error_budget        BIGINT NOT NULL,
    item_retries        INT NOT NULL,
    item_backoff_ms     BIGINT NOT NULL,
    prestart_timeout_ms BIGINT NOT NULL,
    control             VARCHAR(16) NOT NULL,
    low_water           BIGINT NOT NULL,
    end_at              BIGINT,
    errors              BIGINT NOT NULL,
    items_per_second    DOUBLE,
    data_version        BIGINT NOT NULL,
    saved_at            DATETIME(6),
    created_at          DATETIME(6) NOT NULL,
    PRIMARY KEY (task_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_batch_failures_archive (
    task_id   BIGINT      NOT NULL,
    item      BIGINT      NOT NULL,
    error     LONGTEXT    NOT NULL,
    tries     INT         NOT NULL,
    failed_at DATETIME(6) NOT NULL,
    PRIMARY KEY (task_id, item)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
