-- The worker registry (see docs/workers.md): one row per worker id, written by the
-- worker's heartbeat with the database's clock. A worker is gone when gone_at is set
-- (it left, or the reaper found it silent); `draining` is an operator's request, kept
-- while the worker is gone so a restart under the same id stays drained. `queues` is a
-- JSON array of names, JSON null for every queue. The reaper reads tasktable_workers_seen.
-- IF NOT EXISTS keeps each statement safe to run again (see 0001).
CREATE TABLE IF NOT EXISTS tasktable_workers (
    id           VARCHAR(255) NOT NULL PRIMARY KEY,
    host         VARCHAR(255) NOT NULL,
    address      VARCHAR(255),
    pid          BIGINT,
    version      VARCHAR(255) NOT NULL,
    worker_groups JSON        NOT NULL,
    queues       JSON,
    capacity     INT          NOT NULL,
    protocol     VARCHAR(16)  NOT NULL,
    draining     BOOLEAN      NOT NULL,
    started_at   DATETIME(6)  NOT NULL,
    last_seen_at DATETIME(6)  NOT NULL,
    gone_at      DATETIME(6),
    CONSTRAINT tasktable_workers_protocol_check CHECK (protocol IN ('process', 'pull')),
    KEY tasktable_workers_seen (last_seen_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
