-- The event log (docs/events.md): operators' changes and tasktable's own (a schedule
-- firing), one row each, written in the transaction of the change they record. What a
-- worker does is read from tasktable_attempts instead, so the claim and the finish write
-- nothing more. An event about a task goes with it: deleted with it (ON DELETE CASCADE),
-- or archived with it; the rest are pruned by age.

CREATE TABLE IF NOT EXISTS tasktable_events (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    happened_at DATETIME(6)  NOT NULL,
    event       VARCHAR(32)  NOT NULL,
    task_id     BIGINT,
    queue       VARCHAR(255),
    kind        VARCHAR(255),
    schedule_id BIGINT,
    worker_id   VARCHAR(255),
    actor_kind  VARCHAR(16)  NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    actor_role  VARCHAR(255),
    detail      JSON,
    KEY tasktable_events_task (task_id, id),
    KEY tasktable_events_time (happened_at),
    KEY tasktable_events_actor (actor, id),
    KEY tasktable_events_queue (queue, id),
    CONSTRAINT tasktable_events_task_fk FOREIGN KEY (task_id)
        REFERENCES tasktable_tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_events_archive (
    id          BIGINT       NOT NULL PRIMARY KEY,
    happened_at DATETIME(6)  NOT NULL,
    event       VARCHAR(32)  NOT NULL,
    task_id     BIGINT,
    queue       VARCHAR(255),
    kind        VARCHAR(255),
    schedule_id BIGINT,
    worker_id   VARCHAR(255),
    actor_kind  VARCHAR(16)  NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    actor_role  VARCHAR(255),
    detail      JSON,
    KEY tasktable_events_archive_task (task_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
