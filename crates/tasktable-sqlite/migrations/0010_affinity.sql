-- Affinity (see docs/workers.md, "Affinity"): `affinity_ms` is how long a retry waits for
-- the worker of its previous attempt. While it waits, `affinity_until` is set, `target`
-- names that worker (so the claim's targeted lane hands it to that worker only) and
-- `affinity_target` keeps the task's own target, which the sweep puts back when the wait
-- ends or the worker is gone (tasktable_tasks_affinity finds those rows).
ALTER TABLE tasktable_tasks ADD COLUMN affinity_ms INTEGER;
ALTER TABLE tasktable_tasks ADD COLUMN affinity_until TEXT;
ALTER TABLE tasktable_tasks ADD COLUMN affinity_target TEXT;
ALTER TABLE tasktable_tasks_archive ADD COLUMN affinity_ms INTEGER;
ALTER TABLE tasktable_tasks_archive ADD COLUMN affinity_until TEXT;
ALTER TABLE tasktable_tasks_archive ADD COLUMN affinity_target TEXT;
CREATE INDEX tasktable_tasks_affinity ON tasktable_tasks (affinity_until)
    WHERE affinity_until IS NOT NULL;
