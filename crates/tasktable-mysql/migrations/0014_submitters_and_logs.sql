-- Who submitted each task, and the lines handlers log (docs/events.md).
--
-- created_by: the submitter as `kind:role:name` (`token:operator:deploy-bot`,
-- `system::scheduler`, `rust::rust`); NULL for tasks submitted before version 14.
--
-- tasktable_task_logs: short lines a handler wrote while it ran its task, at most 1,000 a
-- task, each at most 1 KiB; they go with their task (ON DELETE CASCADE), or to the
-- archive with it.

ALTER TABLE tasktable_tasks ADD COLUMN IF NOT EXISTS created_by TEXT;
ALTER TABLE tasktable_tasks_archive ADD COLUMN IF NOT EXISTS created_by TEXT;

CREATE TABLE IF NOT EXISTS tasktable_task_logs (
    id        BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id   BIGINT      NOT NULL,
    attempt   INT         NOT NULL,
    run       INT,
    logged_at DATETIME(6) NOT NULL,
    line      TEXT        NOT NULL,
    KEY tasktable_task_logs_task (task_id, id),
    CONSTRAINT tasktable_task_logs_task_fk FOREIGN KEY (task_id)
        REFERENCES tasktable_tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE TABLE IF NOT EXISTS tasktable_task_logs_archive (
    id        BIGINT      NOT NULL PRIMARY KEY,
    task_id   BIGINT      NOT NULL,
    attempt   INT         NOT NULL,
    run       INT,
    logged_at DATETIME(6) NOT NULL,
    line      TEXT        NOT NULL,
    KEY tasktable_task_logs_archive_task (task_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
