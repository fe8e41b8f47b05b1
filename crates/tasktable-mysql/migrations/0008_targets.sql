-- Who may run a task (see docs/workers.md, "Targets"): NULL for any worker, otherwise
-- the allowed worker ids or groups in core's stored form ('|w:alice|w:bob|', '|g:gpu|').
-- A claim reads two lanes, untargeted and targeted tasks, each in claim order: MySQL has
-- no partial indexes, so `targeted` (generated from target, never written) splits the
-- claim index after its queue, and tasks waiting for a worker that is away never
-- lengthen a claim of untargeted work.
ALTER TABLE tasktable_tasks
    ADD COLUMN IF NOT EXISTS target TEXT,
    ADD COLUMN IF NOT EXISTS targeted TINYINT GENERATED ALWAYS AS (target IS NOT NULL) STORED;
ALTER TABLE tasktable_tasks
    DROP INDEX IF EXISTS tasktable_tasks_claim,
    ADD INDEX tasktable_tasks_claim (state, queue, targeted, priority DESC, run_at, id);
ALTER TABLE tasktable_tasks_archive ADD COLUMN IF NOT EXISTS target TEXT;
