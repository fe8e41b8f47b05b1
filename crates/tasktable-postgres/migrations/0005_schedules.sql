-- Recurring schedules (see docs/schedules.md). Each row is one schedule: when it fires
-- (recurrence), what it submits (template), its policies, and its place among its slots:
-- every slot at or before covered_until has been fired or settled, and next_run_at is
-- when it is next due (NULL while disabled or when it never fires again). Schedulers
-- read the schedules whose next_run_at has passed, through tasktable_schedules_due.
CREATE TABLE tasktable_schedules (
    id            BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          TEXT        NOT NULL UNIQUE,
    recurrence    JSONB       NOT NULL,
    template      JSONB       NOT NULL,
    missed        JSONB       NOT NULL,
    overlap       TEXT        NOT NULL CHECK (overlap IN ('allow', 'skip')),
    enabled       BOOLEAN     NOT NULL,
    covered_until TIMESTAMPTZ NOT NULL,
    next_run_at   TIMESTAMPTZ,
    -- The last task fired and its slot, for the overlap policy and for display.
    last_task_id  BIGINT,
    last_slot_at  TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX tasktable_schedules_due ON tasktable_schedules (next_run_at)
    WHERE next_run_at IS NOT NULL;

-- A fired task records its schedule and slot. Its idempotency key,
-- 'schedule:<id>:<slot>', is what lists a schedule's tasks (through the unique index
-- on it), so these columns need no index of their own. Nullable columns without a
-- default: adding them rewrites nothing.
ALTER TABLE tasktable_tasks ADD COLUMN schedule_id BIGINT, ADD COLUMN slot_at TIMESTAMPTZ;
