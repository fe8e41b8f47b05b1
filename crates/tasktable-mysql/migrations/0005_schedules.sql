-- Recurring schedules (see docs/schedules.md). Each row is one schedule: when it fires
-- (recurrence), what it submits (template), its policies, and its place among its slots:
-- every slot at or before covered_until has been fired or settled, and next_run_at is
-- when it is next due (NULL while disabled or when it never fires again). Schedulers
-- read the schedules whose next_run_at has passed, through tasktable_schedules_due.
-- IF NOT EXISTS keeps each statement safe to run again (see 0001).
CREATE TABLE IF NOT EXISTS tasktable_schedules (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name          VARCHAR(255) NOT NULL,
    recurrence    JSON         NOT NULL,
    template      JSON         NOT NULL,
    missed        JSON         NOT NULL,
    overlap       VARCHAR(16)  NOT NULL,
    enabled       BOOLEAN      NOT NULL,
    covered_until DATETIME(6)  NOT NULL,
    next_run_at   DATETIME(6),
    -- The last task fired and its slot, for the overlap policy and for display.
    last_task_id  BIGINT,
    last_slot_at  DATETIME(6),
    created_at    DATETIME(6)  NOT NULL,
    updated_at    DATETIME(6)  NOT NULL,
    CONSTRAINT tasktable_schedules_overlap_check CHECK (overlap IN ('allow', 'skip')),
    UNIQUE KEY tasktable_schedules_name (name),
    KEY tasktable_schedules_due (next_run_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- A fired task records its schedule and slot. Its idempotency key,
-- 'schedule:<id>:<slot>', is what lists a schedule's tasks (through the unique index
-- on it), so these columns need no index of their own.
ALTER TABLE tasktable_tasks
    ADD COLUMN IF NOT EXISTS schedule_id BIGINT,
    ADD COLUMN IF NOT EXISTS slot_at     DATETIME(6);
