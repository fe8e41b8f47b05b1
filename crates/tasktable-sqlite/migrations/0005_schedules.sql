-- Recurring schedules (see docs/schedules.md). Each row is one schedule: when it fires
-- (recurrence), what it submits (template), its policies, and its place among its slots:
-- every slot at or before covered_until has been fired or settled, and next_run_at is
-- when it is next due (NULL while disabled or when it never fires again). Schedulers
-- read the schedules whose next_run_at has passed, through tasktable_schedules_due.
CREATE TABLE tasktable_schedules (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL UNIQUE,
    recurrence    TEXT    NOT NULL,
    template      TEXT    NOT NULL,
    missed        TEXT    NOT NULL,
    overlap       TEXT    NOT NULL CHECK (overlap IN ('allow', 'skip')),
    enabled       INTEGER NOT NULL,
    covered_until TEXT    NOT NULL,
    next_run_at   TEXT,
    -- The last task fired and its slot, for the overlap policy and for display.
    last_task_id  INTEGER,
    last_slot_at  TEXT,
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL
);
CREATE INDEX tasktable_schedules_due ON tasktable_schedules (next_run_at)
    WHERE next_run_at IS NOT NULL;

-- A fired task records its schedule and slot. Its idempotency key,
-- 'schedule:<id>:<slot>', is what lists a schedule's tasks (through the unique index
-- on it), so these columns need no index of their own.
ALTER TABLE tasktable_tasks ADD COLUMN schedule_id INTEGER;
ALTER TABLE tasktable_tasks ADD COLUMN slot_at TEXT;
