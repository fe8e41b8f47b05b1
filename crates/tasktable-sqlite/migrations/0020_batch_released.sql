-- A batch submitted held waits for the business's start [S2] through pauses, stops and
-- resumes: `released_at` says when the business started it (its `start`, or its submit
-- when it was not submitted held), so that a resume knows whether to run the batch or to
-- let it wait again (core's `batch::awaits_start`). Batches from before this version
-- that still wait (held, never run, not paused) keep waiting; the rest count as started
-- at their submit, as they did.
ALTER TABLE tasktable_batches ADD COLUMN released_at TEXT;
ALTER TABLE tasktable_batches_archive ADD COLUMN released_at TEXT;
UPDATE tasktable_batches SET released_at = created_at
WHERE NOT EXISTS (
    SELECT 1 FROM tasktable_tasks t
    WHERE t.id = tasktable_batches.task_id AND t.state = 'held' AND t.attempt = 0
      AND tasktable_batches.control = 'run' AND tasktable_batches.saved_at IS NULL
);
UPDATE tasktable_batches_archive SET released_at = created_at;
