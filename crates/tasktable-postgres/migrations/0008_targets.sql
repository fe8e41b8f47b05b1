-- Who may run a task (see docs/workers.md, "Targets"): NULL for any worker, otherwise
-- the allowed worker ids or groups in core's stored form ('|w:alice|w:bob|', '|g:gpu|').
-- A claim reads two lanes: untargeted tasks through tasktable_tasks_claim, which from
-- now on holds only them, and targeted ones through tasktable_tasks_targeted, so tasks
-- waiting for a worker that is away never lengthen a claim of untargeted work.
ALTER TABLE tasktable_tasks ADD COLUMN target TEXT;
ALTER TABLE tasktable_tasks_archive ADD COLUMN target TEXT;
DROP INDEX tasktable_tasks_claim;
CREATE INDEX tasktable_tasks_claim ON tasktable_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'pending' AND target IS NULL;
CREATE INDEX tasktable_tasks_targeted ON tasktable_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'pending' AND target IS NOT NULL;
