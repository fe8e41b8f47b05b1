-- The event log (docs/events.md): operators' changes and tasktable's own (a schedule
-- firing), one row each, written in the transaction of the change they record. What a
-- worker does is read from tasktable_attempts instead, so the claim and the finish write
-- nothing more. An event about a task goes with it: deleted with it (ON DELETE CASCADE),
-- or archived with it; the rest are pruned by age.

CREATE TABLE tasktable_events (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    happened_at TIMESTAMPTZ NOT NULL,
    event       TEXT        NOT NULL,
    task_id     BIGINT      REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    queue       TEXT,
    kind        TEXT,
    schedule_id BIGINT,
    worker_id   TEXT,
    actor_kind  TEXT        NOT NULL,
    actor       TEXT        NOT NULL,
    actor_role  TEXT,
    detail      JSONB
);

CREATE INDEX tasktable_events_task ON tasktable_events (task_id, id);
CREATE INDEX tasktable_events_time ON tasktable_events (happened_at);
CREATE INDEX tasktable_events_actor ON tasktable_events (actor, id);
CREATE INDEX tasktable_events_queue ON tasktable_events (queue, id);

CREATE TABLE tasktable_events_archive (
    id          BIGINT      PRIMARY KEY,
    happened_at TIMESTAMPTZ NOT NULL,
    event       TEXT        NOT NULL,
    task_id     BIGINT,
    queue       TEXT,
    kind        TEXT,
    schedule_id BIGINT,
    worker_id   TEXT,
    actor_kind  TEXT        NOT NULL,
    actor       TEXT        NOT NULL,
    actor_role  TEXT,
    detail      JSONB
);

CREATE INDEX tasktable_events_archive_task ON tasktable_events_archive (task_id, id);
