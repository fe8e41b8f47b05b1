-- Succeeded tasks leave tasktable_tasks_state. A finish is never a HOT update (it changes
-- `state`, which indexes read), so every version of a task row PostgreSQL writes gets an
-- entry in every index whose predicate it meets; with succeeded tasks out of this one, a
-- successful finish writes one index entry fewer and the index holds only the tasks that
-- its readers look for: the live ones (held, pending, running: counts per queue and kind,
-- the oldest due task, queue discovery, the limits' count of what runs) and those that
-- ended badly (filters by state). Readers of succeeded tasks (the queue list's counts, a
-- filter by `succeeded`, retention's pick) read the table in id order instead.
-- The index is rebuilt here, under the migration's lock: on a large table, upgrading
-- blocks writes to it for as long as the build takes.
DROP INDEX tasktable_tasks_state;
CREATE INDEX tasktable_tasks_state ON tasktable_tasks (state, queue, kind, run_at)
    WHERE state IN ('held', 'pending', 'running', 'failed', 'cancelled');
