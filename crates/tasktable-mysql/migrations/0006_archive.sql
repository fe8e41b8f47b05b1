-- The archive (see docs/schema.md, "Retention"): a finished task that retention moves
-- instead of deleting goes to tasktable_tasks_archive with every column it had, and its
-- attempts to tasktable_attempts_archive, in the transaction that deletes them. The
-- columns are those of tasktable_tasks and tasktable_attempts, without their defaults,
-- checks, keys and foreign keys (an archived idempotency key may be used again by a new
-- task), so a migration that adds a column to either adds it here too; the conformance
-- suite archives every column and reads it back. Indexed by id and by finished_at, for
-- reading and pruning by age.

CREATE TABLE IF NOT EXISTS tasktable_tasks_archive (
    id                 BIGINT NOT NULL PRIMARY KEY,
    kind               VARCHAR(255) NOT NULL,
    queue              VARCHAR(255) NOT NULL,
    state              VARCHAR(16) NOT NULL,
    payload            JSON NOT NULL,
    result             JSON,
    checkpoint         JSON,
    progress           JSON,
    task_key           VARCHAR(255),
    idempotency_key    VARCHAR(255),
    priority           INT NOT NULL,
    run_at             DATETIME(6) NOT NULL,
    attempt            INT NOT NULL,
    max_attempts       INT NOT NULL,
    backoff_initial_ms BIGINT NOT NULL,
    backoff_multiplier DOUBLE NOT NULL,
    backoff_max_ms     BIGINT NOT NULL,
    backoff_jitter     DOUBLE NOT NULL,
    timeout_ms         BIGINT,
    lease_token        BIGINT NOT NULL,
    lease_credential   CHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
    lease_expires_at   DATETIME(6),
    deadline_at        DATETIME(6),
    worker_id          TEXT,
    worker_host        TEXT,
    last_error         LONGTEXT,
    created_at         DATETIME(6) NOT NULL,
    updated_at         DATETIME(6) NOT NULL,
    started_at         DATETIME(6),
    finished_at        DATETIME(6),
    schedule_id        BIGINT,
    slot_at            DATETIME(6),
    KEY tasktable_tasks_archive_finished (finished_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_attempts_archive (
    id          BIGINT NOT NULL PRIMARY KEY,
    task_id     BIGINT NOT NULL,
    attempt     INT NOT NULL,
    worker_id   TEXT,
    worker_host TEXT,
    started_at  DATETIME(6),
    finished_at DATETIME(6) NOT NULL,
    outcome     VARCHAR(32) NOT NULL,
    error       LONGTEXT,
    queue       VARCHAR(255),
    kind        VARCHAR(255),
    due_at      DATETIME(6),
    task_state  VARCHAR(16),
    KEY tasktable_attempts_archive_finished (finished_at),
    KEY tasktable_attempts_archive_task (task_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
