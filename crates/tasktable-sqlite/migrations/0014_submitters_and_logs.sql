-- Who submitted each task, and the lines handlers log (docs/events.md).
--
-- created_by: the submitter as `kind:role:name` (`token:operator:deploy-bot`,
-- `system::scheduler`, `rust::rust`); NULL for tasks submitted before version 14.
--
-- tasktable_task_logs: short lines a handler wrote while it ran its task, at most 1,000 a
-- task, each at most 1 KiB; they go with their task (ON DELETE CASCADE), or to the
-- archive with it.

ALTER TABLE tasktable_tasks ADD COLUMN created_by TEXT;
ALTER TABLE tasktable_tasks_archive ADD COLUMN created_by TEXT;

CREATE TABLE tasktable_task_logs (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id   INTEGER NOT NULL REFERENCES tasktable_tasks (id) ON DELETE CASCADE,
    attempt   INTEGER NOT NULL,
    run       INTEGER,
    logged_at TEXT    NOT NULL,
    line      TEXT    NOT NULL
);

CREATE INDEX tasktable_task_logs_task ON tasktable_task_logs (task_id, id);

CREATE TABLE tasktable_task_logs_archive (
    id        INTEGER PRIMARY KEY,
    task_id   INTEGER NOT NULL,
    attempt   INTEGER NOT NULL,
    run       INTEGER,
    logged_at TEXT    NOT NULL,
    line      TEXT    NOT NULL
);

CREATE INDEX tasktable_task_logs_archive_task ON tasktable_task_logs_archive (task_id, id);
