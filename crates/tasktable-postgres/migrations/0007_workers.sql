-- The worker registry (see docs/workers.md): one row per worker id, written by the
-- worker's heartbeat with the database's clock. A worker is gone when gone_at is set
-- (it left, or the reaper found it silent); `draining` is an operator's request, kept
-- while the worker is gone so a restart under the same id stays drained. `queues` is a
-- JSON array of names, JSON null for every queue. The reaper reads tasktable_workers_seen.
CREATE TABLE tasktable_workers (
    id           TEXT        PRIMARY KEY,
    host         TEXT        NOT NULL,
    address      TEXT,
    pid          BIGINT,
    version      TEXT        NOT NULL,
    worker_groups JSONB      NOT NULL,
    queues       JSONB,
    capacity     INTEGER     NOT NULL,
    protocol     TEXT        NOT NULL CHECK (protocol IN ('process', 'pull')),
    draining     BOOLEAN     NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    gone_at      TIMESTAMPTZ
);
CREATE INDEX tasktable_workers_seen ON tasktable_workers (last_seen_at);
