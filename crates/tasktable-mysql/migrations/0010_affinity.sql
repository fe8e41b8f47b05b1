-- Affinity (see docs/workers.md, "Affinity"): `affinity_ms` is how long a retry waits for
-- the worker of its previous attempt. While it waits, `affinity_until` is set, `target`
-- names that worker (so the claim's targeted lane hands it to that worker only) and
-- `affinity_target` keeps the task's own target, which the sweep puts back when the wait
-- ends or the worker is gone (tasktable_tasks_affinity finds those rows; MySQL has no
-- partial index, and the NULLs it holds are never read).
-- IF NOT EXISTS keeps each statement safe to run again (see 0001).
ALTER TABLE tasktable_tasks
    ADD COLUMN IF NOT EXISTS affinity_ms BIGINT,
    ADD COLUMN IF NOT EXISTS affinity_until DATETIME(6),
    ADD COLUMN IF NOT EXISTS affinity_target TEXT,
    ADD INDEX IF NOT EXISTS tasktable_tasks_affinity (affinity_until);
ALTER TABLE tasktable_tasks_archive
    ADD COLUMN IF NOT EXISTS affinity_ms BIGINT,
    ADD COLUMN IF NOT EXISTS affinity_until DATETIME(6),
    ADD COLUMN IF NOT EXISTS affinity_target TEXT;
