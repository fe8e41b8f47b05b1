-- tasktable schema, version 1 (MySQL 8 and MariaDB 10.6+).
-- Same tables and columns as the SQLite and PostgreSQL schemas. The differences, each
-- forced by the dialect:
--
-- * Every statement is idempotent (IF NOT EXISTS, indexes declared inside CREATE TABLE),
--   because MySQL commits each DDL statement on its own: a migration cut short half-way
--   cannot roll back, so it must be safe to run again from the top.
-- * Timestamps are DATETIME(6): UTC wall-clock values with microseconds, written from
--   UTC_TIMESTAMP(6), so no session or server time zone can shift them. (TIMESTAMP would
--   convert through the session zone and ends in 2038.)
-- * Names that are indexed (kind, queue, keys) are VARCHAR(255): InnoDB cannot index a
--   whole TEXT column, and tasktable limits names to 255 characters. Text compares with a
--   NO PAD binary collation, so comparisons are case-sensitive, sort in byte order and
--   'a' differs from 'a ' (as on PostgreSQL and SQLite). MySQL and MariaDB have no such
--   collation in common: this file names MariaDB's, and the migrator substitutes
--   MySQL's utf8mb4_0900_bin when it runs on MySQL.
-- * There are no partial indexes, so the claim and lease indexes lead with `state`.
-- * JSON documents are JSON: native on MySQL, LONGTEXT checked by JSON_VALID on MariaDB.

CREATE TABLE IF NOT EXISTS tasktable_tasks (
    id                 BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind               VARCHAR(255) NOT NULL,
    queue              VARCHAR(255) NOT NULL,
    state              VARCHAR(16)  NOT NULL,
    payload            JSON         NOT NULL,
    result             JSON,
    checkpoint         JSON,
    progress           JSON,
    task_key           VARCHAR(255),
    idempotency_key    VARCHAR(255),
    priority           INT          NOT NULL DEFAULT 0,
    run_at             DATETIME(6)  NOT NULL,
    attempt            INT          NOT NULL DEFAULT 0,
    max_attempts       INT          NOT NULL,
    backoff_initial_ms BIGINT       NOT NULL,
    backoff_multiplier DOUBLE       NOT NULL,
    backoff_max_ms     BIGINT       NOT NULL,
    backoff_jitter     DOUBLE       NOT NULL,
    timeout_ms         BIGINT,
    lease_token        BIGINT       NOT NULL DEFAULT 0,
    lease_expires_at   DATETIME(6),
    deadline_at        DATETIME(6),
    worker_id          TEXT,
    worker_host        TEXT,
    last_error         LONGTEXT,
    created_at         DATETIME(6)  NOT NULL,
    updated_at         DATETIME(6)  NOT NULL,
    started_at         DATETIME(6),
    finished_at        DATETIME(6),
    CONSTRAINT tasktable_tasks_state_check
        CHECK (state IN ('held', 'pending', 'running', 'succeeded', 'failed', 'cancelled')),
    -- NULLs never collide in a unique index, so tasks without a key are not limited.
    UNIQUE KEY tasktable_tasks_idempotency_key (idempotency_key),
    -- The claim reads this index in claim order (state and queue fixed, then priority
    -- high to low, run_at, id) and stops after LIMIT rows, so it locks only what it takes.
    -- DESC needs MySQL 8 or MariaDB 10.8+; older MariaDB ignores it and the claim sorts.
    KEY tasktable_tasks_claim (state, queue, priority DESC, run_at, id),
    -- The rescuer's scan for expired leases (state = 'running').
    KEY tasktable_tasks_lease (state, lease_expires_at),
    KEY tasktable_tasks_state (state, queue, kind),
    KEY tasktable_tasks_kind (kind, id),
    KEY tasktable_tasks_key (task_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_attempts (
    id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id     BIGINT      NOT NULL,
    attempt     INT         NOT NULL,
    worker_id   TEXT,
    worker_host TEXT,
    started_at  DATETIME(6),
    finished_at DATETIME(6) NOT NULL,
    outcome     VARCHAR(32) NOT NULL,
    error       LONGTEXT,
    KEY tasktable_attempts_task (task_id, id),
    CONSTRAINT tasktable_attempts_task_fk FOREIGN KEY (task_id)
        REFERENCES tasktable_tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_queues (
    name       VARCHAR(255) NOT NULL PRIMARY KEY,
    paused     BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
